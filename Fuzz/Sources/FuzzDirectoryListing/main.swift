import Foundation
import FuzzSupport
@testable import FuseMount

/// Directory listings from an index URL (nginx/Apache/lighttpd HTML, nginx JSON). Invariants:
/// every entry is a name the kernel accepts (no `/`, NUL or control character, not `.`/`..`, at
/// most 255 bytes), names are unique, and each URL is under the listed directory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDirectoryListing(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let base = input.bool() ? "http://files.example/pub/" : "https://files.example:8443/a%20b/c/"
    guard let entries = try? DirectoryListing.parse(input.rest, url: base, logger: silentLogger) else { return 0 }
    var names = Set<String>()
    for e in entries {
        fuzzCheck(DirectoryListing.rejection(of: e.name) == nil, "a name the mount cannot show: \(e.name.debugDescription)")
        fuzzCheck(!hasControlCharacter(e.name), "a control character in \(e.name.debugDescription)")
        fuzzCheck(e.name.utf8.count <= PathName.maxComponentBytes, "a name of \(e.name.utf8.count) bytes")
        fuzzCheck(names.insert(e.name).inserted, "listed twice: \(e.name.debugDescription)")
        fuzzCheck(e.url.hasPrefix(base), "\(e.url) is not under \(base)")
        fuzzCheck(e.size.map { $0 >= 0 } ?? true, "negative size for \(e.name.debugDescription)")
    }
    return 0
}
