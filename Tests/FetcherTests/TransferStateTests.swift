import CacheCore
@testable import Fetcher
import XCTest

/// The fetch logic with no curl and no sockets: header blocks in, decisions out.
final class TransferStateTests: XCTestCase {
    let url = "http://origin/f"
    let policy = RetryPolicy(maxRetries: 2, baseDelay: 0.5, maxDelay: 30)

    private func block(_ lines: [String]) -> ResponseHeaderBlock {
        var parser = ResponseHeaderParser()
        var result: ResponseHeaderBlock?
        for line in lines + [""] { result = parser.feed(line + "\r\n") ?? result }
        return result!
    }

    /// A transfer of bytes 100..<200 whose connection broke after `delivered` body bytes.
    private func interrupted(after delivered: Int) -> TransferState {
        var s = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        _ = s.beginAttempt()
        _ = s.receiveHead(block(partialHead), finalURL: url)
        _ = s.receiveBody(count: delivered)
        _ = s.attemptEnded(.failed(message: "reset", retryable: true))
        return s
    }

    private let partialHead = [
        "HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-199/1000", "Content-Length: 100",
        "ETag: \"v1\"", "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT", "Accept-Ranges: bytes",
    ]

    func testAStaleKeptConnectionIsRetriedAtOnceOnANewOneAFewTimesWithoutCountingAsAFailure() {
        var s = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        _ = s.beginAttempt()
        XCTAssertFalse(s.wantsFreshConnection)
        XCTAssertEqual(s.attemptEnded(.staleConnection(message: "Received HTTP/0.9 when not allowed")), .retry(after: 0))
        XCTAssertTrue(s.wantsFreshConnection, "the pool may hold more connections with the origin's stray bytes")
        XCTAssertEqual(s.failures, 0)
        _ = s.beginAttempt()
        XCTAssertEqual(s.attemptEnded(.staleConnection(message: "again")), .retry(after: 0))
        _ = s.beginAttempt()
        XCTAssertEqual(s.attemptEnded(.staleConnection(message: "and again")),
                       .finish(.network(url: url, message: "and again")), "a new connection cannot be stale: something else is wrong")
    }

    func testOnlyTheLastHeaderBlockCounts() {
        var parser = ResponseHeaderParser()
        let interim = ["HTTP/1.1 100 Continue\r\n", "\r\n"].compactMap { parser.feed($0) }.first
        XCTAssertEqual(interim?.isInterim, true)
        let redirect = ["HTTP/1.1 302 Found\r\n", "Location: /b\r\n", "\r\n"].compactMap { parser.feed($0) }.first
        XCTAssertEqual(redirect?.isInterim, false, "a redirect is a final answer: TransferState follows it")
        let final = ["HTTP/2 200\r\n", "content-length: 5\r\n", "\r\n"].compactMap { parser.feed($0) }.first
        XCTAssertEqual(final?.status, 200)
        XCTAssertEqual(final?.isInterim, false)
        XCTAssertEqual(final?.contentLength, 5)
        XCTAssertNil(final?.field("location"))
    }

    func testANegativeContentLengthIsNoLength() {
        XCTAssertNil(block(["HTTP/1.1 200 OK", "Content-Length: -1"]).contentLength)
        XCTAssertEqual(block(["HTTP/1.1 200 OK", "Content-Length: 0"]).contentLength, 0)
    }

    func testContentRangeParsing() {
        XCTAssertEqual(ContentRange(parsing: "bytes 0-99/1000"), ContentRange(start: 0, end: 100, total: 1000))
        XCTAssertEqual(ContentRange(parsing: "bytes 5-5/*"), ContentRange(start: 5, end: 6, total: nil))
        // The largest last offset has no end that fits in Int64: refused, not a trap.
        XCTAssertNil(ContentRange(parsing: "bytes 0-9223372036854775807/*"))
        XCTAssertNil(ContentRange(parsing: "bytes 0-9223372036854775806/9223372036854775807"),
                     "beyond FileLength.limit: refused (the head's refusal quotes the header)")
        XCTAssertNil(ContentRange(parsing: "bytes */1000"))
        XCTAssertNil(ContentRange(parsing: "bytes 9-5/1000"))
        XCTAssertNil(ContentRange(parsing: "bytes 0-1000/1000"), "last byte past the total")
        // Optional whitespace around the parts, any case of the unit.
        XCTAssertEqual(ContentRange(parsing: " \tBYTES  3 - 7 / 10\t "), ContentRange(start: 3, end: 8, total: 10))
        XCTAssertEqual(ContentRange(parsing: "Bytes 3-7/ *"), ContentRange(start: 3, end: 8, total: nil))
        XCTAssertNil(ContentRange(parsing: "bytes3-7/10"))
        XCTAssertNil(ContentRange(parsing: "items 3-7/10"))
        XCTAssertNil(ContentRange(parsing: "bytes a-7/10"))
        XCTAssertEqual(ContentRange.largestNumber(in: "bytes 3-70/10"), 70)
        XCTAssertEqual(ContentRange.largestNumber(in: "bytes 0-9/99999999999999999999999"), .max, "saturates")
        XCTAssertNil(ContentRange.largestNumber(in: "bytes */*"))
    }

