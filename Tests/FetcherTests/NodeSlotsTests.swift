import CacheCore
@testable import Fetcher
import NIOConcurrencyHelpers
import XCTest

/// The tier node client follows the libcurl loop's policy: its slots start waiting requests in
/// class order (`TransferAdmission`), and read-ahead to a node yields to a read that is behind on
/// it (`TransferScheduler`). An injected clock and a captured re-check: no sockets, no sleeping.
final class NodeSlotsTests: XCTestCase {
    let ms: UInt64 = 1_000_000
    let node = "http://n:80", other = "http://m:80"

    /// The slots, the time they see, what each member was told, and the re-checks they asked for.
    final class Harness: Sendable {
        let now = NIOLockedValueBox<UInt64>(0)
        let told = NIOLockedValueBox<[String]>([])
        let rechecks = NIOLockedValueBox<[(UInt64, @Sendable () -> Void)]>([])
        let slots: NodeSlots

        init(perNode: Int, patience: UInt64) {
            slots = NodeSlots(limits: .init(perOrigin: perNode, total: nil), patience: patience,
                              clock: { [now] in now.withLockedValue { $0 } },
                              schedule: { [rechecks] delay, work in rechecks.withLockedValue { $0.append((delay, work)) } })
        }

        func start(_ id: Int, _ node: String, _ p: FetchPriority, owner: Int? = nil) -> Bool {
            slots.acquire(id: id, node: node, priority: p, owner: owner,
                          wake: { [told] in told.withLockedValue { $0.append("granted \(id)") } },
                          holdChanged: { [told] in told.withLockedValue { $0.append("hold \(id)") } })
        }

        func takeTold() -> [String] { told.withLockedValue { t in defer { t = [] }; return t } }
    }

    func testAWaitingReadToANodeGoesBeforeReadAheadQueuedBeforeIt() {
        let h = Harness(perNode: 1, patience: 100 * ms)
        XCTAssertTrue(h.start(1, node, .far, owner: 7))
        XCTAssertFalse(h.start(2, node, .far, owner: 7))
        XCTAssertFalse(h.start(3, node, .waiting, owner: 8))
        XCTAssertTrue(h.start(4, other, .preload), "another node's place is its own")
        h.slots.release(id: 1)
        XCTAssertEqual(h.takeTold(), ["granted 3"])
        h.slots.release(id: 3)
        XCTAssertEqual(h.takeTold(), ["granted 2"])
    }

    func testReadAheadToANodeYieldsOnceAReadOnItIsBehindAndGoesOnWhenItIsAnswered() {
        let h = Harness(perNode: 8, patience: 100 * ms)
        XCTAssertTrue(h.start(1, node, .far, owner: 7))
        XCTAssertTrue(h.start(2, other, .far, owner: 7))
        XCTAssertTrue(h.start(3, node, .waiting, owner: 8))
        XCTAssertEqual(h.takeTold(), [], "not behind yet: read-ahead runs")
        XCTAssertEqual(h.rechecks.withLockedValue { $0.map(\.0) }, [100 * ms], "a re-check when the read becomes behind")
        h.now.withLockedValue { $0 = 100 * ms }
        h.rechecks.withLockedValue { $0.removeFirst() }.1()
        XCTAssertEqual(h.takeTold(), ["hold 1"], "the same node's read-ahead yields; the other node's does not")
        XCTAssertTrue(h.slots.isHeld(id: 1))
        XCTAssertFalse(h.slots.isHeld(id: 2))
        h.slots.setPriority(id: 3, .far, waitedSeconds: 0)   // the read was answered
        XCTAssertEqual(h.takeTold(), ["hold 1"])
        XCTAssertFalse(h.slots.isHeld(id: 1), "let go")
    }

    func testWarmUpToANodeYieldsToAnyHigherClassOnItAtOnce() {
        let h = Harness(perNode: 8, patience: 100 * ms)
        XCTAssertTrue(h.start(1, node, .preload))
        XCTAssertTrue(h.start(2, node, .far, owner: 7))
        XCTAssertEqual(h.takeTold(), ["hold 1"])
        XCTAssertTrue(h.slots.isHeld(id: 1))
        h.slots.release(id: 2)
        XCTAssertEqual(h.takeTold(), ["hold 1"])
        XCTAssertFalse(h.slots.isHeld(id: 1))
    }

    func testAWithdrawnRequestHoldsNothingAndCountsNoMore() {
        let h = Harness(perNode: 1, patience: 100 * ms)
        XCTAssertTrue(h.start(1, node, .preload))
        XCTAssertFalse(h.start(2, node, .far))
        XCTAssertEqual(h.takeTold(), ["hold 1"], "a queued read-ahead counts, as a transfer waiting in libcurl's queue does")
        XCTAssertTrue(h.slots.withdraw(id: 2))
        XCTAssertEqual(h.takeTold(), ["hold 1"])
        XCTAssertFalse(h.slots.isHeld(id: 1))
        h.slots.release(id: 1)
        XCTAssertEqual(h.slots.counts.active, 0)
        XCTAssertEqual(h.slots.counts.waiting, 0)
    }
}
