import CacheCore
@testable import Fetcher
import XCTest

/// The scheduler as a table: which transfers yield, to whom, and when they go on. Time is passed
/// in (nanoseconds), never read.
final class TransferSchedulerTests: XCTestCase {
    let ms: UInt64 = 1_000_000
    let a = "http://a:80", b = "http://b:80"

    private func scheduler() -> TransferScheduler { TransferScheduler(patience: 100 * ms) }

    func testReadAheadRunsWhileTheWaitingReadIsNotBehind() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: 0)
        s.add(2, origin: a, priority: .far, owner: 7, now: 0)
        s.add(3, origin: a, priority: .far, owner: 8, now: 0)
        let d = s.decide(now: 50 * ms)
        XCTAssertEqual(d.held, [])
        XCTAssertEqual(d.nextCheck, 100 * ms, "wakes up when the read becomes behind")
    }

    func testEveryLowerClassOfTheOriginYieldsToAReadThatIsBehind() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: 0)
        s.add(2, origin: a, priority: .far, owner: 7, now: 0)
        s.add(3, origin: a, priority: .near, owner: 8, now: 0)
        s.add(4, origin: a, priority: .preload, owner: nil, now: 0)
        s.add(5, origin: b, priority: .far, owner: 9, now: 0)
        s.add(6, origin: a, priority: .waiting, owner: 8, now: 90 * ms)
        let d = s.decide(now: 100 * ms)
        XCTAssertEqual(d.held, [2, 3, 4], "another origin's transfers and every waiting one run")
        XCTAssertEqual(d.nextCheck, 190 * ms)
    }

    func testAReadersOwnNearStreamsDoNotYieldToItsOwnRead() {
        // A copy's parallel streams fill a link that caps each connection: holding them for its
        // own late read would only slow it down.
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: 0)
        s.add(2, origin: a, priority: .near, owner: 7, now: 0)
        s.add(3, origin: a, priority: .far, owner: 7, now: 0)
        s.add(4, origin: a, priority: .near, owner: 8, now: 0)
        XCTAssertEqual(s.decide(now: 200 * ms).held, [3, 4])
        // Once another reader is behind too, nobody's read-ahead runs.
        s.add(5, origin: a, priority: .waiting, owner: 8, now: 0)
        XCTAssertEqual(s.decide(now: 200 * ms).held, [2, 3, 4])
    }

    func testHeldTransfersGoOnOnceTheReadIsServed() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: 0)
        s.add(2, origin: a, priority: .far, owner: 8, now: 0)
        XCTAssertEqual(s.decide(now: 150 * ms).held, [2])
        s.setPriority(1, .far, waited: 0, now: 160 * ms)   // its read was answered: read-ahead now
        XCTAssertEqual(s.decide(now: 160 * ms), .init(held: [], nextCheck: nil))
    }

    func testANewWaitingReadCountsFromWhenItBeganToWait() {
        var s = scheduler()
        s.add(2, origin: a, priority: .far, owner: 8, now: 0)
        s.add(1, origin: a, priority: .far, owner: 7, now: 0)
        s.setPriority(1, .waiting, waited: 80 * ms, now: 1000 * ms)   // the engine says: it waits since 920
        XCTAssertEqual(s.decide(now: 1000 * ms).held, [])
        XCTAssertEqual(s.decide(now: 1020 * ms).held, [2])
        // The oldest read was answered; the next one has waited only 10 ms.
        s.setPriority(1, .waiting, waited: 10 * ms, now: 1030 * ms)
        XCTAssertEqual(s.decide(now: 1030 * ms).held, [])
    }

    func testPreloadYieldsToAnyOtherTransferOfItsOrigin() {
        var s = scheduler()
        s.add(1, origin: a, priority: .preload, owner: nil, now: 0)
        s.add(2, origin: b, priority: .preload, owner: nil, now: 0)
        XCTAssertEqual(s.decide(now: 0).held, [], "alone, a warm-up takes the link")
        s.add(3, origin: a, priority: .far, owner: 7, now: 0)
        XCTAssertEqual(s.decide(now: 0).held, [1])
        s.remove(3)
        XCTAssertEqual(s.decide(now: 0).held, [])
    }

    func testAFinishedTransferHoldsNothing() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: 0)
        s.add(2, origin: a, priority: .far, owner: 8, now: 0)
        s.remove(1)
        XCTAssertEqual(s.decide(now: 1000 * ms), .init(held: [], nextCheck: nil))
        s.setPriority(1, .waiting, waited: 0, now: 0)   // late news of a finished transfer
        XCTAssertEqual(s.decide(now: 1000 * ms).held, [])
    }

    func testTheOriginIsSchemeHostAndPort() {
        XCTAssertEqual(TransferScheduler.origin(of: "http://User:pw@Example.COM:8080/a/b?c#d"), "http://example.com:8080")
        XCTAssertEqual(TransferScheduler.origin(of: "https://example.com/x"), "https://example.com")
        XCTAssertEqual(TransferScheduler.origin(of: "http://[::1]:9/x"), "http://[::1]:9")
        XCTAssertEqual(TransferScheduler.origin(of: "not a url"), "not a url")
    }
}

/// `--bwlimit` serves the classes in order.
final class ThrottlePriorityTests: XCTestCase {
    func testAWaitingTransferGetsTheTokensBeforeReadAhead() {
        let t = Throttle(bytesPerSecond: 1)   // tokens for the first bytes only
        XCTAssertTrue(t.admit(64 << 10, transfer: 1, priority: .far), "a token was left")
        XCTAssertFalse(t.admit(1, transfer: 1, priority: .far), "in debt now")
        XCTAssertFalse(t.admit(1, transfer: 2, priority: .waiting))
        XCTAssertFalse(t.admit(1, transfer: 3, priority: .near))
        // Whatever the bucket holds, read-ahead waits while the waiting transfer does.
        t.forget(99)
        XCTAssertEqual(t.due(now: .max / 2).sorted(), [2], "the highest class first")
        XCTAssertEqual(t.due(now: .max / 2).sorted(), [3])
        XCTAssertEqual(t.due(now: .max / 2).sorted(), [1])
        XCTAssertEqual(t.due(now: .max / 2), [])
    }

    func testALowerClassWaitsWhileAHigherOneIsPaused() {
        let t = Throttle(bytesPerSecond: 1 << 30)
        XCTAssertTrue(t.admit(1, transfer: 1, priority: .far))
        // Transfer 2 paused for tokens (forced: a debt).
        _ = t.admit(Int.max / 4, transfer: 2, priority: .waiting)
        XCTAssertFalse(t.admit(1, transfer: 2, priority: .waiting))
        XCTAssertFalse(t.admit(1, transfer: 1, priority: .far), "read-ahead waits behind it")
        t.forget(2)   // it finished
        XCTAssertNotNil(t.wait(now: 0), "transfer 1 still waits for a token")
    }
}
