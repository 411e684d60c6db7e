import CacheCore
@testable import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// Flow control in the libcurl source: a sink that pauses gets every byte once and in order, the
/// bandwidth limit (`--bwlimit`) delivers every byte, and the connection cap (`--max-connections`)
/// holds across transfers. Asserts on bytes and connection counts, never on time.
final class CurlFlowControlTests: XCTestCase {
    var origin: OriginServer!

    override func setUpWithError() throws { origin = try OriginServer() }
    override func tearDown() { origin?.stop(); origin = nil }

    private func source(_ tweak: (inout FetcherConfiguration) -> Void = { _ in }) -> CurlRangeSource {
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 10,
                                     maxRetries: 4, retryBaseDelay: 0.01)
        tweak(&c)
        return CurlRangeSource(configuration: c, logger: Logger(label: "fetcher-tests"))
    }

    func testASinkThatPausesGetsEveryByteOnceAndInOrder() {
        let length: Int64 = 3 << 20
        origin.setGeneratedFile("/p", length: length, seed: 5)
        let source = source()
        defer { source.shutdown() }
        let sink = RecordingSink()
        let box = ResumeBox()
        sink.pausing = box
        box.set(source.start(FetchRequest(url: origin.url("/p"), start: 100), sink: sink))
        wait(for: [sink.finished], timeout: 30)
        XCTAssertNil(sink.result())
        XCTAssertGreaterThan(sink.pauses, 1, "the transfer was paused")
        XCTAssertTrue(sink.body == OriginServer.generatedBytes(seed: 5, offset: 100, count: Int(length - 100)),
                      "every byte once, in order")
        XCTAssertEqual(origin.requestCount(path: "/p"), 1, "resumed, not asked again")
        XCTAssertGreaterThan(sink.drains, 0, "told when each turn's bytes were all handed over")
        XCTAssertEqual(sink.violations, [])
    }

    func testABandwidthLimitDeliversEveryByte() {
        let length: Int64 = 1 << 20
        origin.setGeneratedFile("/b", length: length, seed: 6)
        let source = source { $0.maxBytesPerSecond = 8 << 20 }
        defer { source.shutdown() }
        let sinks = (0..<3).map { i -> RecordingSink in
            let sink = RecordingSink()
            _ = source.start(FetchRequest(url: origin.url("/b"), start: Int64(i) * 1000), sink: sink)
            return sink
        }
        wait(for: sinks.map(\.finished), timeout: 30)
        for (i, sink) in sinks.enumerated() {
            XCTAssertNil(sink.result())
            XCTAssertTrue(sink.body == OriginServer.generatedBytes(seed: 6, offset: Int64(i) * 1000, count: Int(length) - i * 1000))
            XCTAssertEqual(sink.violations, [])
        }
    }

    func testTheConnectionCapHoldsAcrossTransfers() {
        let length: Int64 = 8 << 20
        origin.setGeneratedFile("/c", length: length, seed: 7)
        let source = source { $0.maxTotalConnections = 2 }
        defer { source.shutdown() }
        let part: Int64 = 1 << 20
        let sinks = (0..<8).map { i -> RecordingSink in
            let sink = RecordingSink()
            _ = source.start(FetchRequest(url: origin.url("/c"), start: Int64(i) * part, end: Int64(i + 1) * part), sink: sink)
            return sink
        }
        wait(for: sinks.map(\.finished), timeout: 30)
        for (i, sink) in sinks.enumerated() {
            XCTAssertNil(sink.result())
            XCTAssertTrue(sink.body == OriginServer.generatedBytes(seed: 7, offset: Int64(i) * part, count: Int(part)))
        }
        XCTAssertEqual(origin.requestCount(path: "/c"), 8)
        XCTAssertLessThanOrEqual(origin.peakConnections, 2, "eight transfers, never more than two connections at once")
        XCTAssertEqual(source.peakAttachedTransfers, 2, "the others waited without an easy handle and its buffer")
    }
}

extension CurlFlowControlTests {
    func testATransferWaitingForAConnectionIsCancelledWithoutEverBeingSent() {
        origin.setGeneratedFile("/hold", length: 1 << 20, seed: 3)
        origin.setFaults("/hold", Faults(silent: true))   // takes the only connection and keeps it
        origin.setGeneratedFile("/next", length: 1 << 20, seed: 4)
        let source = source { $0.maxTotalConnections = 1 }
        defer { source.shutdown() }
        let holding = RecordingSink(), waiting = RecordingSink()
        let first = source.start(FetchRequest(url: origin.url("/hold")), sink: holding)
        XCTAssertTrue(origin.waitForRequests(path: "/hold"), "the request never reached the origin")
        let second = source.start(FetchRequest(url: origin.url("/next")), sink: waiting)
        second.cancel()
        wait(for: [waiting.finished], timeout: 10)
        XCTAssertEqual(waiting.result(), .cancelled)
        XCTAssertEqual(origin.requestCount(path: "/next"), 0, "it never left the queue")
        XCTAssertEqual(source.peakAttachedTransfers, 1)
        first.cancel()
        wait(for: [holding.finished], timeout: 10)
        XCTAssertEqual(holding.result(), .cancelled)
    }
}

/// The bucket behind `--bwlimit`, driven by a clock the test sets.
final class TokenBucketTests: XCTestCase {
    func testBytesPassWhileATokenIsLeftAndThenWaitForTheDebtToBePaid() {
        var bucket = TokenBucket(bytesPerSecond: 1 << 20, now: .at(0))   // burst: 52428.8 bytes
        XCTAssertTrue(bucket.take(128 << 10, now: .at(0)), "a full bucket lets one chunk through")
        XCTAssertFalse(bucket.take(1, now: .at(0)), "in debt: nothing passes")
        let wait = bucket.wait(now: .at(0))
        XCTAssertGreaterThan(wait, .zero)
        XCTAssertFalse(bucket.take(1, now: .at(0) + wait / 2))
        XCTAssertTrue(bucket.take(1, now: .at(0) + wait + .milliseconds(1)), "the debt is paid after the wait")
    }

    func testOverAStretchTheRateHoldsToWithinABurstAndAChunk() {
        let rate: Int64 = 10 << 20
        var bucket = TokenBucket(bytesPerSecond: rate, now: .at(0))
        var now = MonotonicInstant.at(0)
        var passed: Int64 = 0
        let chunk = 64 << 10
        while now < .at(2_000_000_000) {   // two simulated seconds, as fast as the loop asks
            if bucket.take(chunk, now: now) { passed += Int64(chunk) } else { now = now + max(.nanoseconds(1), bucket.wait(now: now)) }
        }
        XCTAssertLessThanOrEqual(Double(passed), 2 * Double(rate) + bucket.burst + Double(chunk))
        XCTAssertGreaterThanOrEqual(Double(passed), 2 * Double(rate) - Double(chunk))
    }

    func testIdleTimeSavesNoMoreThanTheBurst() {
        var bucket = TokenBucket(bytesPerSecond: 1 << 20, now: .at(0))
        bucket.refill(now: .at(10_000_000_000))
        XCTAssertEqual(bucket.tokens, bucket.burst)
    }
}
