import CacheCore
@testable import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// `--tpslimit` and `--tpslimit-burst`: whole tokens per origin, driven by a clock the test sets.
final class TokenBucketRequestTests: XCTestCase {
    func testWholeTokensRefillAtTheRateUpToTheBurstAndNeverGoIntoDebt() {
        var b = TokenBucket(perSecond: 2, burst: 3, now: .at(0))
        XCTAssertTrue(b.takeWhole(now: .at(0)))
        XCTAssertTrue(b.takeWhole(now: .at(0)))
        XCTAssertTrue(b.takeWhole(now: .at(0)), "a burst of three after a quiet spell")
        XCTAssertFalse(b.takeWhole(now: .at(0)), "then none")
        XCTAssertFalse(b.takeWhole(now: .at(0)), "a refusal takes nothing: no debt")
        XCTAssertEqual(b.waitWhole(now: .at(0)), .milliseconds(500), "one every half second at 2 a second")
        XCTAssertFalse(b.takeWhole(now: .at(499_999_999)))
        XCTAssertTrue(b.takeWhole(now: .at(500_000_000)))
        XCTAssertFalse(b.isFull(now: .at(500_000_000)))
        XCTAssertTrue(b.isFull(now: .at(10_000_000_000)), "a long quiet spell refills only up to the burst")
        XCTAssertTrue(b.takeWhole(now: .at(10_000_000_000)))
        XCTAssertTrue(b.takeWhole(now: .at(10_000_000_000)))
        XCTAssertTrue(b.takeWhole(now: .at(10_000_000_000)))
        XCTAssertFalse(b.takeWhole(now: .at(10_000_000_000)))
    }

    func testAClockThatGoesBackRefillsNothing() {
        var b = TokenBucket(perSecond: 1, burst: 1, now: .at(5_000_000_000))
        XCTAssertTrue(b.takeWhole(now: .at(5_000_000_000)))
        XCTAssertFalse(b.takeWhole(now: .at(1_000_000_000)))
        XCTAssertTrue(b.takeWhole(now: .at(6_000_000_000)))
    }

    func testEachOriginHasItsOwnRate() {
        var r = RequestRate(perSecond: 1, burst: 0)
        XCTAssertEqual(r.burst, 1, "a burst below 1 is 1, as rclone takes it")
        XCTAssertTrue(r.take("http://a:80", now: .at(0)))
        XCTAssertFalse(r.allows("http://a:80", now: .at(0)))
        XCTAssertTrue(r.allows("http://b:80", now: .at(0)), "a busy origin never slows another")
        XCTAssertTrue(r.take("http://b:80", now: .at(0)))
        XCTAssertEqual(r.wait("http://a:80", now: .at(250_000_000)), .milliseconds(750))
        XCTAssertEqual(r.wait("http://c:80", now: .at(0)), .zero)
    }
}

/// `TransferAdmission` under `--tpslimit` and `--max-connections-per-host`: a table of what
/// arrives and what starts at each time.
final class TransferAdmissionRateTests: XCTestCase {
    let a = "http://a:80", b = "http://b:80"

    private func drain(_ s: inout TransferAdmission, now: UInt64) -> [TransferAdmission.Step] {
        var steps: [TransferAdmission.Step] = []
        while let step = s.next(now: .at(now)) { steps.append(step) }
        return steps
    }

    func testTransfersStartAsTheirOriginsTokensComeInClassOrder() {
        var s = TransferAdmission(limits: .init(perOrigin: nil, total: nil, requestRate: (1, 2)))
        for (id, p) in [(1, FetchPriority.preload), (2, .far), (3, .scan), (4, .near)] { s.arrive(id, origin: a, priority: p) }
        s.arrive(5, origin: b, priority: .preload)
        XCTAssertEqual(drain(&s, now: 0), [.start(4), .start(2), .start(5)], "a's burst of two, the highest classes; b's own")
        XCTAssertEqual(s.tokenWait(now: .at(0)), .seconds(1))
        XCTAssertEqual(drain(&s, now: 999_999_999), [])
        s.arrive(6, origin: a, priority: .waiting)
        XCTAssertEqual(drain(&s, now: 1_000_000_000), [.start(6)], "the next token to a waiting read, ahead of older scans")
        XCTAssertEqual(drain(&s, now: 2_000_000_000), [.start(3)], "then the scan")
        XCTAssertEqual(drain(&s, now: 3_000_000_000), [.start(1)], "warm-up last")
        XCTAssertNil(s.tokenWait(now: .at(3_000_000_000)), "nothing waits for a token")
    }

    func testARetryIsARequestAndWaitsForAToken() {
        var s = TransferAdmission(limits: .init(perOrigin: nil, total: nil, requestRate: (0.5, 1)))
        s.arrive(1, origin: a, priority: .waiting)
        XCTAssertEqual(drain(&s, now: 0), [.start(1)])
        s.leave(1)
        s.arrive(1, origin: a, priority: .waiting)   // the attempt failed; the retry comes back
        XCTAssertEqual(drain(&s, now: 1_000_000_000), [])
        XCTAssertEqual(drain(&s, now: 2_000_000_000), [.start(1)])
    }

