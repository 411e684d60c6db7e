import CacheCore
@testable import Fetcher
import XCTest

/// A resume of a version without a strong validator asks again for the last bytes it delivered
/// and compares them before delivering anything new (issue 36, item 5). Header blocks and bytes
/// in, decisions out: no sockets.
final class ResumeOverlapTests: XCTestCase {
    let url = "http://origin/f"
    let policy = RetryPolicy(maxRetries: 2, baseDelay: 0.5, maxDelay: 30)
    let lastModified = "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT"
    /// The old version, and another of the same length (a same-second replacement).
    let old = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
    var new: [UInt8] { old.map { $0 ^ 0x5a } }

    private func block(_ lines: [String]) -> ResponseHeaderBlock {
        var parser = ResponseHeaderParser()
        var result: ResponseHeaderBlock?
        for line in lines + [""] { result = parser.feed(line + "\r\n") ?? result }
        return result!
    }

    private func partial(_ start: Int, validators: [String]) -> ResponseHeaderBlock {
        block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes \(start)-19999/20000",
               "Content-Length: \(20_000 - start)", "Accept-Ranges: bytes"] + validators)
    }

    private func whole(validators: [String]) -> ResponseHeaderBlock {
        block(["HTTP/1.1 200 OK", "Content-Length: 20000"] + validators)
    }

    /// A transfer of the whole file, as a range from 0, whose first answer carried `validators`
    /// and broke after `delivered` bytes of the old version.
    private func interrupted(after delivered: Int, validators: [String], ignoreETag: Bool = false) -> TransferState {
        var request = FetchRequest(url: url, start: 0, end: 20_000)
        request.ignoreETag = ignoreETag
        var s = TransferState(request: request, policy: policy)
        _ = s.beginAttempt()
        guard case .deliver = s.receiveHead(partial(0, validators: validators), finalURL: url) else {
            XCTFail("the first answer is the head")
            return s
        }
        XCTAssertEqual(s.receiveBody(Array(old[0..<delivered])).length, delivered)
        XCTAssertEqual(s.attemptEnded(.failed(message: "reset", retryable: true)), .retry(after: delivered > 0 ? 0 : 0.5))
        return s
    }

    /// Feeds `bytes` in chunks of `chunk`; returns what reached the sink, stopping at an abort.
    private func feed(_ s: inout TransferState, _ bytes: [UInt8], chunk: Int) -> [UInt8] {
        var out: [UInt8] = []
        var at = 0
        while at < bytes.count, s.abort == nil {
            let piece = Array(bytes[at..<min(bytes.count, at + chunk)])
            let (offset, length) = s.receiveBody(piece)
            out += piece[offset..<(offset + length)]
            at += piece.count
        }
        return out
    }

    // MARK: What a resume asks

    func testAResumeAsksAgainForTheLastBytesDeliveredUnlessTheETagIsStrong() {
        let rows: [(String, [String], Bool, delivered: Int, range: String, ifRange: String?)] = [
            ("strong ETag", ["ETag: \"v1\"", lastModified], false, 6000, "bytes=6000-19999", "\"v1\""),
            ("no validator at all", [], false, 6000, "bytes=1904-19999", nil),
            ("Last-Modified alone", [lastModified], false, 6000, "bytes=1904-19999", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("weak ETag", ["ETag: W/\"v1\"", lastModified], false, 6000, "bytes=1904-19999", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("ETags ignored", ["ETag: \"v1\"", lastModified], true, 6000, "bytes=1904-19999", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("fewer than 4 KiB delivered", [lastModified], false, 1000, "bytes=0-19999", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("nothing delivered", [lastModified], false, 0, "bytes=0-19999", "Mon, 01 Jan 2024 00:00:00 GMT"),
        ]
        for (name, validators, ignore, delivered, range, ifRange) in rows {
            var s = interrupted(after: delivered, validators: validators, ignoreETag: ignore)
            let asked = s.beginAttempt()
            XCTAssertEqual(asked.range, range, name)
            XCTAssertEqual(asked.ifRange, ifRange, name)
            XCTAssertEqual(s.resumeOffset, Int64(delivered), "\(name): the sink is owed the same byte")
        }
    }

    func testOnlyAStrongUnrotatingUnignoredETagShowsAChange() {
        func head(_ etag: String?, rotating: Bool = false) -> ResponseHead {
            var h = ResponseHead(status: 206, finalURL: url, bodyStart: 0, totalLength: 10, etag: etag,
                                 lastModified: "Mon, 01 Jan 2024 00:00:00 GMT", acceptsRanges: true)
            h.etagRotating = rotating
            return h
        }
        let rows: [(String, ResponseHead, Bool, Bool)] = [
            ("strong", head("\"v1\""), false, true),
            ("strong, ignored", head("\"v1\""), true, false),
            ("strong, rotating", head("\"rot-1\"", rotating: true), false, false),
            ("weak", head("W/\"v1\""), false, false),
            ("none (Last-Modified only)", head(nil), false, false),
        ]
        for (name, h, ignore, strong) in rows {
            XCTAssertEqual(TransferState.hasStrongValidator(h, ignoringETag: ignore), strong, name)
        }
    }

    // MARK: What a resumed answer delivers

    func testEqualBytesBeforeTheResumePointAreDroppedAndTheRestDelivered() {
        for chunk in [1, 1000, 4096, 5000, 20_000] {
            var s = interrupted(after: 6000, validators: [lastModified])
            _ = s.beginAttempt()
            XCTAssertEqual(s.receiveHead(partial(1904, validators: [lastModified]), finalURL: url), .proceed)
            let delivered = feed(&s, Array(old[1904...]), chunk: chunk)
            XCTAssertNil(s.abort, "chunks of \(chunk)")
            XCTAssertEqual(delivered, Array(old[6000...]), "chunks of \(chunk): nothing delivered twice, nothing missing")
            XCTAssertEqual(s.attemptEnded(.ok), .finish(nil))
        }
    }

    func testOtherBytesBeforeTheResumePointEndTheTransferBeforeAnyNewByteIsDelivered() {
        // Other bytes from the first (chunks of 5000), or only the very last one of the 4096.
        var lastDiffers = old
        lastDiffers[5999] ^= 1
        for (name, version, chunk) in [("another version", new, 5000), ("the last byte differs", lastDiffers, 4095),
                                       ("byte by byte", new, 1)] {
            var s = interrupted(after: 6000, validators: [lastModified])
            _ = s.beginAttempt()
            XCTAssertEqual(s.receiveHead(partial(1904, validators: [lastModified]), finalURL: url), .proceed, name)
            let delivered = feed(&s, Array(version[1904...]), chunk: chunk)
            XCTAssertEqual(delivered, [], "\(name): the sink never got a byte of the other version")
            XCTAssertEqual(s.abort, .fail(.remoteChanged(url: url)), name)
            XCTAssertEqual(s.changeDetail?.contains("before the resume point"), true, name)
            XCTAssertEqual(s.delivered, 6000, name)
            XCTAssertEqual(s.attemptEnded(.failed(message: "write error", retryable: false)),
                           .finish(.remoteChanged(url: url)), name)
        }
    }

    func testA200ToTheResumeIsComparedInItsSkippedLead() {
        for (version, changed) in [(old, false), (new, true)] {
            var s = interrupted(after: 6000, validators: [lastModified])
            _ = s.beginAttempt()
            XCTAssertEqual(s.receiveHead(whole(validators: [lastModified]), finalURL: url), .proceed)
            let delivered = feed(&s, version, chunk: 3000)
            if changed {
                XCTAssertEqual(delivered, [], "the lead before the resume point differs: nothing new delivered")
                XCTAssertEqual(s.abort, .fail(.remoteChanged(url: url)))
            } else {
                XCTAssertEqual(delivered, Array(old[6000...]))
                XCTAssertEqual(s.attemptEnded(.ok), .finish(nil))
            }
        }
    }

    func testAResumeThatBreaksInsideTheComparedBytesAsksForThemAgain() {
        var s = interrupted(after: 6000, validators: [lastModified])
        _ = s.beginAttempt()
        _ = s.receiveHead(partial(1904, validators: [lastModified]), finalURL: url)
        XCTAssertEqual(feed(&s, Array(old[1904..<3000]), chunk: 500), [])
        XCTAssertEqual(s.attemptEnded(.failed(message: "reset", retryable: true)), .retry(after: 1),
                       "compared bytes are no progress: the second failure in a row waits")
        XCTAssertEqual(s.beginAttempt().range, "bytes=1904-19999", "the same bytes, compared from their start")
        _ = s.receiveHead(partial(1904, validators: [lastModified]), finalURL: url)
        XCTAssertEqual(feed(&s, Array(old[1904...]), chunk: 7000), Array(old[6000...]))
    }

    func testASecondResumeComparesTheBytesTheFirstDeliveredLast() {
        var s = interrupted(after: 6000, validators: [lastModified])
        _ = s.beginAttempt()
        _ = s.receiveHead(partial(1904, validators: [lastModified]), finalURL: url)
        XCTAssertEqual(feed(&s, Array(old[1904..<12_000]), chunk: 333), Array(old[6000..<12_000]))
        _ = s.attemptEnded(.failed(message: "reset", retryable: true))
        XCTAssertEqual(s.beginAttempt().range, "bytes=7904-19999")
        _ = s.receiveHead(partial(7904, validators: [lastModified]), finalURL: url)
        XCTAssertEqual(feed(&s, Array(new[7904...]), chunk: 5000), [])
        XCTAssertEqual(s.abort, .fail(.remoteChanged(url: url)))
    }

    func testAStrongETagResumeComparesNothingAndDeliversFromTheResumePoint() {
        var s = interrupted(after: 6000, validators: ["ETag: \"v1\"", lastModified])
        XCTAssertNil(s.overlap, "nothing kept")
        XCTAssertEqual(s.beginAttempt().range, "bytes=6000-19999")
        _ = s.receiveHead(partial(6000, validators: ["ETag: \"v1\"", lastModified]), finalURL: url)
        XCTAssertEqual(feed(&s, Array(old[6000...]), chunk: 5000), Array(old[6000...]))
        XCTAssertEqual(s.attemptEnded(.ok), .finish(nil))
    }

    // MARK: The kept bytes

    func testTheKeptBytesAreTheLastDeliveredWhateverTheChunks() {
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 31) }
        for chunk in [1, 100, 4095, 4096, 4097, 10_000] {
            var kept = ResumeOverlap()
            var at = 0
            while at < bytes.count {
                let end = min(bytes.count, at + chunk)
                bytes[at..<end].withUnsafeBytes { kept.keep($0) }
                at = end
            }
            XCTAssertEqual(Array(kept.tail), Array(bytes.suffix(ResumeOverlap.length)), "chunks of \(chunk)")
        }
        var few = ResumeOverlap()
        [UInt8]([1, 2, 3]).withUnsafeBytes { few.keep($0) }
        XCTAssertEqual(few.beginResume(), 3, "fewer delivered: fewer asked again")
    }
}
