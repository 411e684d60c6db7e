import CacheCore
import Foundation
import FuzzSupport
@testable import Fetcher

/// Response header blocks from an origin, line by line as libcurl hands them over, and the values
/// the fetcher reads from them: Content-Length, Content-Range, Retry-After, Accept-Ranges and the
/// HTTP-dates of Last-Modified. Invariants: a Content-Range is a non-empty range inside its
/// total, lengths and delays are never negative, and a formatted HTTP-date parses back.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHeaders(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var parser = ResponseHeaderParser()
    var blocks: [ResponseHeaderBlock] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if let block = parser.feed(String(line) + "\n") { blocks.append(block) }
    }
    blocks.append(parser.current)
    for block in blocks {
        _ = block.isInterim
        _ = block.advertisesByteRanges
        if let length = block.contentLength { fuzzCheck(length >= 0, "Content-Length \(length)") }
        if let delay = block.retryAfter { fuzzCheck(delay >= 0, "Retry-After \(delay)") }
        if let range = block.contentRange {
            fuzzCheck(range.start >= 0 && range.start < range.end, "Content-Range \(range)")
            if let total = range.total { fuzzCheck(range.end <= total, "Content-Range \(range) past its total") }
        }
        for value in [block.lastModified, block.field("date")].compactMap({ $0 }) {
            guard let date = HTTPDate.parse(value) else { continue }
            let formatted = HTTPDate.format(date)
            let again = HTTPDate.parse(formatted)
            fuzzCheck(again.map { abs($0.timeIntervalSince(date)) < 1 } ?? false,
                      "\(value.debugDescription) parsed to \(date), formatted \(formatted), which parses to \(String(describing: again))")
        }
    }
    return 0
}