    func testAWaitingReadTakesThePlaceOfItsOwnOriginsReadAheadUnderThePerHostCap() {
        let rows: [(running: FetchPriority, arriving: FetchPriority, preemptible: Bool, within: Bool, steps: [TransferAdmission.Step])] = [
            (.preload, .waiting, true, true, [.preempt(victim: 1, for: 2)]),   // a player behind a warm-up
            (.far, .waiting, true, true, [.preempt(victim: 1, for: 2)]),
            (.near, .waiting, true, true, []),        // near read-ahead is about to be read
            (.preload, .near, true, true, []),        // only a read that waits
            (.preload, .waiting, false, true, []),    // one that cannot be resumed keeps its place
            (.preload, .waiting, true, false, []),    // the node client's cap: never
        ]
        for (i, r) in rows.enumerated() {
            var s = TransferAdmission(limits: .init(perOrigin: 1, total: 8, preemptsWithinOrigin: r.within))
            s.arrive(1, origin: a, priority: r.running)
            s.arrive(3, origin: b, priority: .preload)
            var steps: [TransferAdmission.Step] = []
            while let step = s.next(preemptible: { _ in r.preemptible }) { steps.append(step) }
            XCTAssertEqual(steps, [.start(1), .start(3)], "row \(i)")
            s.arrive(2, origin: a, priority: r.arriving)
            steps = []
            while let step = s.next(preemptible: { _ in r.preemptible }) { steps.append(step) }
            XCTAssertEqual(steps, r.steps, "row \(i)")
            XCTAssertEqual(s.running(to: b), 1, "row \(i): another origin's transfer is never the victim")
        }
    }

    func testThePerHostCapComesFromTheConfiguration() {
        var c = FetcherConfiguration(clock: .realTime, maxConnections: 2, maxTotalConnections: 8)
        XCTAssertEqual(TransferAdmission.Limits.curl(c), .init(perOrigin: nil, total: 8), "no per-host cap unless given")
        c.maxTransfersPerOrigin = 2
        c.requestsPerSecond = 5
        c.requestBurst = 3
        XCTAssertEqual(TransferAdmission.Limits.curl(c), .init(perOrigin: 2, total: 8, requestRate: (5, 3), preemptsWithinOrigin: true))
        let nodes = c.forTierNodes()
        XCTAssertEqual(TransferAdmission.Limits.curl(nodes), .init(perOrigin: nil, total: 8), "a tier node is not the origin")
        XCTAssertEqual(TransferAdmission.Limits.nodes(nodes), .init(perOrigin: 8, total: nil))
    }
}

/// The limits on the libcurl loop against a real (loopback) origin, counting its requests; no
/// assertion on time.
final class RequestRateOverHTTPTests: XCTestCase {
    var origin: OriginServer!

    override func setUpWithError() throws { origin = try OriginServer() }
    override func tearDown() { origin?.stop(); origin = nil }

    private func source(_ tweak: (inout FetcherConfiguration) -> Void) -> CurlRangeSource {
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 10,
                                     maxRetries: 0, retryBaseDelay: 0.01)
        tweak(&c)
        return CurlRangeSource(configuration: c, logger: Logger(label: "fetcher-tests"))
    }

    func testATransferPastTheBurstIsNotSentUntilItsOriginHasAToken() {
        origin.setGeneratedFile("/t", length: 64 << 10, seed: 8)
        // One request every 1000 s after a burst of two: the third is never sent in this test.
        let source = source { $0.requestsPerSecond = 0.001; $0.requestBurst = 2 }
        defer { source.shutdown() }
        let sinks = (0..<3).map { _ in RecordingSink() }
        let handles = sinks.map { source.start(FetchRequest(url: origin.url("/t")), sink: $0) }
        wait(for: [sinks[0].finished, sinks[1].finished], timeout: 30)
        XCTAssertNil(sinks[0].result())
        XCTAssertNil(sinks[1].result())
        XCTAssertEqual(origin.requestCount(path: "/t"), 2, "the third waits for a token, unsent")
        handles[2].cancel()
        wait(for: [sinks[2].finished], timeout: 10)
        XCTAssertEqual(sinks[2].result(), .cancelled)
        XCTAssertEqual(origin.requestCount(path: "/t"), 2)
    }

    func testThePerHostCapHoldsWithinTheTotal() {
        origin.setGeneratedFile("/h", length: 4 << 20, seed: 9)
        let source = source { $0.maxTotalConnections = 8; $0.maxConnections = 1; $0.maxTransfersPerOrigin = 1 }
        defer { source.shutdown() }
        let part: Int64 = 1 << 20
        let sinks = (0..<4).map { i -> RecordingSink in
            let sink = RecordingSink()
            _ = source.start(FetchRequest(url: origin.url("/h"), start: Int64(i) * part, end: Int64(i + 1) * part), sink: sink)
            return sink
        }
        wait(for: sinks.map(\.finished), timeout: 30)
        for (i, sink) in sinks.enumerated() {
            XCTAssertNil(sink.result())
            XCTAssertTrue(sink.body == OriginServer.generatedBytes(seed: 9, offset: Int64(i) * part, count: Int(part)))
        }
        XCTAssertEqual(origin.requestCount(path: "/h"), 4)
        XCTAssertLessThanOrEqual(origin.peakConnections, 1, "four transfers to one host, one connection at a time")
        XCTAssertEqual(source.peakAttachedTransfers, 1, "the others waited in the queue, not in libcurl's")
    }
}
