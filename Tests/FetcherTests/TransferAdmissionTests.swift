import CacheCore
@testable import Fetcher
import XCTest

/// The admission policy both clients follow (libcurl's loop, the tier node client), as a table:
/// what arrives, leaves or changes class, and what starts next. No sockets, no clock.
final class TransferAdmissionTests: XCTestCase {
    let a = "http://a:80", b = "http://b:80"

    /// Every step `next` gives until it gives none.
    private func drain(_ s: inout TransferAdmission, preemptible: (Int) -> Bool = { _ in false }) -> [TransferAdmission.Step] {
        var steps: [TransferAdmission.Step] = []
        while let step = s.next(preemptible: preemptible) { steps.append(step) }
        return steps
    }

    func testTransfersStartAtOnceWhileTheLimitsLeaveRoom() {
        var s = TransferAdmission(limits: .init(perOrigin: 2, total: nil))
        s.arrive(1, origin: a, priority: .far)
        s.arrive(2, origin: a, priority: .far)
        s.arrive(3, origin: b, priority: .far)
        XCTAssertEqual(drain(&s), [.start(1), .start(3), .start(2)], "all start; b, with none running, before a's second")
        s.arrive(4, origin: a, priority: .waiting)
        XCTAssertEqual(drain(&s), [], "a's two places are taken, even for a waiting read")
        XCTAssertEqual(s.counts.running, 3)
        XCTAssertEqual(s.counts.queued, 1)
    }

    func testAFreedPlaceGoesToTheHighestClassThenTheOldest() {
        let rows: [(queued: [(Int, FetchPriority)], starts: Int)] = [
            ([(2, .preload), (3, .waiting), (4, .near)], 3),   // a waiting read before read-ahead
            ([(2, .preload), (3, .far), (4, .near)], 4),       // near read-ahead before far
            ([(2, .preload), (3, .scan)], 3),                  // a scan before warm-up
            ([(2, .far), (3, .far), (4, .far)], 2),            // within a class, the oldest
        ]
        for (row, r) in rows.enumerated() {
            var s = TransferAdmission(limits: .init(perOrigin: 1, total: nil))
            s.arrive(1, origin: a, priority: .far)
            XCTAssertEqual(drain(&s), [.start(1)])
            for (id, p) in r.queued { s.arrive(id, origin: a, priority: p) }
            XCTAssertEqual(drain(&s), [], "row \(row): the node's one place is taken")
            s.leave(1)
            XCTAssertEqual(drain(&s), [.start(r.starts)], "row \(row)")
        }
    }

    func testAReadThatBeginsToWaitOnAQueuedTransferMovesItFirst() {
        var s = TransferAdmission(limits: .init(perOrigin: 1, total: nil))
        s.arrive(1, origin: a, priority: .near)
        s.arrive(2, origin: a, priority: .near)
        s.arrive(3, origin: a, priority: .far)
        XCTAssertEqual(drain(&s), [.start(1)])
        s.reclass(3, .waiting)
        s.leave(1)
        XCTAssertEqual(drain(&s), [.start(3)])
    }

    func testEachOriginHasItsOwnCapAndAFullOneHoldsUpNoOther() {
        var s = TransferAdmission(limits: .init(perOrigin: 1, total: nil))
        s.arrive(1, origin: a, priority: .far)
        s.arrive(2, origin: a, priority: .waiting)
        s.arrive(3, origin: b, priority: .preload)
        XCTAssertEqual(drain(&s), [.start(2), .start(3)], "a's read first; b's warm-up is not behind a's queue")
        XCTAssertEqual(s.running(to: a), 1)
        s.leave(2)
        XCTAssertEqual(drain(&s), [.start(1)])
    }

    func testUnderATotalCapTheOriginWithFewestRunningGoesFirstWithinAClass() {
        var s = TransferAdmission(limits: .init(perOrigin: nil, total: 3))
        for id in 1...3 { s.arrive(id, origin: a, priority: .far) }
        XCTAssertEqual(drain(&s), [.start(1), .start(2), .start(3)])
        for id in 4...5 { s.arrive(id, origin: a, priority: .far) }
        s.arrive(6, origin: b, priority: .far)
        s.leave(1)
        XCTAssertEqual(drain(&s), [.start(6)], "b has none running: one slow origin does not keep it waiting")
        s.leave(2)
        XCTAssertEqual(drain(&s), [.start(4)])
    }

    func testAWaitingReadTakesThePlaceOfTheLowestClassWhenAllAreTaken() {
        var s = TransferAdmission(limits: .init(perOrigin: nil, total: 3))
        s.arrive(1, origin: a, priority: .near)
        s.arrive(2, origin: a, priority: .far)
        s.arrive(3, origin: a, priority: .preload)
        XCTAssertEqual(drain(&s), [.start(1), .start(2), .start(3)])
        s.arrive(4, origin: a, priority: .far)
        XCTAssertEqual(drain(&s, preemptible: { _ in true }), [], "read-ahead waits its turn")
        s.arrive(5, origin: a, priority: .waiting)
        XCTAssertEqual(drain(&s, preemptible: { _ in true }), [.preempt(victim: 3, for: 5)], "warm-up first")
        s.arrive(6, origin: a, priority: .waiting)
        XCTAssertEqual(drain(&s, preemptible: { $0 != 2 }), [], "near read-ahead is never taken; far only if it can resume")
        s.leave(1)
        XCTAssertEqual(drain(&s), [.start(6)])
        s.leave(6)
        XCTAssertEqual(drain(&s), [.start(4)], "the far one queued before the preempted warm-up")
        s.leave(4)
        XCTAssertEqual(drain(&s), [.start(3)], "the preempted warm-up queued again")
    }

    func testTheNodeClientNeverPreempts() {
        var s = TransferAdmission(limits: .init(perOrigin: 1, total: nil))
        s.arrive(1, origin: a, priority: .preload)
        XCTAssertEqual(drain(&s), [.start(1)])
        s.arrive(2, origin: a, priority: .waiting)
        XCTAssertEqual(drain(&s, preemptible: { _ in true }), [], "a per-node cap is not a total one")
    }

    func testAWithdrawnOrFinishedTransferFreesItsPlaceOnce() {
        var s = TransferAdmission(limits: .init(perOrigin: 1, total: nil))
        s.arrive(1, origin: a, priority: .far)
        s.arrive(2, origin: a, priority: .far)
        s.arrive(3, origin: a, priority: .far)
        XCTAssertEqual(drain(&s), [.start(1)])
        XCTAssertTrue(s.withdraw(2))
        XCTAssertFalse(s.withdraw(2))
        XCTAssertFalse(s.withdraw(1), "running, not queued")
        s.leave(1)
        s.leave(1)   // late news
        s.leave(99)
        XCTAssertEqual(drain(&s), [.start(3)])
        XCTAssertEqual(s.counts.running, 1)
        XCTAssertEqual(s.counts.queued, 0)
    }

    func testTheLimitsOfEachClient() {
        let c = FetcherConfiguration(clock: .realTime, maxConnections: 6, maxTotalConnections: 16)
        XCTAssertEqual(TransferAdmission.Limits.curl(c), .init(perOrigin: nil, total: 16),
                       "libcurl keeps the per-host cap itself, multiplexing HTTP/2 within it")
        XCTAssertEqual(TransferAdmission.Limits.nodes(c), .init(perOrigin: 6, total: nil))
    }
}
