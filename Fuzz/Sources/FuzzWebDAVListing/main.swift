import Foundation
import FuzzSupport
@testable import FuseMount

/// WebDAV PROPFIND answers (207 multistatus). Invariants, as for the HTML and JSON listings: every
/// entry is a name the kernel accepts, names are unique, each URL is under the listed folder (a
/// folder's ends in `/`), sizes are not negative, and the parser never expands an entity.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebDAVListing(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let base = input.bool() ? "http://dav.example/media/" : "https://dav.example:8443/a%20b/c/"
    guard let entries = try? WebDAVListing.parse(input.rest, url: base, logger: silentLogger) else { return 0 }
    var names = Set<String>()
    for e in entries {
        fuzzCheck(DirectoryListing.rejection(of: e.name) == nil, "a name the mount cannot show: \(e.name.debugDescription)")
        fuzzCheck(names.insert(e.name).inserted, "listed twice: \(e.name.debugDescription)")
        fuzzCheck(e.url.hasPrefix(base), "\(e.url) is not under \(base)")
        fuzzCheck(!e.isDirectory || e.url.hasSuffix("/"), "a folder URL without its slash: \(e.url)")
        fuzzCheck(e.size.map { $0 >= 0 } ?? true, "negative size for \(e.name.debugDescription)")
    }
    return 0
}
