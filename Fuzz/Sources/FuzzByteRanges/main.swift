import FuzzSupport
@testable import Proxy

/// `Range` request headers (RFC 9110 section 14), resolved against a file length the input also
/// picks. Invariants: every resolved range is non-empty and lies within the file.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzByteRanges(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let length = input.offset()
    let header = input.restText()
    guard let specs = ByteRanges.parse(header) else { return 0 }
    fuzzCheck(!specs.isEmpty, "parse returned an empty range set for \(header.debugDescription)")
    for range in ByteRanges.resolve(specs, length: length) {
        fuzzCheck(!range.isEmpty && range.lowerBound >= 0 && range.upperBound <= length,
                  "\(header.debugDescription) resolved to \(range) in a file of \(length) bytes")
    }
    return 0
}
