import CacheCore
import FuzzSupport
@testable import Proxy
import Settings

/// Byte ranges from outside: `Range` request headers (RFC 9110 section 14) and the CLI's
/// `--range` (the same range-spec grammar, whose positions may be sizes such as `10M-30M`),
/// resolved against a file length the input also picks. Invariants: every resolved range is
/// non-empty and lies within the file, and a parsed `first-last` never ends before it starts.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzByteRanges(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let length = input.offset()
    let commandLine = input.bool()
    let text = input.restText()
    let specs: [ByteRangeSpec]
    if commandLine {
        guard let spec = try? ByteRangeSpec.parse(text, position: { position, which in
            ByteSize.rangePosition(position, isEnd: which == .last)
        }) else { return 0 }
        if case let .closed(first, last) = spec {
            fuzzCheck(first <= last, "--range \(text.debugDescription) parsed to \(spec)")
        }
        specs = [spec]
    } else {
        guard let parsed = ByteRanges.parse(text) else { return 0 }
        fuzzCheck(!parsed.isEmpty, "parse returned an empty range set for \(text.debugDescription)")
        specs = parsed
    }
    for range in ByteRanges.resolve(specs, length: length) {
        fuzzCheck(!range.isEmpty && range.lowerBound >= 0 && range.upperBound <= length,
                  "\(text.debugDescription) resolved to \(range) in a file of \(length) bytes")
    }
    return 0
}
