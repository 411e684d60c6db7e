import CacheCore
@testable import Fetcher
import XCTest

/// The scheduler as a table: which transfers yield, to whom, and when they go on. Time is passed
/// in (nanoseconds), never read.
final class TransferSchedulerTests: XCTestCase {
    let ms: UInt64 = 1_000_000
    let a = "http://a:80", b = "http://b:80"

    private func scheduler() -> TransferScheduler { TransferScheduler(patience: .nanoseconds(100 * ms)) }

    func testReadAheadRunsWhileTheWaitingReadIsNotBehind() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: .at(0))
        s.add(2, origin: a, priority: .far, owner: 7, now: .at(0))
        s.add(3, origin: a, priority: .far, owner: 8, now: .at(0))
        let d = s.decide(now: .at(50 * ms))
        XCTAssertEqual(d.held, [])
        XCTAssertEqual(d.nextCheck, .at(100 * ms), "wakes up when the read becomes behind")
    }

    func testEveryLowerClassOfTheOriginYieldsToAReadThatIsBehind() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: .at(0))
        s.add(2, origin: a, priority: .far, owner: 7, now: .at(0))
        s.add(3, origin: a, priority: .near, owner: 8, now: .at(0))
        s.add(4, origin: a, priority: .preload, owner: nil, now: .at(0))
        s.add(5, origin: b, priority: .far, owner: 9, now: .at(0))
        s.add(6, origin: a, priority: .waiting, owner: 8, now: .at(90 * ms))
        let d = s.decide(now: .at(100 * ms))
        XCTAssertEqual(d.held, [2, 3, 4], "another origin's transfers and every waiting one run")
        XCTAssertEqual(d.nextCheck, .at(190 * ms))
    }

    func testAReadersOwnNearStreamsDoNotYieldToItsOwnRead() {
        // A copy's parallel streams fill a link that caps each connection: holding them for its
        // own late read would only slow it down.
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: .at(0))
        s.add(2, origin: a, priority: .near, owner: 7, now: .at(0))
        s.add(3, origin: a, priority: .far, owner: 7, now: .at(0))
        s.add(4, origin: a, priority: .near, owner: 8, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(200 * ms)).held, [3, 4])
        // Once another reader is behind too, nobody's read-ahead runs.
        s.add(5, origin: a, priority: .waiting, owner: 8, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(200 * ms)).held, [2, 3, 4])
    }

    func testHeldTransfersGoOnOnceTheReadIsServed() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: .at(0))
        s.add(2, origin: a, priority: .far, owner: 8, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(150 * ms)).held, [2])
        s.setPriority(1, .far, waited: .nanoseconds(0), now: .at(160 * ms))   // its read was answered: read-ahead now
        XCTAssertEqual(s.decide(now: .at(160 * ms)), .init(held: [], nextCheck: nil))
    }

    func testANewWaitingReadCountsFromWhenItBeganToWait() {
        var s = scheduler()
        s.add(2, origin: a, priority: .far, owner: 8, now: .at(0))
        s.add(1, origin: a, priority: .far, owner: 7, now: .at(0))
        s.setPriority(1, .waiting, waited: .nanoseconds(80 * ms), now: .at(1000 * ms))   // the engine says: it waits since 920
        XCTAssertEqual(s.decide(now: .at(1000 * ms)).held, [])
        XCTAssertEqual(s.decide(now: .at(1020 * ms)).held, [2])
        // The oldest read was answered; the next one has waited only 10 ms.
        s.setPriority(1, .waiting, waited: .nanoseconds(10 * ms), now: .at(1030 * ms))
        XCTAssertEqual(s.decide(now: .at(1030 * ms)).held, [])
    }

    func testPreloadYieldsToAnyOtherTransferOfItsOrigin() {
        var s = scheduler()
        s.add(1, origin: a, priority: .preload, owner: nil, now: .at(0))
        s.add(2, origin: b, priority: .preload, owner: nil, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(0)).held, [], "alone, a warm-up takes the link")
        s.add(3, origin: a, priority: .far, owner: 7, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(0)).held, [1])
        s.remove(3)
        XCTAssertEqual(s.decide(now: .at(0)).held, [])
    }

    func testAFinishedTransferHoldsNothing() {
        var s = scheduler()
        s.add(1, origin: a, priority: .waiting, owner: 7, now: .at(0))
        s.add(2, origin: a, priority: .far, owner: 8, now: .at(0))
        s.remove(1)
        XCTAssertEqual(s.decide(now: .at(1000 * ms)), .init(held: [], nextCheck: nil))
        s.setPriority(1, .waiting, waited: .nanoseconds(0), now: .at(0))   // late news of a finished transfer
        XCTAssertEqual(s.decide(now: .at(1000 * ms)).held, [])
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
        let t = Throttle(bytesPerSecond: 1, now: .at(0))   // tokens for the first bytes only
        XCTAssertTrue(t.admit(64 << 10, transfer: 1, priority: .far, now: .at(0)), "a token was left")
        XCTAssertFalse(t.admit(1, transfer: 1, priority: .far, now: .at(0)), "in debt now")
        XCTAssertFalse(t.admit(1, transfer: 2, priority: .waiting, now: .at(0)))
        XCTAssertFalse(t.admit(1, transfer: 3, priority: .near, now: .at(0)))
        // Whatever the bucket holds, read-ahead waits while the waiting transfer does.
        t.forget(99)
        XCTAssertEqual(t.due(now: .at(.max / 2)).sorted(), [2], "the highest class first")
        XCTAssertEqual(t.due(now: .at(.max / 2)).sorted(), [3])
        XCTAssertEqual(t.due(now: .at(.max / 2)).sorted(), [1])
        XCTAssertEqual(t.due(now: .at(.max / 2)), [])
    }

    func testALowerClassWaitsWhileAHigherOneIsPaused() {
        let t = Throttle(bytesPerSecond: 1 << 30, now: .at(0))
        XCTAssertTrue(t.admit(1, transfer: 1, priority: .far, now: .at(0)))
        // Transfer 2 paused for tokens (forced: a debt).
        _ = t.admit(Int.max / 4, transfer: 2, priority: .waiting, now: .at(0))
        XCTAssertFalse(t.admit(1, transfer: 2, priority: .waiting, now: .at(0)))
        XCTAssertFalse(t.admit(1, transfer: 1, priority: .far, now: .at(0)), "read-ahead waits behind it")
        t.forget(2)   // it finished
        XCTAssertNotNil(t.wait(now: .at(0)), "transfer 1 still waits for a token")
    }
}

