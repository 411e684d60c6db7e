import CacheCore
@testable import Fetcher
import XCTest

/// A scanner's fetch that its read waits on (`.waitedScan`) beside a copy's read-ahead to the same
/// origin. Before this class the engine left such a fetch at `.scan`, and the rows with `.scan`
/// show what that cost: held, and never admitted under `--max-connections`, for as long as the
/// copy's near streams followed each other. The rule now: .at(a waited scan fetch never yields to)
/// read-ahead and starts before it, and still yields to every player's waiting read at once.
/// Time is passed in, never read.
final class TransferSchedulerWaitedScanTests: XCTestCase {
    let ms: UInt64 = 1_000_000
    let a = "http://a:80", b = "http://b:80"

    /// A copy of a big file: its near streams follow each other (the next begins before the
    /// last ends) for 50 streams; returns, per stream, whether the probe's transfer 1 was held.
    private func heldDuringACopy(_ probe: FetchPriority) -> [Bool] {
        var s = TransferScheduler(patience: .nanoseconds(100 * ms))
        s.add(1, origin: a, priority: probe, owner: 5, now: .at(0))
        return (10..<60).map { stream in
            let now = UInt64(stream) * 1000 * ms
            s.add(stream, origin: a, priority: .near, owner: 7, now: .at(now))
            s.remove(stream - 1)
            return s.decide(now: .at(now)).held.contains(1)
        }
    }

    func testAScanFetchNobodyWaitsOnIsHeldForTheWholeCopyButAWaitedOneNever() {
        XCTAssertEqual(heldDuringACopy(.scan), Array(repeating: true, count: 50),
                       "a probe's margin takes what the copy leaves (and so did its waited fetch, before)")
        XCTAssertEqual(heldDuringACopy(.waitedScan), Array(repeating: false, count: 50),
                       "a fetch the probe waits on does not wait out the copy")
    }

    func testAWaitedScanFetchYieldsToAPlayersWaitingReadAtOnceAndToNoReadAhead() {
        struct Row { var line: UInt; var others: [FetchPriority]; var held: Bool }
        let rows: [Row] = [
            Row(line: #line, others: [], held: false),
            Row(line: #line, others: [.near, .far], held: false),             // a copy's and a player's read-ahead
            Row(line: #line, others: [.scan, .preload], held: false),          // the margins, warm-up
            Row(line: #line, others: [.waitedScan], held: false),             // another probe's
            Row(line: #line, others: [.waiting], held: true),                  // a film's read, not yet behind
            Row(line: #line, others: [.near, .waiting], held: true),
        ]
        for r in rows {
            var s = TransferScheduler(patience: .nanoseconds(100 * ms))
            s.add(1, origin: a, priority: .waitedScan, owner: 5, now: .at(0))
            for (i, p) in r.others.enumerated() { s.add(10 + i, origin: a, priority: p, owner: 20 + i, now: .at(0)) }
            s.add(99, origin: b, priority: .waiting, owner: 30, now: .at(0))   // another origin's film changes nothing
            XCTAssertEqual(s.decide(now: .at(0)).held.contains(1), r.held, line: r.line)
        }
    }

    func testWhileAProbeWaitsItsMarginAndWarmUpYieldToIt() {
        var s = TransferScheduler(patience: .nanoseconds(100 * ms))
        s.add(1, origin: a, priority: .waitedScan, owner: 5, now: .at(0))
        s.add(2, origin: a, priority: .scan, owner: 6, now: .at(0))
        s.add(3, origin: a, priority: .preload, owner: nil, now: .at(0))
        s.add(4, origin: a, priority: .near, owner: 7, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(0)).held, [2, 3])
        s.setPriority(1, .scan, waited: .nanoseconds(0), now: .at(50 * ms))   // the probe's read was answered
        XCTAssertEqual(s.decide(now: .at(50 * ms)).held, [1, 2, 3])
    }

    func testAPlayersReadThatIsBehindHoldsAWaitedScanFetchLikeAnyOther() {
        var s = TransferScheduler(patience: .nanoseconds(100 * ms))
        s.add(1, origin: a, priority: .waiting, owner: 7, now: .at(0))
        s.add(2, origin: a, priority: .near, owner: 7, now: .at(0))
        s.add(3, origin: a, priority: .waitedScan, owner: 5, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(100 * ms)).held, [3], "the copy's own stream runs; the probe waits for the film's read")
    }

    /// `--max-connections 2`, both taken by a copy's near streams, its next stream always queued
    /// before the current one ends; returns the starts of 50 such turns after the probe's
    /// fetch (3) arrived.
    private func startsDuringACopy(_ probe: FetchPriority) -> [TransferAdmission.Step] {
        var s = TransferAdmission(limits: .init(perOrigin: nil, total: 2))
        s.arrive(1, origin: a, priority: .near)
        s.arrive(2, origin: a, priority: .near)
        XCTAssertEqual([s.next(), s.next()], [.start(1), .start(2)])
        s.arrive(3, origin: a, priority: probe)
        XCTAssertNil(s.next(preemptible: { _ in true }), "a probe takes no running stream's place")
        var running = [1, 2], starts: [TransferAdmission.Step] = []
        for id in 4..<54 {
            s.arrive(id, origin: a, priority: .near)
            s.leave(running.removeFirst())
            while let step = s.next() {
                starts.append(step)
                if case .start(let started) = step { running.append(started) }
            }
            if let i = running.firstIndex(of: 3) { running.remove(at: i); s.leave(3) }   // a probe's fetch is small
        }
        return starts
    }

    func testUnderMaxConnectionsAWaitedScanFetchGetsTheNextFreePlaceAheadOfReadAhead() {
        XCTAssertFalse(startsDuringACopy(.scan).contains(.start(3)), "a margin nobody waits on waits out the copy (so did a waited fetch, before)")
        XCTAssertEqual(startsDuringACopy(.waitedScan).first, .start(3), "the first place the copy frees")
    }

    func testUnderMaxConnectionsAPlayersWaitingReadStillGoesFirst() {
        var s = TransferAdmission(limits: .init(perOrigin: nil, total: 1))
        s.arrive(1, origin: a, priority: .near)
        XCTAssertEqual(s.next(), .start(1))
        s.arrive(2, origin: a, priority: .near)
        s.arrive(3, origin: a, priority: .waitedScan)
        s.arrive(4, origin: a, priority: .waiting)
        s.leave(1)
        XCTAssertEqual(s.next(), .start(4))
        s.leave(4)
        XCTAssertEqual(s.next(), .start(3))
        s.leave(3)
        XCTAssertEqual(s.next(), .start(2))
    }

    func testUnderBwlimitAWaitedScanFetchGetsTokensAfterAPlayersReadAndBeforeReadAhead() {
        let t = Throttle(bytesPerSecond: 1, now: .at(0))   // tokens for the first bytes only
        XCTAssertTrue(t.admit(64 << 10, transfer: 1, priority: .far, now: .at(0)))
        XCTAssertFalse(t.admit(1, transfer: 2, priority: .near, now: .at(0)))
        XCTAssertFalse(t.admit(1, transfer: 3, priority: .waitedScan, now: .at(0)))
        XCTAssertFalse(t.admit(1, transfer: 4, priority: .waiting, now: .at(0)))
        XCTAssertFalse(t.admit(1, transfer: 5, priority: .scan, now: .at(0)))
        let order = (0..<5).flatMap { _ in t.due(now: .at(.max / 2)) }
        XCTAssertEqual(order, [4, 3, 2, 5])
    }
}