    /// A range far into the file (beyond `TransferState.usableLead`), and a file that long.
    private let far: Int64 = 64 << 20
    private var farLength: String { "Content-Length: \(2 * far)" }

    func testA200ToARangeOfAnOriginKnownToServeRangesIsRetriedBeforeItIsAccepted() {
        let whole = ["HTTP/1.1 200 OK", farLength, "ETag: \"v1\"", "Accept-Ranges: bytes"]
        var s = TransferState(request: FetchRequest(url: url, start: far, end: far + 100, requireRange: true), policy: policy)
        for attempt in 1...TransferState.maxIgnoredRanges {
            XCTAssertEqual(s.beginAttempt().range, "bytes=\(far)-\(far + 99)")
            XCTAssertEqual(s.receiveHead(block(whole), finalURL: url), .abort, "attempt \(attempt): one 200 is no verdict")
            guard case .retry(let delay) = s.attemptEnded(.ok) else { return XCTFail("attempt \(attempt) is retried") }
            XCTAssertGreaterThan(delay, 0, "with backoff")
        }
        _ = s.beginAttempt()
        guard case .deliver(let head) = s.receiveHead(block(whole), finalURL: url) else {
            return XCTFail("after repeated 200s the whole body is delivered (the origin ignores ranges)")
        }
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.bodyStart, 0)
    }

    func testA206AfterA200IsTakenAsUsual() {
        let whole = ["HTTP/1.1 200 OK", farLength, "ETag: \"v1\""]
        var s = TransferState(request: FetchRequest(url: url, start: far, end: far + 100, requireRange: true), policy: policy)
        _ = s.beginAttempt()
        XCTAssertEqual(s.receiveHead(block(whole), finalURL: url), .abort)
        _ = s.attemptEnded(.ok)
        _ = s.beginAttempt()
        let partial = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes \(far)-\(far + 99)/\(2 * far)", "Content-Length: 100", "ETag: \"v1\""]
        guard case .deliver(let head) = s.receiveHead(block(partial), finalURL: url) else { return XCTFail() }
        XCTAssertEqual(head.bodyStart, far)
    }

    /// A 200 to a range that starts near byte 0 is no worse than cutting it (the origin pushed about
    /// that much already): it is read, its lead dropped, and it ends where the range ends.
    func testA200ToARangeNearTheStartIsUsedFromTheRangeAndEndsAtItsEnd() {
        let whole = ["HTTP/1.1 200 OK", "Content-Length: 1000000", "ETag: \"v1\"", "Accept-Ranges: bytes"]
        var s = TransferState(request: FetchRequest(url: url, start: 1000, end: 1100, requireRange: true), policy: policy)
        _ = s.beginAttempt()
        guard case .deliver(let head) = s.receiveHead(block(whole), finalURL: url) else { return XCTFail("the 200 is used") }
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.bodyStart, 1000, "the body the sink sees starts where the range does")
        XCTAssertEqual(head.totalLength, 1_000_000)
        XCTAssertEqual(s.receiveBody(count: 800).length, 0, "the lead is dropped")
        let last = s.receiveBody(count: 400)
        XCTAssertEqual(last.offset, 200)
        XCTAssertEqual(last.length, 100, "then the range's 100 bytes")
        XCTAssertEqual(s.abort, .complete, "and the transfer is cut at the range's end")
        XCTAssertEqual(s.attemptEnded(.failed(message: "write error", retryable: false)), .finish(nil))
        XCTAssertEqual(s.ignoredRanges, 0)
    }

    /// Which 200s to a `requireRange` request are used from their range and which are cut.
    func testWhichWholeBodiesAreUsedAndWhichAreCut() {
        let lead = TransferState.usableLead
        let cases: [(start: Int64, length: String?, used: Bool, why: String)] = [
            (1, "Content-Length: 1000", true, "just past byte 0"),
            (lead, "Content-Length: \(4 * lead)", true, "at the bound"),
            (lead + 1, "Content-Length: \(4 * lead)", false, "past the bound: cutting costs less"),
            (1000, nil, false, "no length: where the range is cannot be checked"),
            (1000, "Content-Length: 1000", false, "a range past the end of this body"),
        ]
        for c in cases {
            var s = TransferState(request: FetchRequest(url: url, start: c.start, end: c.start + 10, requireRange: true), policy: policy)
            _ = s.beginAttempt()
            let answer = s.receiveHead(block(["HTTP/1.1 200 OK"] + (c.length.map { [$0] } ?? [])), finalURL: url)
            if c.used {
                guard case .deliver(let head) = answer else { XCTFail("used: \(c.why)"); continue }
                XCTAssertEqual(head.bodyStart, c.start, c.why)
            } else {
                XCTAssertEqual(answer, .abort, "cut: \(c.why)")
            }
        }
        // Without `requireRange` (no range history) a 200 is the whole file from byte 0, as before.
        var s = TransferState(request: FetchRequest(url: url, start: 1000, end: 1100), policy: policy)
        _ = s.beginAttempt()
        guard case .deliver(let head) = s.receiveHead(block(["HTTP/1.1 200 OK", "Content-Length: 1000000"]), finalURL: url) else { return XCTFail() }
        XCTAssertEqual(head.bodyStart, 0)
    }

    /// What a head tells the engine of the origin's ranges (`ResponseHead.rangeAnswers`, which
    /// `RangeReliability` counts): the 200s its range got (cut, or this one) and whether it is a
    /// 206; nothing for a request that required no range.
    func testRange200TheHeadCountsThe200sItsRangeGot() {
        let lead = TransferState.usableLead
        let partial = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes \(far)-\(far + 99)/\(2 * far)", "Content-Length: 100", "ETag: \"v1\""]
        let whole = ["HTTP/1.1 200 OK", farLength, "ETag: \"v1\""]
        let cases: [(start: Int64, requireRange: Bool, answers: [[String]], expected: ResponseHead.RangeAnswers?, why: String)] = [
            (far, true, [partial], .init(ignored: 0, served: true), "a 206 at once"),
            (far, true, [whole, partial], .init(ignored: 1, served: true), "a 206 after one cut 200"),
            (far, true, [whole, whole, whole], .init(ignored: 3, served: false), "the whole body after two cut 200s"),
            (lead, true, [whole], .init(ignored: 1, served: false), "a 200 used from near the start"),
            (far, false, [whole], nil, "no range required (no range history): nothing to count"),
            (0, true, [whole], nil, "from byte 0: a 200 is what was asked"),
        ]
        for c in cases {
            var s = TransferState(request: FetchRequest(url: url, start: c.start, end: c.start + 100, requireRange: c.requireRange), policy: policy)
            var head: ResponseHead?
            for answer in c.answers {
                _ = s.beginAttempt()
                if case let .deliver(h) = s.receiveHead(block(answer), finalURL: url) { head = h; break }
                _ = s.attemptEnded(.ok)
            }
            guard let head else { XCTFail("a head: \(c.why)"); continue }
            XCTAssertEqual(head.rangeAnswers, c.expected, c.why)
        }
    }

    /// How many 200s in a row a required range is asked again before the whole file is taken:
    /// more where the origin served most of its ranges lately (bad luck with a flaky CDN, and the
    /// whole file would make the entry one read whole), never more than the retries allowed. Each
    /// attempt's answer is there for the loop's `OriginRangeAnswers`.
    func testRange200HowMany200sInARowAreAskedAgain() {
        let whole = ["HTTP/1.1 200 OK", farLength, "ETag: \"v1\""]
        let cases: [(servedLately: Bool, maxRetries: Int, cut: Int, why: String)] = [
            (false, 4, TransferState.maxIgnoredRanges, "an origin without a record: two, as before"),
            (true, 4, TransferState.maxIgnoredRangesServedLately, "an origin that served most of its ranges lately: four"),
            (true, 3, 3, "never more than the retries allowed"),
            (true, 2, TransferState.maxIgnoredRanges, "with two retries allowed, two as before"),
        ]
        for c in cases {
            let policy = RetryPolicy(maxRetries: c.maxRetries, baseDelay: 0.01, maxDelay: 1)
            var s = TransferState(request: FetchRequest(url: url, start: far, end: far + 100, requireRange: true), policy: policy)
            s.rangesServedLately = c.servedLately
            var cuts = 0
            while true {
                _ = s.beginAttempt()
                XCTAssertNil(s.rangeAnswer, "nothing heard yet: \(c.why)")
                let action = s.receiveHead(block(whole), finalURL: url)
                XCTAssertEqual(s.rangeAnswer, true, "a 200 to a required range: \(c.why)")
                if case let .deliver(head) = action {
                    XCTAssertEqual(head.bodyStart, 0, "the whole file: \(c.why)")
                    break
                }
                cuts += 1
                guard case .retry = s.attemptEnded(.ok) else { XCTFail("retried: \(c.why)"); break }
                if cuts > 10 { XCTFail("endless: \(c.why)"); break }
            }
            XCTAssertEqual(cuts, c.cut, c.why)
        }
        var s = TransferState(request: FetchRequest(url: url, start: far, end: far + 100, requireRange: true), policy: policy)
        _ = s.beginAttempt()
        let partial = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes \(far)-\(far + 99)/\(2 * far)", "Content-Length: 100"]
        _ = s.receiveHead(block(partial), finalURL: url)
        XCTAssertEqual(s.rangeAnswer, false, "a 206")
        var free = TransferState(request: FetchRequest(url: url, start: far, end: far + 100), policy: policy)
        _ = free.beginAttempt()
        _ = free.receiveHead(block(whole), finalURL: url)
        XCTAssertNil(free.rangeAnswer, "no range required: nothing to note")
    }

    func testWithoutAKnownRangeHistoryA200IsDeliveredAtOnce() {
        let whole = ["HTTP/1.1 200 OK", "Content-Length: 1000"]
        var s = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        _ = s.beginAttempt()
        guard case .deliver = s.receiveHead(block(whole), finalURL: url) else { return XCTFail() }
    }

    func testResumeAsksForTheRestWithTheValidator() {
        var s = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        XCTAssertEqual(s.beginAttempt().range, "bytes=100-199")
        guard case .deliver(let head) = s.receiveHead(block(partialHead), finalURL: url) else { return XCTFail() }
        XCTAssertEqual(head.bodyStart, 100)
        XCTAssertEqual(head.totalLength, 1000)
        XCTAssertEqual(s.receiveBody(count: 40).length, 40)
        XCTAssertEqual(s.attemptEnded(.failed(message: "reset", retryable: true)), .retry(after: 0))
        let resume = s.beginAttempt()
        XCTAssertEqual(resume.range, "bytes=140-199")
        XCTAssertEqual(resume.ifRange, "\"v1\"")
    }

    /// A tier node's piece (`sendsIfRange` false) resumes with the rest of its range and no
    /// `If-Range`, which would make nginx's slice module start at the file's first slice; the
    /// resumed answer is still held to the first one's version.
    func testATierPieceResumesWithoutIfRangeAndStillRefusesAnotherVersion() {
        var request = FetchRequest(url: url, start: 100, end: 200, requireRange: true)
        request.sendsIfRange = false
        var s = TransferState(request: request, policy: policy)
        XCTAssertNil(s.beginAttempt().ifRange)
        guard case .deliver = s.receiveHead(block(partialHead), finalURL: url) else { return XCTFail() }
        _ = s.receiveBody(count: 40)
        XCTAssertEqual(s.attemptEnded(.failed(message: "reset", retryable: true)), .retry(after: 0))
        let resume = s.beginAttempt()
        XCTAssertEqual(resume.range, "bytes=140-199")
        XCTAssertNil(resume.ifRange, "no If-Range to a tier node")
        let other = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 140-199/1000", "Content-Length: 60", "ETag: \"v2\""]
        XCTAssertEqual(s.receiveHead(block(other), finalURL: url), .abort)
        XCTAssertEqual(s.attemptEnded(.ok), .finish(.remoteChanged(url: url)))
    }

    /// A connection that breaks or stalls after every promised byte arrived ends the transfer:
    /// resuming would ask for the empty range `bytes=200-199` (seen in the fleet bench: a node
    /// answered it 416, which a resumed attempt reads as the file having shrunk).
    func testNothingIsResumedOnceEveryPromisedByteWasDelivered() {
        for ending in [TransferState.AttemptResult.failed(message: "reset", retryable: true), .timedOut] {
            var s = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
            _ = s.beginAttempt()
            _ = s.receiveHead(block(partialHead), finalURL: url)
            XCTAssertEqual(s.receiveBody(count: 100).length, 100)
            XCTAssertTrue(s.allDelivered)
            XCTAssertEqual(s.attemptEnded(ending), .finish(nil), "\(ending)")
        }
        var short = interrupted(after: 99)
        XCTAssertFalse(short.allDelivered)
        XCTAssertEqual(short.beginAttempt().range, "bytes=199-199", "one byte short: resumed")
    }

    func testResumeAnsweredWith200SkipsDeliveredBytesAndStopsAtThePromise() {
        var s = interrupted(after: 40)
        _ = s.beginAttempt()
        let full = block(["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v1\""])
        XCTAssertEqual(s.receiveHead(full, finalURL: url), .proceed)
        let slice = s.receiveBody(count: 500)
        XCTAssertEqual(slice.offset, 140, "bytes 0..<140 were delivered or not wanted")
        XCTAssertEqual(slice.length, 60)
        XCTAssertEqual(s.abort, .complete, "the rest of the 200 is surplus")
        XCTAssertEqual(s.attemptEnded(.failed(message: "write error", retryable: false)), .finish(nil))
    }

    func testResumeWithDifferentValidatorIsRemoteChanged() {
        var s = interrupted(after: 10)
        _ = s.beginAttempt()
        XCTAssertEqual(s.receiveHead(block(["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v2\""]), finalURL: url), .abort)
        XCTAssertEqual(s.attemptEnded(.failed(message: "write error", retryable: false)), .finish(.remoteChanged(url: url)))
    }

    func testA206ToIfRangeWithAnotherTotalIsABadResponseRetriedNotANewVersion() {
        var request = FetchRequest(url: url, start: 100, end: 200, ifRange: "\"v1\"")
        request.expectedLength = 1000
        var s = TransferState(request: request, policy: policy)
        let flipped = block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-199/2000", "Content-Length: 100",
                             "ETag: \"v1\"", "Accept-Ranges: bytes"])
        for _ in 0..<2 {
            XCTAssertEqual(s.beginAttempt().ifRange, "\"v1\"")
            XCTAssertEqual(s.receiveHead(flipped, finalURL: url), .abort)
            guard case .retry = s.attemptEnded(.ok) else { return XCTFail("a flipped total is retried") }
        }
        _ = s.beginAttempt()
        XCTAssertEqual(s.receiveHead(flipped, finalURL: url), .abort)
        XCTAssertEqual(s.attemptEnded(.ok), .finish(.invalidResponse(url: url, message:
            "a 206 to If-Range (the same version) with the total 2000, not 1000")), "then a bad response, not remoteChanged")

        var again = TransferState(request: request, policy: policy)
        _ = again.beginAttempt()
        XCTAssertEqual(again.receiveHead(flipped, finalURL: url), .abort)
        guard case .retry = again.attemptEnded(.ok) else { return XCTFail() }
        _ = again.beginAttempt()
        guard case .deliver(let head) = again.receiveHead(block(partialHead), finalURL: url) else { return XCTFail() }
        XCTAssertEqual(head.totalLength, 1000, "the retry's answer is taken")
    }

    func testAResumeWhoseTotalFlipsIsRetriedNotRemoteChanged() {
        var s = interrupted(after: 40)
        XCTAssertEqual(s.beginAttempt().ifRange, "\"v1\"")
        let flipped = block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 140-199/2000", "Content-Length: 60",
                             "ETag: \"v1\"", "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT"])
        XCTAssertEqual(s.receiveHead(flipped, finalURL: url), .abort)
        guard case .retry = s.attemptEnded(.ok) else { return XCTFail("retried") }
        _ = s.beginAttempt()
        let fine = block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 140-199/1000", "Content-Length: 60",
                          "ETag: \"v1\"", "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT"])
        XCTAssertEqual(s.receiveHead(fine, finalURL: url), .proceed)
    }

    func testAResumeWhoseETagAloneChangedIsAChangeUnlessTheEngineSaysETagsRotate() {
        let rotated = block(["HTTP/1.1 200 OK", "Content-Length: 1000",
                             "ETag: \"v2\"", "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT"])
        var s = interrupted(after: 40)
        _ = s.beginAttempt()
        XCTAssertEqual(s.receiveHead(rotated, finalURL: url), .abort, "maybe another file of the same size and date")
        XCTAssertEqual(s.attemptEnded(.ok), .finish(.remoteChanged(url: url)))

        var request = FetchRequest(url: url, start: 100, end: 200)
        request.ignoreETag = true   // the engine knows this origin's ETags rotate (or --ignore-etag)
        var r = TransferState(request: request, policy: policy)
        _ = r.beginAttempt()
        _ = r.receiveHead(block(partialHead), finalURL: url)
        _ = r.receiveBody(count: 40)
        _ = r.attemptEnded(.failed(message: "reset", retryable: true))
        _ = r.beginAttempt()
        XCTAssertEqual(r.receiveHead(rotated, finalURL: url), .proceed, "same length and Last-Modified: the same file")
    }

    func testWholeBodiesRetriedWithOtherETagsForTheSameFileMarkTheHeadAsRotating() {
        func run(_ etags: [String]) -> ResponseHead? {
            var s = TransferState(request: FetchRequest(url: url, start: far, end: far + 100, ifRange: "\"v0\"", requireRange: true),
                                  policy: policy)
            for etag in etags {
                _ = s.beginAttempt()
                let answer = block(["HTTP/1.1 200 OK", farLength, "ETag: \(etag)",
                                    "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT"])
                if case let .deliver(head) = s.receiveHead(answer, finalURL: url) { return head }
                _ = s.attemptEnded(.ok)
            }
            return nil
        }
        XCTAssertEqual(run(["\"r1\"", "\"r2\"", "\"r3\""])?.etagRotating, true, "three answers, three ETags: rotating")
        XCTAssertEqual(run(["\"v2\"", "\"v2\"", "\"v2\""])?.etagRotating, false, "a file replaced once: one new ETag")
    }

    func testAnAnswerWhoseETagAloneDiffersGetsASecondLook() {
        let date = "Mon, 01 Jan 2024 00:00:00 GMT"
        func run(_ etags: [String]) -> (ResponseHead?, Int) {
            var request = FetchRequest(url: url, start: 0, end: 100, ifRange: "\"v1\"")
            request.expectedLength = 1000
            request.expectedLastModified = date
            var s = TransferState(request: request, policy: policy)
            for etag in etags {
                _ = s.beginAttempt()
                let answer = block(["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \(etag)", "Last-Modified: \(date)"])
                if case let .deliver(head) = s.receiveHead(answer, finalURL: url) { return (head, s.attempts) }
                XCTAssertEqual(s.attemptEnded(.ok), .retry(after: 0), "asked again at once")
            }
            return (nil, s.attempts)
        }
        let rotating = run(["\"r1\"", "\"r2\""])
        XCTAssertEqual(rotating.0?.etagRotating, true)
        XCTAssertEqual(rotating.1, 2)
        let replaced = run(["\"v2\"", "\"v2\""])
        XCTAssertEqual(replaced.0?.etagRotating, false, "the same new ETag twice: the file was replaced")
        XCTAssertEqual(replaced.1, 2, "one second look, no more")
    }

    func testATieredOpenCheckSendsNoIfRangeButStillTakesASecondLook() {
        let date = "Mon, 01 Jan 2024 00:00:00 GMT"
        func run(_ etags: [String]) -> (ResponseHead?, [String?]) {
            var request = FetchRequest(url: url, start: 0, end: 1, ifRange: "\"v1\"")
            request.expectedLength = 1000
            request.expectedLastModified = date
            request.isProbe = true
            request.sendsIfRange = false
            var s = TransferState(request: request, policy: policy)
            var sent: [String?] = []
            for etag in etags {
                sent.append(s.beginAttempt().ifRange)
                let answer = block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-0/1000", "Content-Length: 1",
                                    "ETag: \(etag)", "Last-Modified: \(date)"])
                if case let .deliver(head) = s.receiveHead(answer, finalURL: url) { return (head, sent) }
                XCTAssertEqual(s.attemptEnded(.ok), .retry(after: 0), "asked again at once")
            }
            return (nil, sent)
        }
        let rotating = run(["\"r1\"", "\"r2\""])
        XCTAssertEqual(rotating.0?.etagRotating, true)
        XCTAssertEqual(rotating.1, [nil, nil], "never an If-Range")
        let replaced = run(["\"v2\"", "\"v2\""])
        XCTAssertEqual(replaced.0?.etagRotating, false, "the same new ETag twice: the file was replaced")
        XCTAssertEqual(replaced.0?.etag, "\"v2\"")
        let same = run(["\"v1\""])
        XCTAssertEqual(same.0?.etag, "\"v1\"", "the same version: answered at once")
        // Another total without If-Range is a new version for the engine to see, not a bad answer.
        var request = FetchRequest(url: url, start: 0, end: 1, ifRange: "\"v1\"")
        request.expectedLength = 1000
        request.isProbe = true
        request.sendsIfRange = false
        var s = TransferState(request: request, policy: policy)
        _ = s.beginAttempt()
        let longer = block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-0/2000", "Content-Length: 1", "ETag: \"v2\""])
        guard case let .deliver(head) = s.receiveHead(longer, finalURL: url) else { return XCTFail("delivered") }
        XCTAssertEqual(head.totalLength, 2000)
    }

    func testIgnoringETagsAResumeSendsLastModifiedAndComparesNoETag() {
        var request = FetchRequest(url: url, start: 100, end: 200)
        request.ignoreETag = true
        var s = TransferState(request: request, policy: policy)
        _ = s.beginAttempt()
        _ = s.receiveHead(block(partialHead), finalURL: url)
        _ = s.receiveBody(count: 40)
        _ = s.attemptEnded(.failed(message: "reset", retryable: true))
        let resume = s.beginAttempt()
        XCTAssertEqual(resume.ifRange, "Mon, 01 Jan 2024 00:00:00 GMT")
        XCTAssertEqual(resume.range, "bytes=100-199", "no ETag to go by: the delivered bytes are asked again (ResumeOverlapTests)")
        let other = block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-199/1000", "Content-Length: 100",
                           "ETag: \"v9\""])
        XCTAssertEqual(s.receiveHead(other, finalURL: url), .proceed)
    }

    func testRetriesBackOffExponentiallyThenGiveUp() {
        var s = TransferState(request: FetchRequest(url: url), policy: policy)
        let error = block(["HTTP/1.1 502 Bad Gateway", "Content-Length: 0"])
        _ = s.beginAttempt()
        XCTAssertEqual(s.receiveHead(error, finalURL: url), .abort)
        XCTAssertEqual(s.attemptEnded(.failed(message: "write error", retryable: false)), .retry(after: 0.5))
        _ = s.beginAttempt()
        _ = s.receiveHead(error, finalURL: url)
        XCTAssertEqual(s.attemptEnded(.failed(message: "write error", retryable: false)), .retry(after: 1))
        _ = s.beginAttempt()
        _ = s.receiveHead(error, finalURL: url)
        XCTAssertEqual(s.attemptEnded(.failed(message: "write error", retryable: false)),
                       .finish(.http(status: 502, url: url)))
    }

    func testRetryAfterIsHonouredAndCapped() {
        var s = TransferState(request: FetchRequest(url: url), policy: policy)
        _ = s.beginAttempt()
        _ = s.receiveHead(block(["HTTP/1.1 503 Busy", "Retry-After: 3600"]), finalURL: url)
        XCTAssertEqual(s.attemptEnded(.ok), .retry(after: 30))
    }

    func testClientErrorsAreNotRetried() {
        var s = TransferState(request: FetchRequest(url: url), policy: policy)
        _ = s.beginAttempt()
        _ = s.receiveHead(block(["HTTP/1.1 403 Forbidden"]), finalURL: url + "?signed")
        XCTAssertEqual(s.attemptEnded(.ok), .finish(.http(status: 403, url: url + "?signed")))
    }

    func testStallWithoutProgressIsATimeoutButAfterProgressResumes() {
        var silent = TransferState(request: FetchRequest(url: url), policy: policy)
        _ = silent.beginAttempt()
        XCTAssertEqual(silent.attemptEnded(.timedOut), .finish(.timeout(url: url)))

        var stalled = TransferState(request: FetchRequest(url: url), policy: policy)
        _ = stalled.beginAttempt()
        _ = stalled.receiveHead(block(["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v1\""]), finalURL: url)
        _ = stalled.receiveBody(count: 10)
        XCTAssertEqual(stalled.attemptEnded(.timedOut), .retry(after: 0), "progress: resume at once")
        XCTAssertEqual(stalled.beginAttempt().range, "bytes=10-999")
    }

    func testShortBodyWithCurlOKIsResumed() {
        var s = TransferState(request: FetchRequest(url: url), policy: policy)
        _ = s.beginAttempt()
        _ = s.receiveHead(block(["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v1\""]), finalURL: url)
        _ = s.receiveBody(count: 999)
        XCTAssertEqual(s.attemptEnded(.ok), .retry(after: 0))
        XCTAssertEqual(s.beginAttempt().range, "bytes=999-999")
    }

    func testResumeThatStartsTooLateIsInvalid() {
        var s = interrupted(after: 10)
        _ = s.beginAttempt()
        let late = block(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 150-199/1000", "ETag: \"v1\""])
        XCTAssertEqual(s.receiveHead(late, finalURL: url), .abort)
        guard case .finish(.invalidResponse?)? = Optional(s.attemptEnded(.ok)) else { return XCTFail() }
    }

    func testA206WhoseBodyIsShorterThanItsRangeIsRefusedFirstOrOnResume() {
        // What an origin that compresses a range on the fly sends: the range's span, a shorter body.
        let compressed = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-199/1000", "Content-Length: 42",
                          "Content-Encoding: gzip", "ETag: \"v1\""]
        var first = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        _ = first.beginAttempt()
        XCTAssertEqual(first.receiveHead(block(compressed), finalURL: url), .abort)
        XCTAssertNil(first.head, "nothing reaches the sink")
        guard case let .finish(.invalidResponse(_, message)?) = first.attemptEnded(.ok) else { return XCTFail("refused") }
        XCTAssertTrue(message.contains("Content-Length 42") && message.contains("100 bytes"), message)

        var resumed = interrupted(after: 10)
        _ = resumed.beginAttempt()
        let resumeHead = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 110-199/1000", "Content-Length: 9", "ETag: \"v1\""]
        XCTAssertEqual(resumed.receiveHead(block(resumeHead), finalURL: url), .abort)
        guard case .finish(.invalidResponse?)? = Optional(resumed.attemptEnded(.ok)) else { return XCTFail("refused") }

        // A body announced longer than its range gives the range's bytes and stops there.
        var longer = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        _ = longer.beginAttempt()
        let padded = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-199/1000", "Content-Length: 1000", "ETag: \"v1\""]
        guard case .deliver = longer.receiveHead(block(padded), finalURL: url) else { return XCTFail("taken") }
        XCTAssertEqual(longer.receiveBody(count: 150).length, 100)
        XCTAssertEqual(longer.attemptEnded(.ok), .finish(nil))
    }

    // MARK: Hostile lengths

    func testContentRangeNumbersPastTheLimitDoNotParseAndNeverTrap() {
        let limit = FileLength.limit
        XCTAssertEqual(ContentRange(parsing: "bytes 0-9/\(limit)"), ContentRange(start: 0, end: 10, total: limit))
        XCTAssertEqual(ContentRange(parsing: "bytes \(limit - 1)-\(limit - 1)/\(limit)"),
                       ContentRange(start: limit - 1, end: limit, total: limit))
        XCTAssertNil(ContentRange(parsing: "bytes 0-9/\(limit + 1)"))
        XCTAssertNil(ContentRange(parsing: "bytes 0-9/9223372036854775807"))
        XCTAssertNil(ContentRange(parsing: "bytes 0-9223372036854775807/*"), "last + 1 would overflow")
        XCTAssertNil(ContentRange(parsing: "bytes 9223372036854775806-9223372036854775807/9223372036854775807"))
        XCTAssertNil(ContentRange(parsing: "bytes 0-99999999999999999999/*"))
    }

    func testLengthsPastTheLimitAreRefusedWithTheHeaderQuoted() {
        XCTAssertNil(block(["HTTP/1.1 200 OK", "Content-Length: \(FileLength.limit)"]).lengthRefusal)
        XCTAssertNil(block(partialHead).lengthRefusal)
        for (header, quoted) in [("Content-Length: 9223372036854775807", "Content-Length: 9223372036854775807"),
                                 ("Content-Length: 99999999999999999999999", "Content-Length: 99999999999999999999999"),
                                 ("Content-Range: bytes 0-9/9223372036854775807", "Content-Range: bytes 0-9/9223372036854775807"),
                                 ("Content-Range: bytes 4611686018427387904-4611686018427387905/*", "Content-Range: bytes 4611686018427387904-")] {
            let b = block(["HTTP/1.1 206 Partial Content", header])
            XCTAssertTrue(b.lengthRefusal?.contains(quoted) ?? false, "\(header): \(b.lengthRefusal ?? "accepted")")
            XCTAssertTrue(b.lengthRefusal?.contains("2^62") ?? false)
        }
        XCTAssertNil(block(["HTTP/1.1 200 OK", "Content-Length: 9223372036854775807"]).contentLength)
    }

    func testAMalformedOrConflictingContentLengthIsRefusedAndAnAgreeingListIsOneLength() {
        for lines in [["Content-Length: 12abc"], ["Content-Length: 10", "Content-Length: 20"], ["Content-Length: 10, 20"],
                      ["Content-Length: -5"], ["Content-Length: "], ["Content-Length: 1e3"]] {
            let b = block(["HTTP/1.1 200 OK"] + lines)
            XCTAssertTrue(b.lengthRefusal?.contains("malformed or conflicting Content-Length") ?? false, "\(lines): \(b.lengthRefusal ?? "accepted")")
        }
        for lines in [["Content-Length: 42, 42"], ["Content-Length: 42", "Content-Length: 42"], ["Content-Length:  42 "]] {
            let b = block(["HTTP/1.1 200 OK"] + lines)
            XCTAssertNil(b.lengthRefusal, "\(lines)")
            XCTAssertEqual(b.contentLength, 42, "\(lines)")
        }
        // The fetch fails at once, nothing reaching the sink.
        var s = TransferState(request: FetchRequest(url: url, start: 0, end: 100), policy: policy)
        _ = s.beginAttempt()
        XCTAssertEqual(s.receiveHead(block(["HTTP/1.1 200 OK", "Content-Length: 10", "Content-Length: 20"]), finalURL: url), .abort)
        guard case .finish(.invalidResponse?) = s.attemptEnded(.ok) else { return XCTFail("refused") }
    }

    func testAnAnswerClaimingAHugeLengthFailsTheFetchWithoutRetrying() {
        for head in [["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-9/9223372036854775807", "Content-Length: 10"],
                     ["HTTP/1.1 200 OK", "Content-Length: 9223372036854775807"]] {
            var s = TransferState(request: FetchRequest(url: url, start: 0, end: 262_144), policy: policy)
            _ = s.beginAttempt()
            XCTAssertEqual(s.receiveHead(block(head), finalURL: url), .abort, "\(head)")
            XCTAssertNil(s.head, "nothing reaches the sink")
            guard case let .finish(.invalidResponse(_, message)?) = s.attemptEnded(.ok) else { return XCTFail("\(head)") }
            XCTAssertTrue(message.contains("9223372036854775807"), message)
        }
    }

    func testAHugeRetryAfterIsCappedAndAnUnreadableOneIgnored() {
        XCTAssertNil(block(["HTTP/1.1 503 Busy", "Retry-After: 99999999999999999999"]).retryAfter)
        XCTAssertEqual(block(["HTTP/1.1 503 Busy", "Retry-After: 9223372036854775807"]).retryAfter, 9.223372036854775807e18)
        XCTAssertEqual(policy.delay(retry: 1, retryAfter: 9.2e18), 30)
        XCTAssertEqual(policy.delay(retry: 1_000_000, retryAfter: nil), 30, "backoff of a huge retry count is capped")
    }

    /// rclone's `serve s3` answers a range with 200 and the range's Content-Range: those bytes.
    func testA200WithTheRangesContentRangeIsThatRange() {
        var s = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        _ = s.beginAttempt()
        let answer = ["HTTP/1.1 200 OK", "Content-Range: bytes 100-199/1000", "Content-Length: 100", "ETag: \"v1\""]
        guard case let .deliver(head) = s.receiveHead(block(answer), finalURL: url) else { return XCTFail("the answer is used") }
        XCTAssertEqual(head.status, 206)
        XCTAssertEqual(head.bodyStart, 100)
        XCTAssertEqual(head.totalLength, 1000, "the file's length, not the body's")
    }

    /// To an S3 bucket the version's validator goes as If-Match; a 412 is the object changed:
    /// asked again at once without the condition (the engine compares the new head), and once
    /// the head is known, a 412 to a resume is `remoteChanged`.
    func testA412ToIfMatchIsAChangeAskedAgainWithoutTheCondition() {
        var s = TransferState(request: FetchRequest(url: url, start: 100, end: 200, ifRange: "\"v1\""), policy: policy)
        s.validatesWithIfMatch = true
        XCTAssertEqual(s.beginAttempt().ifRange, "\"v1\"")
        XCTAssertTrue(s.sentIfMatch)
        XCTAssertEqual(s.receiveHead(block(["HTTP/1.1 412 Precondition Failed", "Content-Length: 0"]), finalURL: url), .abort)
        XCTAssertEqual(s.attemptEnded(.ok), .retry(after: 0))
        _ = s.beginAttempt()
        XCTAssertFalse(s.sentIfMatch, "asked again without it")
        XCTAssertTrue(s.ifMatchRefused)

        var resumed = TransferState(request: FetchRequest(url: url, start: 100, end: 200), policy: policy)
        resumed.validatesWithIfMatch = true
        _ = resumed.beginAttempt()
        _ = resumed.receiveHead(block(partialHead), finalURL: url)
        _ = resumed.receiveBody(count: 10)
        _ = resumed.attemptEnded(.failed(message: "reset", retryable: true))
        _ = resumed.beginAttempt()
        XCTAssertTrue(resumed.sentIfMatch, "the resume carries the head's ETag as If-Match")
        XCTAssertEqual(resumed.receiveHead(block(["HTTP/1.1 412 Precondition Failed", "Content-Length: 0"]), finalURL: url), .abort)
        XCTAssertEqual(resumed.attemptEnded(.ok), .finish(.remoteChanged(url: url)))
    }
}