/// `--bwlimit` with reads and read-ahead streams sharing it, on a simulated loop: every turn the
/// loop lets go of the transfers that are due, then libcurl offers each transfer that is not
/// paused one 16 KiB chunk, in its own order (as `curl_multi_perform` does).
final class ThrottleSharingTests: XCTestCase {

    /// A source: how many chunks transfer `id`'s origin has sent by `now` (what libcurl can offer,
    /// less what passed). A paused transfer's chunk is offered again, as libcurl does.
    typealias Arrived = (_ id: Int, _ now: UInt64) -> Int

    /// The loop's side: which transfers the throttle paused, the classes it last told it, the time.
    final class Loop {
        let throttle: Throttle
        var paused = Set<Int>()
        var classes: [Int: FetchPriority] = [:]
        /// Whose each transfer is (a reader's id); one reader unless told.
        var owners: [Int: Int] = [:]
        var now: UInt64 = 0
        init(_ throttle: Throttle) { self.throttle = throttle }

        /// Bytes each transfer got over `seconds` more simulated seconds, one turn per millisecond.
        func run(_ classes: [Int: FetchPriority], seconds: UInt64, arrived: Arrived) -> [Int: Int] {
            for (id, c) in classes where self.classes[id] != c { throttle.reclass(id, c) }   // as the inbox does
            self.classes = classes
            var got: [Int: Int] = [:]
            let end = now + seconds * 1000 * ms
            while now < end {
                for id in throttle.due(now: .at(now)) { paused.remove(id) }
                // The order libcurl offers in varies; the waiting transfer is neither first nor last.
                let order = classes.keys.sorted().rotated(by: Int(now / ms) % classes.count)
                for id in order where !paused.contains(id) && got[id, default: 0] / chunk < arrived(id, now) {
                    if throttle.admit(chunk, transfer: id, priority: classes[id]!, owner: owners[id] ?? 1, now: .at(now)) {
                        got[id, default: 0] += chunk
                    } else {
                        paused.insert(id)
                    }
                }
                now += ms
            }
            return got
        }
    }

    func run(_ t: Throttle, classes: [Int: FetchPriority], seconds: UInt64, arrived: Arrived) -> [Int: Int] {
        Loop(t).run(classes, seconds: seconds, arrived: arrived)
    }

    func testAWaitingTransferTakesTheWholeBudgetFromSeventeenReadAheadStreams() {
        let t = Throttle(bytesPerSecond: 1 << 20, now: .at(0))
        var classes: [Int: FetchPriority] = [0: .waiting]
        for id in 1...17 { classes[id] = .far }
        let got = run(t, classes: classes, seconds: 4) { _, _ in .max }
        let total = got.values.reduce(0, +)
        XCTAssertGreaterThanOrEqual(Double(got[0] ?? 0), 0.95 * Double(total),
                                    "the read's bytes come at the limit's rate, not at one share in eighteen")
        let bound: Double = 4 * 1048576 + 2 * 52429 + 16384   // four seconds at the rate, a burst and a chunk
        XCTAssertLessThanOrEqual(Double(total), bound, "the limit holds")
    }

    func testReadAheadTakesTheTokensAWaitingTransferSlowedByItsOriginLeaves() {
        let t = Throttle(bytesPerSecond: 1 << 20, now: .at(0))
        let classes: [Int: FetchPriority] = [0: .waiting, 1: .near, 2: .far]
        // The waiting transfer's origin sends a chunk every 50 ms (320 KiB/s).
        let got = run(t, classes: classes, seconds: 4) { id, now in id == 0 ? Int(now / ms) / 50 + 1 : .max }
        XCTAssertEqual(got[0], 80 * chunk, "every chunk its origin sent passed")
        let total = got.values.reduce(0, +)
        let floor: Double = 0.9 * 4 * 1048576
        XCTAssertGreaterThanOrEqual(Double(total), floor, "no token is left unused")
        XCTAssertGreaterThan(got[1] ?? 0, got[2] ?? 0, "near read-ahead before far")
    }

