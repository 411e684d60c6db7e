import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// The libcurl source against the in-process origin: byte-exact bodies, and every clause of the
/// `RangeSource` contract (errors without head, retries, resume, change detection, cancel).
final class CurlRangeSourceTests: XCTestCase {
    var origin: OriginServer!
    var source: CurlRangeSource!
    var sinks: [RecordingSink] = []
    let data: [UInt8] = OriginServer.generatedBytes(seed: 3, offset: 0, count: 100_000)

    override func setUpWithError() throws {
        origin = try OriginServer()
        origin.setFile("/f.bin", data: data, contentType: "video/mp4")
        source = makeSource()
    }

    override func tearDown() {
        // Joins the curl thread: any late callback would have happened by now.
        source?.shutdown()
        for sink in sinks { XCTAssertEqual(sink.violations, [], "contract violations") }
        origin?.stop()
        sinks = []
        source = nil
        origin = nil
    }

    private func makeSource(_ tweak: (inout FetcherConfiguration) -> Void = { _ in }) -> CurlRangeSource {
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 10,
                                     maxRetries: 4, retryBaseDelay: 0.01)
        tweak(&c)
        return CurlRangeSource(configuration: c, logger: Logger(label: "fetcher-tests"))
    }

    @discardableResult
    private func fetch(_ path: String, _ start: Int64 = 0, _ end: Int64? = nil, ifRange: String? = nil,
                       sink: RecordingSink = RecordingSink(), via source: CurlRangeSource? = nil) -> RecordingSink {
        sinks.append(sink)
        _ = (source ?? self.source).start(FetchRequest(url: origin.url(path), start: start, end: end, ifRange: ifRange),
                                          sink: sink)
        wait(for: [sink.finished], timeout: 30)
        return sink
    }

    // MARK: Ranges

    func testPlainRangeIsPartialWithExactBytes() throws {
        let sink = fetch("/f.bin", 1000, 5000)
        XCTAssertNil(sink.result())
        let head = try XCTUnwrap(sink.heads.first)
        XCTAssertEqual(head.status, 206)
        XCTAssertEqual(head.bodyStart, 1000)
        XCTAssertEqual(head.totalLength, 100_000)
        XCTAssertEqual(head.contentType, "video/mp4")
        XCTAssertNotNil(head.etag)
        XCTAssertEqual(head.lastModified, "Mon, 01 Jan 2024 00:00:00 GMT")
        XCTAssertTrue(head.acceptsRanges)
        XCTAssertEqual(head.finalURL, origin.url("/f.bin"))
        XCTAssertEqual(sink.body, Array(data[1000..<5000]))
        XCTAssertEqual(origin.requests.first?.range, "bytes=1000-4999")
        XCTAssertEqual(origin.requests.first?.header("user-agent"), "httpcachefs-tests")
    }

    func testOpenEndedRangeRunsToTheEnd() {
        let sink = fetch("/f.bin", 99_000)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.first?.status, 206)
        XCTAssertEqual(sink.body, Array(data[99_000...]))
        XCTAssertEqual(origin.requests.first?.range, "bytes=99000-")
    }

    func testWholeResourceWithoutRangeIs200() {
        origin.setGeneratedFile("/big", length: 6 << 20, seed: 11)
        let sink = fetch("/big")
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.first?.status, 200)
        XCTAssertEqual(sink.heads.first?.totalLength, 6 << 20)
        XCTAssertTrue(sink.body == OriginServer.generatedBytes(seed: 11, offset: 0, count: 6 << 20))
        XCTAssertNil(origin.requests.first?.range)
    }

    func testEmptyFileGivesHeadAndNoBody() {
        origin.setFile("/empty", data: [])
        let sink = fetch("/empty")
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.first?.totalLength, 0)
        XCTAssertEqual(sink.body, [])
    }

    func testRedirectIsFollowedAndFinalURLReported() {
        origin.setFaults("/old", Faults(redirectTo: "/f.bin"))
        let sink = fetch("/old", 10, 20)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.first?.finalURL, origin.url("/f.bin"))
        XCTAssertEqual(sink.body, Array(data[10..<20]))
        XCTAssertEqual(origin.requests.map(\.path), ["/old", "/f.bin"])
    }

    // MARK: Error statuses

    func testNotFoundIsReportedWithoutHeadOrBody() {
        let sink = fetch("/missing")
        XCTAssertEqual(sink.result(), .http(status: 404, url: origin.url("/missing")))
        XCTAssertEqual(sink.heads, [])
        XCTAssertEqual(sink.body, [])
        XCTAssertEqual(origin.requestCount(path: "/missing"), 1, "4xx is not retried")
    }

    func testServerErrorsAreRetriedUntilSuccess() {
        origin.setFaults("/f.bin", Faults(status: 500, statusCount: 2))
        let sink = fetch("/f.bin", 0, 100)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.count, 1)
        XCTAssertEqual(sink.body, Array(data[0..<100]))
        XCTAssertEqual(origin.requests.map(\.status), [500, 500, 206])
    }

    func testServerErrorsAfterAllRetriesAreReported() {
        source = makeSource { $0.maxRetries = 2 }
        origin.setFaults("/f.bin", Faults(status: 503))
        let sink = fetch("/f.bin")
        XCTAssertEqual(sink.result(), .http(status: 503, url: origin.url("/f.bin")))
        XCTAssertEqual(sink.heads, [])
        XCTAssertEqual(origin.requestCount(path: "/f.bin"), 3)
    }

    func testTooManyRequestsHonoursRetryAfter() {
        origin.setFaults("/f.bin", Faults(status: 429, statusCount: 1, retryAfter: 1))
        let sink = fetch("/f.bin", 0, 10)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[0..<10]))
        XCTAssertEqual(origin.requests.map(\.status), [429, 206])
    }

    func testUnsatisfiableRangeIs416() {
        let sink = fetch("/f.bin", 200_000)
        XCTAssertEqual(sink.result(), .http(status: 416, url: origin.url("/f.bin")))
        XCTAssertEqual(sink.heads, [])
    }

    // MARK: Resume

    func testDroppedConnectionResumesFromTheLastDeliveredByte() throws {
        origin.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1))
        let sink = fetch("/f.bin", 1000, 90_000)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.count, 1)
        XCTAssertEqual(sink.body, Array(data[1000..<90_000]))
        let log = origin.requests
        XCTAssertEqual(log.map(\.range), ["bytes=1000-89999", "bytes=31000-89999"])
        XCTAssertEqual(log.last?.ifRange, sink.heads.first?.etag)
        XCTAssertEqual(origin.bytesServed(path: "/f.bin"), 89_000)
    }

    func testDropOfAWholeFileResumesToo() {
        origin.setFaults("/f.bin", Faults(dropAfterBytes: 12_345, dropCount: 3))
        let sink = fetch("/f.bin")
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.first?.status, 200)
        XCTAssertEqual(sink.body, data)
        XCTAssertEqual(origin.requests.map(\.range), [nil, "bytes=12345-99999", "bytes=24690-99999", "bytes=37035-99999"])
    }

    func testRemoteChangeBetweenDropAndResumeIsReported() {
        origin.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1))
        let sink = RecordingSink()
        let origin = self.origin!
        sink.onBody = { total in
            if total == 30_000 { origin.setFile("/f.bin", data: Array(self.data.reversed())) }
        }
        fetch("/f.bin", sink: sink)
        XCTAssertEqual(sink.result(), .remoteChanged(url: origin.url("/f.bin")))
        XCTAssertEqual(sink.body, Array(data[0..<30_000]), "nothing of the new version reached the sink")
        XCTAssertEqual(origin.requests.last?.status, 200, "If-Range did not match the new version")
    }

    func testResumeOnAServerWithoutRangesSkipsWhatWasDelivered() {
        origin.setFaults("/f.bin", Faults(dropAfterBytes: 40_000, dropCount: 1, ignoreRange: true))
        let sink = fetch("/f.bin")
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, data)
        XCTAssertEqual(origin.requests.map(\.status), [200, 200])
    }

    // MARK: Odd servers

    func testServerIgnoringRangeAnswers200FromByteZero() throws {
        origin.setFaults("/f.bin", Faults(ignoreRange: true, noAcceptRanges: true))
        let sink = fetch("/f.bin", 1000, 2000)
        XCTAssertNil(sink.result())
        let head = try XCTUnwrap(sink.heads.first)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.bodyStart, 0)
        XCTAssertEqual(head.totalLength, 100_000)
        XCTAssertFalse(head.acceptsRanges)
        XCTAssertEqual(sink.body, data, "the sink gets the whole resource and decides what to keep")
    }

    func testRequestsAskForTheFilesOwnBytesUnlessTheUserAskedOtherwise() {
        fetch("/f.bin", 0, 10)
        XCTAssertEqual(origin.requests.last?.header("accept-encoding"), "identity",
                       "no on-the-fly compression: ranges of a compressed body are not the file's")
        let asking = makeSource {
            $0.extraHeaders = ["Accept-Encoding: br"]
            $0.access.scope = CredentialScope(urls: [origin.url("/")])   // the user's headers go to the user's origins
        }
        defer { asking.shutdown() }
        fetch("/f.bin", 0, 10, via: asking)
        XCTAssertEqual(origin.requests.last?.header("accept-encoding"), "br")
        XCTAssertEqual(origin.requests.last?.headers.filter { $0.0.lowercased() == "accept-encoding" }.count, 1)
    }

    func testARequestsOwnHeadersAreSentOnce() {
        let sink = RecordingSink()
        sinks.append(sink)
        var request = FetchRequest(url: origin.url("/f.bin"), start: 0, end: 10)
        request.headers = ["X-Httpcachefs-Version: \"v1\" 100000"]
        _ = source.start(request, sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertNil(sink.result())
        XCTAssertEqual(origin.requests.last?.headers.filter { $0.0.lowercased() == "x-httpcachefs-version" }.map(\.1),
                       ["\"v1\" 100000"])
    }

    func testA206BodyShorterThanItsRangeIsABadResponseNotTheRangesBytes() {
        // An origin compressing the range it was asked for: Content-Length is the compressed size.
        origin.setResponse("/gz", status: 206, headers: [("Content-Range", "bytes 1000-1999/100000"), ("Content-Encoding", "gzip")],
                           body: Array(repeating: 0x1f, count: 42))
        let sink = fetch("/gz", 1000, 2000)
        guard case let .invalidResponse(_, message)? = sink.result() else { return XCTFail("\(String(describing: sink.result()))") }
        XCTAssertTrue(message.contains("Content-Length 42"), message)
        XCTAssertEqual(sink.heads, [])
        XCTAssertEqual(sink.body, [], "not one byte of it is taken for the file's")
    }

    /// An origin that sends bytes after each body leaves them in the kept connection, where the
    /// next request reads them as its answer ("HTTP/0.9"): that request is sent again on a new
    /// connection, not failed, and the origin is not taken for unreachable.
    func testBytesAfterABodyCostTheNextRequestItsKeptConnectionNotItsAnswer() throws {
        var faults = Faults()
        faults.garbageAfterBody = Array("GARBAGE GARBAGE\r\n\r\n".utf8)
        origin.setFaults("/f.bin", faults)
        for (start, end) in [(0, 1000), (1000, 50_000), (50_000, 100_000)] as [(Int64, Int64)] {
            let sink = fetch("/f.bin", start, end)
            XCTAssertNil(sink.result(), "\(start)-\(end)")
            XCTAssertEqual(sink.body, Array(data[Int(start)..<Int(end)]))
            XCTAssertEqual(sink.heads.count, 1)
        }
        XCTAssertEqual(origin.requests.count, 3, "each range asked once: the garbage is read at once, before a request goes out")
        XCTAssertEqual(Set(origin.requests.map(\.connection)).count, 3, "each on a new connection")
    }

    func testAResponseHeaderOverCurlsLimitSaysSo() {
        origin.setResponse("/big-header", status: 200, headers: [("X-Padding", String(repeating: "a", count: 200_000))],
                           body: Array("hello".utf8))
        let sink = fetch("/big-header")
        guard case let .network(_, message)? = sink.result() else { return XCTFail("\(String(describing: sink.result()))") }
        XCTAssertTrue(message.contains("response headers too large"), message)
    }

    func testChunkedBodyHasUnknownLengthAndEndsAtEOF() {
        origin.setFaults("/f.bin", Faults(noContentLength: true))
        let sink = fetch("/f.bin", 0, nil)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.first?.status, 200)
        XCTAssertNil(sink.heads.first?.totalLength)
        XCTAssertEqual(sink.body, data)
    }

    // MARK: Failures

    func testSilentServerTimesOut() {
        source = makeSource {
            $0.lowSpeedTime = 1
            $0.maxRetries = 0
        }
        origin.setFaults("/f.bin", Faults(silent: true))
        let sink = fetch("/f.bin")
        XCTAssertEqual(sink.result(), .timeout(url: origin.url("/f.bin")))
        XCTAssertEqual(sink.heads, [])
    }

    func testConnectionRefusedIsANetworkError() throws {
        source = makeSource { $0.maxRetries = 1 }
        let closed = try OriginServer()
        let url = closed.url("/x")
        closed.stop()
        let sink = RecordingSink()
        sinks.append(sink)
        _ = source.start(FetchRequest(url: url), sink: sink)
        wait(for: [sink.finished], timeout: 30)
        guard case let .network(reportedURL, message)? = sink.result() else {
            return XCTFail("expected .network, got \(String(describing: sink.finishes))")
        }
        XCTAssertEqual(reportedURL, url)
        XCTAssertFalse(message.isEmpty)
    }

    // MARK: Cancellation

    func testCancelMidTransferFinishesOnceWithCancelled() {
        origin.setGeneratedFile("/slow", length: 50 << 20, seed: 5)
        origin.setFaults("/slow", Faults(bytesPerSecond: 2 << 20))
        let sink = RecordingSink()
        sinks.append(sink)
        let handleBox = HandleBox()
        sink.onBody = { _ in handleBox.handle?.cancel() }
        handleBox.handle = source.start(FetchRequest(url: origin.url("/slow")), sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.result(), .cancelled)
        handleBox.handle?.cancel()  // a late cancel is harmless
        XCTAssertLessThan(sink.body.count, 50 << 20)
    }

    func testCancelWhileWaitingToRetry() {
        source = makeSource { $0.retryBaseDelay = 30 }
        origin.setFaults("/f.bin", Faults(status: 500))
        let sink = RecordingSink()
        sinks.append(sink)
        let handle = source.start(FetchRequest(url: origin.url("/f.bin")), sink: sink)
        XCTAssertTrue(origin.waitForRequests(path: "/f.bin"), "the request never reached the origin")
        handle.cancel()
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.result(), .cancelled)
    }

    func testSinkRefusingTheHeadCancels() {
        let sink = RecordingSink()
        sink.acceptHead = false
        fetch("/f.bin", sink: sink)
        XCTAssertEqual(sink.result(), .cancelled)
        XCTAssertEqual(sink.body, [])
    }

    func testSinkRefusingBodyCancels() {
        let sink = RecordingSink()
        sink.stopAfterBytes = 1
        fetch("/f.bin", sink: sink)
        XCTAssertEqual(sink.result(), .cancelled)
    }

    /// The engine's sink says `.stop` with the last byte of a fetch (its planned end is reached):
    /// curl has the whole answer then, so the connection stays open for the next request (an
    /// abort would close it, and every miss would pay a new connection, a TLS handshake too).
    func testASinkStoppingOnTheLastByteKeepsTheConnection() {
        for range in [(0, 4000), (50_000, 90_000), (10, 20)] as [(Int64, Int64)] {
            let sink = RecordingSink()
            sink.stopAfterBytes = Int(range.1 - range.0)
            fetch("/f.bin", range.0, range.1, sink: sink)
            XCTAssertEqual(sink.result(), .cancelled, "the sink's stop is still what it hears")
            XCTAssertEqual(sink.body, Array(data[Int(range.0)..<Int(range.1)]))
        }
        XCTAssertEqual(origin.requests.count, 3)
        XCTAssertEqual(origin.connectionsAccepted, 1, "one connection for the three requests")
    }

    func testASinkStoppingMidBodyStillClosesTheAttempt() {
        origin.setGeneratedFile("/big", length: 6 << 20, seed: 11)   // more than one receive buffer
        let sink = RecordingSink()
        sink.stopAfterBytes = 1
        fetch("/big", sink: sink)
        XCTAssertEqual(sink.result(), .cancelled)
        fetch("/f.bin", 0, 10)
        XCTAssertEqual(origin.connectionsAccepted, 2, "the rest of the first answer was not read: a new connection")
    }

    func testShutdownCancelsLiveTransfersAndRefusesNewOnes() {
        origin.setFaults("/f.bin", Faults(silent: true))
        let sink = RecordingSink()
        sinks.append(sink)
        _ = source.start(FetchRequest(url: origin.url("/f.bin")), sink: sink)
        XCTAssertTrue(origin.waitForRequests(path: "/f.bin"), "the request never reached the origin")
        source.shutdown()
        XCTAssertEqual(sink.result(), .cancelled)
        let late = RecordingSink()
        sinks.append(late)
        _ = source.start(FetchRequest(url: origin.url("/f.bin")), sink: late)
        wait(for: [late.finished], timeout: 30)
        XCTAssertEqual(late.result(), .cancelled)
    }

    // MARK: Concurrency

    func testTwentyConcurrentTransfers() {
        let length: Int64 = 20 << 20
        origin.setGeneratedFile("/g", length: length, seed: 77)
        let chunk: Int64 = 1 << 20
        let started = (0..<20).map { i -> RecordingSink in
            let sink = RecordingSink()
            sinks.append(sink)
            _ = source.start(FetchRequest(url: origin.url("/g"), start: Int64(i) * chunk + 7, end: Int64(i + 1) * chunk),
                             sink: sink)
            return sink
        }
        wait(for: started.map(\.finished), timeout: 60)
        for (i, sink) in started.enumerated() {
            XCTAssertNil(sink.result())
            XCTAssertTrue(sink.body == OriginServer.generatedBytes(seed: 77, offset: Int64(i) * chunk + 7,
                                                                   count: Int(chunk - 7)), "transfer \(i)")
        }
        XCTAssertEqual(origin.requestCount(path: "/g"), 20)
    }
}

/// Lets a sink callback reach the handle returned by `start`.
final class HandleBox: @unchecked Sendable {
    private let lock = NSLock()
    private var _handle: FetchHandle?
    var handle: FetchHandle? {
        get { lock.withLock { _handle } }
        set { lock.withLock { _handle = newValue } }
    }
}
