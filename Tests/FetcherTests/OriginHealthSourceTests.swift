import CacheCore
@testable import Fetcher
import Foundation
import Logging
import XCTest

/// The offline-mode layer on its own: a source that answers on the caller's stack, the probe
/// timers on a manual scheduler and a wall clock the test moves. Every step happens inside the
/// call that causes it, so each test is one exact sequence with nothing to wait for.
final class OriginHealthSourceTests: XCTestCase {
    let url = "http://origin.test/media/film.mp4"
    let probes = Scheduler.manual()
    let wall = LockedValue(Date(timeIntervalSince1970: 1_900_000_000))

    /// Answers every request at once, on the caller's stack: refused while `away`, else a 206
    /// head and the end.
    final class SyncSource: RangeSource, Sendable {
        let away = LockedValue(true)
        let asked = LockedValue<[FetchRequest]>([])
        struct Handle: FetchHandle { func cancel() {} }
        func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
            asked.withLock { $0.append(request) }
            if away.withLock({ $0 }) {
                sink.fetchDidFinish(.network(url: request.url, message: "Connection refused"))
            } else if sink.fetchDidReceiveHead(ResponseHead(status: 206, finalURL: request.url, bodyStart: request.start,
                                                            totalLength: 1000, etag: "\"e\"", acceptsRanges: true)) {
                sink.fetchDidFinish(nil)
            } else {
                sink.fetchDidFinish(.cancelled)
            }
            return Handle()
        }
    }

    func layer(_ source: SyncSource) -> OriginHealthSource {
        let wall = self.wall
        var logger = Logger(label: "health-test")
        logger.logLevel = .critical
        return OriginHealthSource(source, logger: logger, now: { wall.withLock { $0 } }, scheduler: probes)
    }

    /// Starts a request through `health`: its end (nil: none yet; `.some(nil)`: success), as
    /// answered before `start` returned.
    @discardableResult
    func request(_ health: OriginHealthSource) -> FetchError?? {
        let sink = RecordingSink()
        _ = health.start(FetchRequest(url: url, start: 0, end: 100), sink: sink)
        return sink.finishes.first
    }

    /// An origin down and asked nothing for ten minutes (a refused mount's) is forgotten at its
    /// next failed probe: no timer is left, it is not listed down, and the next request asks it.
    func testAnOriginAskedNothingForTenMinutesIsNoLongerProbed() {
        let source = SyncSource()
        let health = layer(source)
        request(health)
        var probesSent = 0
        for _ in 0..<70 where probes.pending > 0 {
            wall.withLock { $0 += 10 }
            probes.advance(by: .seconds(10))
            probesSent += 1
        }
        XCTAssertEqual(probes.pending, 0, "no probe timer left")
        XCTAssertEqual(probesSent, 60, "probed for ten minutes, ten seconds apart")
        XCTAssertTrue(health.downOrigins().isEmpty, "no longer listed down")
        XCTAssertFalse(health.isDown(url: url))
        let asked = source.asked.withLock { $0.count }
        XCTAssertEqual(request(health), .some(.network(url: url, message: "Connection refused")), "the next request asks it afresh")
        XCTAssertEqual(source.asked.withLock { $0.count }, asked + 1)
        XCTAssertEqual(probes.pending, 1, "and it is probed again")
    }

    /// A request while it is down keeps it probed: only an origin asked nothing is forgotten.
    func testAnOriginStillAskedIsStillProbed() {
        let source = SyncSource()
        let health = layer(source)
        request(health)
        for _ in 0..<70 {
            wall.withLock { $0 += 10 }
            probes.advance(by: .seconds(10))
            request(health)   // failed at once (down), but asked
        }
        XCTAssertTrue(health.isDown(url: url))
        let asked = source.asked.withLock { $0.count }
        wall.withLock { $0 += 10 }
        probes.advance(by: .seconds(10))
        XCTAssertEqual(source.asked.withLock { $0.count }, asked + 1, "still probed after ten minutes")
    }

    /// The first refusal marks it down; probes go out only when their timer fires, 1 s then 2 s
    /// apart (a failed probe doubles the wait), each one byte; the probe that is answered brings
    /// it back, with no request in between.
    func testProbesGoOutOnTheSchedulersClockAndBackOffUntilOneIsAnswered() {
        let source = SyncSource()
        let health = layer(source)
        XCTAssertEqual(request(health), .some(.network(url: url, message: "Connection refused")))
        XCTAssertTrue(health.isDown(url: url))
        XCTAssertEqual(probes.pending, 1, "the first probe's timer")
        let asked = { source.asked.withLock { $0.count } }
        XCTAssertEqual(asked(), 1)

        wall.withLock { $0 += 1 }
        probes.advance(by: .seconds(1))
        XCTAssertEqual(asked(), 2, "the first probe, at 1 s")
        XCTAssertEqual(source.asked.withLock { $0.last.map { [$0.start, $0.end] } }, [0, 1], "one byte")
        XCTAssertEqual(health.downOrigins().first?.failedAttempts, 2)

        wall.withLock { $0 += 1 }
        probes.advance(by: .seconds(1))
        XCTAssertEqual(asked(), 2, "the next waits 2 s")
        source.away.withLock { $0 = false }
        wall.withLock { $0 += 1 }
        probes.advance(by: .seconds(1))
        XCTAssertEqual(asked(), 3, "the second probe, 2 s after the first")
        XCTAssertFalse(health.isDown(url: url), "answered: up again")
        XCTAssertEqual(probes.pending, 0, "no more probes")
        XCTAssertEqual(request(health), .some(nil), "requests go to the origin again")
    }

    /// The wall clock set back an hour while the origin is down: the probe still goes out when
    /// its timer fires (it once computed its delay again from the wall clock and waited the hour).
    func testAWallClockSetBackDoesNotHoldTheProbeBack() {
        let source = SyncSource()
        let health = layer(source)
        request(health)
        XCTAssertTrue(health.isDown(url: url))
        source.away.withLock { $0 = false }
        wall.withLock { $0 -= 3600 }
        probes.advance(by: .seconds(1))
        XCTAssertEqual(source.asked.withLock { $0.count }, 2, "the probe went out at its time")
        XCTAssertFalse(health.isDown(url: url))
    }

    /// While it is down a request fails at once, without reaching the origin, saying why; after
    /// `stop` no probe goes out.
    func testWhileDownRequestsFailAtOnceAndStopEndsTheProbes() throws {
        let source = SyncSource()
        let health = layer(source)
        request(health)
        let sink = RecordingSink()
        _ = health.start(FetchRequest(url: url, start: 100, end: 200), sink: sink)
        probes.advance(by: .zero)   // no engine pool given: the failure is answered on the scheduler
        guard case let .network(_, message)?? = sink.finishes.first else { return XCTFail("\(sink.finishes)") }
        XCTAssertTrue(message.contains("is down"), message)
        XCTAssertEqual(source.asked.withLock { $0.count }, 1, "the origin was not asked")
        health.stop()
        wall.withLock { $0 += 1 }
        probes.advance(by: .seconds(1))
        XCTAssertEqual(source.asked.withLock { $0.count }, 1, "no probe after stop")
    }
}