    func testReadAheadGetsTheBudgetBackSoonAfterTheReadIsAnswered() {
        let t = Throttle(bytesPerSecond: 1 << 20, now: .at(0))
        let classes: [Int: FetchPriority] = [0: .waiting, 1: .far]
        // The read is answered after one second: its transfer has nothing more to offer.
        let got = run(t, classes: classes, seconds: 3) { id, now in id == 0 && now >= 1000 * ms ? 0 : .max }
        let floor: Double = 0.95 * 2 * 1048576
        XCTAssertGreaterThanOrEqual(Double(got[1] ?? 0), floor,
                                    "the last two seconds are read-ahead's")
    }

    func testReadAheadArrivesNearestFirstAsOneStreamWouldBringIt() {
        let t = Throttle(bytesPerSecond: 1 << 20, now: .at(0))
        var classes: [Int: FetchPriority] = [:]
        for id in 1...18 { classes[id] = .far }   // a player's 18 streams of 1 MiB, in offset order
        let mib = (1 << 20) / chunk
        let loop = Loop(t)
        let first = loop.run(classes, seconds: 1) { _, _ in mib }
        XCTAssertGreaterThanOrEqual(first[1] ?? 0, (1 << 20) - 2 * chunk, "the first MiB in the first second")
        let second = loop.run(classes, seconds: 1) { id, _ in mib - (first[id] ?? 0) / chunk }
        XCTAssertGreaterThanOrEqual((first[2] ?? 0) + (second[2] ?? 0), (1 << 20) - 2 * chunk, "then the second")
        let others = (4...18).map { (first[$0] ?? 0) + (second[$0] ?? 0) }.reduce(0, +)
        XCTAssertLessThanOrEqual(others, 2 * chunk, "the far ones wait their turn")
    }

    func testTwoPlayersUnderOneLimitEachGetTheirNearestBytesAtHalfTheRate() {
        let t = Throttle(bytesPerSecond: 1 << 20, now: .at(0))
        let loop = Loop(t)
        var classes: [Int: FetchPriority] = [:]
        for id in 1...10 {   // player A's streams 1-5, player B's 6-10, each in offset order
            classes[id] = .far
            loop.owners[id] = id <= 5 ? 100 : 200
        }
        let got = loop.run(classes, seconds: 1) { _, _ in .max }
        let total = Double(got.values.reduce(0, +))
        for nearest in [1, 6] {
            XCTAssertGreaterThanOrEqual(Double(got[nearest] ?? 0), 0.45 * total, "stream \(nearest): half the rate")
        }
        XCTAssertLessThanOrEqual((got[2] ?? 0) + (got[7] ?? 0), 2 * chunk, "the further streams wait their turn")
    }

    func testAReadAheadStreamPausedForATokenGetsTheNextOnesOnceAReadWaitsOnIt() {
        let t = Throttle(bytesPerSecond: 1 << 20, now: .at(0))
        XCTAssertTrue(t.admit(64 << 10, transfer: 9, priority: .near, now: .at(0)), "the bucket goes into debt")
        XCTAssertFalse(t.admit(chunk, transfer: 1, priority: .far, now: .at(0)))
        XCTAssertFalse(t.admit(chunk, transfer: 2, priority: .near, now: .at(0)))
        t.reclass(1, .waiting)   // a read now waits on transfer 1's bytes
        t.reclass(3, .waiting)   // one that is not paused is not made so
        XCTAssertEqual(t.due(now: .at(1_000 * ms)), [1], "the read's transfer first, not the near stream")
        XCTAssertEqual(t.due(now: .at(1_000 * ms)), [2])
        XCTAssertEqual(t.due(now: .at(1_000 * ms)), [])
    }

    func testAReadOnAStreamPausedAsFarGetsTheBudgetFromFiveNearStreams() {
        let t = Throttle(bytesPerSecond: 1 << 20, now: .at(0))
        // A far stream and five near ones, paused for tokens in turn; then a read waits on the
        // far one (the player caught up with it).
        let loop = Loop(t)
        var classes: [Int: FetchPriority] = [1: .far]
        for id in 2...6 { classes[id] = .near }
        _ = loop.run(classes, seconds: 1) { _, _ in .max }
        classes[1] = .waiting
        let got = loop.run(classes, seconds: 2) { _, _ in .max }
        let total = got.values.reduce(0, +)
        XCTAssertGreaterThanOrEqual(Double(got[1] ?? 0), 0.95 * Double(total))
    }
}

private let ms: UInt64 = 1_000_000
private let chunk = 16 << 10

private extension Array {
    func rotated(by n: Int) -> [Element] {
        guard !isEmpty else { return self }
        let cut = n % count
        return Array(self[cut...]) + Array(self[..<cut])
    }
}
