import Foundation
import FuzzSupport
@testable import FuseMount

/// `--url-list` files, as users write them. Invariants: every entry's path is made of names the
/// kernel accepts, and its URL has no control character and no blank at either end (either
/// would make a file that always fails).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURLList(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let entries = try? URLListParser.parse(text) else { return 0 }
    for entry in entries {
        let spec = entry.spec
        fuzzCheck(!spec.path.isEmpty, "an entry without a path at line \(entry.line)")
        for name in spec.path {
            fuzzCheck(!name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\0"),
                      "bad name \(name.debugDescription) at line \(entry.line)")
            fuzzCheck(name.utf8.count <= PathName.maxComponentBytes, "a name of \(name.utf8.count) bytes")
        }
        fuzzCheck(!hasControlCharacter(spec.url), "a control character in \(spec.url.debugDescription)")
        fuzzCheck(spec.url.trimmingCharacters(in: .whitespaces) == spec.url, "blanks around \(spec.url.debugDescription)")
    }
    return 0
}
