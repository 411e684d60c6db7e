import Foundation
import FuzzSupport
@testable import CacheCore

/// URLs as people and servers write them, put in their one spelling (`URLSpelling`).
/// Invariants: a URL it accepts comes out as printable ASCII that Foundation parses as an
/// http(s) URL with a host (never a dead link), in the same spelling when given again
/// (idempotent), and with the same cache key as the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURLSpelling(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let normal = try? URLSpelling.normalize(text) else { return 0 }
    fuzzCheck(normal.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "not printable ASCII: \(normal.debugDescription)")
    fuzzCheck(normal.hasPrefix("http://") || normal.hasPrefix("https://"), "not http(s): \(normal.debugDescription)")
    let parsed = URLComponents(string: normal)
    fuzzCheck(parsed != nil && !(parsed?.host ?? "").isEmpty, "Foundation does not parse \(normal.debugDescription)")
    fuzzCheck((try? URLSpelling.normalize(normal)) == normal, "not idempotent: \(normal.debugDescription)")
    if let k1 = try? KeyRules().key(for: text) {
        fuzzCheck((try? KeyRules().key(for: normal)) == k1, "another key for \(text.debugDescription)")
    }
    return 0
}
