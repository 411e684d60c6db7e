@testable import CacheCore
import Foundation
import XCTest

/// The one scheduler of the daemon's timers, on a manual clock: what runs when, in what order,
/// and what a cancel keeps from running. No sleeps: `advance(by:)` runs what came due.
final class SchedulerTests: XCTestCase {
    private let fired = LockedValue<[String]>([])

    private func note(_ name: String) -> @Sendable () -> Void {
        { [fired] in fired.withLock { $0.append(name) } }
    }

    private var log: [String] { fired.withLock { $0 } }

    func testATimerRunsAtItsDeadlineAndNotBefore() {
        let s = Scheduler.manual()
        s.after(.seconds(1.0), note("a"))
        s.advance(by: .seconds(0.999))
        XCTAssertEqual(log, [])
        s.advance(by: .seconds(0.001))
        XCTAssertEqual(log, ["a"])
        s.advance(by: .seconds(10))
        XCTAssertEqual(log, ["a"], "once")
        XCTAssertEqual(s.pending, 0)
    }

    /// Deadlines first; at one deadline, the order they were made.
    func testTimersRunInDeadlineOrderThenInTheOrderTheyWereMade() {
        let s = Scheduler.manual()
        s.after(.seconds(3), note("c"))
        s.after(.seconds(1), note("a1"))
        s.after(.seconds(2), note("b"))
        s.after(.seconds(1), note("a2"))
        s.after(.zero, note("now"))
        s.advance(by: .seconds(5))
        XCTAssertEqual(log, ["now", "a1", "a2", "b", "c"])
    }

    /// The clock reads each timer's own deadline while it runs, so an action that schedules
    /// another counts from when it ran, not from the end of the advance.
    func testAnActionRunsWithTheClockAtItsDeadline() {
        let s = Scheduler.manual(at: at(100))
        let seen = LockedValue<[MonotonicInstant]>([])
        s.after(.seconds(2)) {
            seen.withLock { $0.append(s.now) }
            s.after(.seconds(1)) { seen.withLock { $0.append(s.now) } }
        }
        s.advance(by: .seconds(10))
        XCTAssertEqual(seen.withLock { $0 }, [at(102), at(103)])
        XCTAssertEqual(s.now, at(110))
    }

    /// A repeating timer (the sweeper's 4 Hz) runs once per period passed, and a cancel stops it.
    func testARepeatingTimerRunsOncePerPeriodUntilCancelled() {
        let s = Scheduler.manual()
        let t = s.every(.seconds(0.25), note("tick"))
        s.advance(by: .seconds(0.2))
        XCTAssertEqual(log.count, 0)
        s.advance(by: .seconds(0.8))
        XCTAssertEqual(log.count, 4, "0.25, 0.5, 0.75, 1.0")
        t.cancel()
        s.advance(by: .seconds(5))
        XCTAssertEqual(log.count, 4)
        XCTAssertEqual(s.pending, 0)
    }

    func testACancelledTimerNeverRunsAndTheOthersStillDo() {
        let s = Scheduler.manual()
        s.after(.seconds(1), note("a"))
        let b = s.after(.seconds(1), note("b"))
        s.after(.seconds(2), note("c"))
        b.cancel()
        XCTAssertEqual(s.pending, 2)
        s.advance(by: .seconds(3))
        XCTAssertEqual(log, ["a", "c"])
    }

    /// A repeating timer cancelled by its own action (a sweeper stopped from its tick) runs no more.
    func testARepeatingTimerCancelledFromItsOwnActionStops() {
        let s = Scheduler.manual()
        let timer = LockedValue<Scheduler.Timer?>(nil)
        let count = LockedValue(0)
        timer.withLock {
            $0 = s.every(.seconds(1)) {
                let n = count.withLock { c in c += 1; return c }
                if n == 2 { timer.withLock { $0 }?.cancel() }
            }
        }
        s.advance(by: .seconds(10))
        XCTAssertEqual(count.withLock { $0 }, 2)
    }

    /// The heap alone, as a table: deadlines in, what `popDue` hands out at each time.
    func testTheDeadlineHeapHandsOutWhatIsDueInOrder() {
        var heap = DeadlineHeap()
        let deadlines: [Double] = [5, 1, 4, 1, 3, 9, 2, 6]
        for (i, d) in deadlines.enumerated() {
            heap.insert(.init(deadline: at(d), id: UInt64(i), interval: nil, action: {}))
        }
        heap.cancel(4)   // the 3
        let cases: [(now: Double, ids: [UInt64])] = [
            (0.5, []),
            (1, [1, 3]),
            (4, [6, 2]),
            (8.9, [0, 7]),
            (100, [5]),
        ]
        for c in cases {
            var got: [UInt64] = []
            while let item = heap.popDue(by: at(c.now), catchUp: true) { got.append(item.id) }
            XCTAssertEqual(got, c.ids, "at \(c.now)")
        }
        XCTAssertEqual(heap.count, 0)
        XCTAssertNil(heap.nextDeadline)
    }

    /// A thread that fell behind a repeating timer (a long stop of the process) skips the periods
    /// it missed, as a GCD timer did, instead of running them all at once.
    func testARepeatingTimerThatFellBehindSkipsWhatItMissedWhenCatchingUp() {
        var heap = DeadlineHeap()
        heap.insert(.init(deadline: at(1), id: 1, interval: .seconds(1), action: {}))
        XCTAssertEqual(heap.popDue(by: at(10.5), catchUp: true)?.id, 1)
        XCTAssertNil(heap.popDue(by: at(10.5), catchUp: true), "the periods missed are not run")
        XCTAssertEqual(heap.nextDeadline, at(11))
    }

    /// The scheduler's own thread runs a timer (waited for by its action's signal, not by time),
    /// and ends once it has none.
    func testItsThreadRunsATimerAndEndsWithNoneLeft() {
        let s = Scheduler(name: "test-timers", idleTime: .zero, clock: EngineClock.realTime.readMonotonic)
        let ran = DispatchSemaphore(value: 0)
        s.after(.zero) { ran.signal() }
        XCTAssertEqual(ran.wait(timeout: .now() + 30), .success)
        s.after(.zero) { ran.signal() }   // after its thread may have ended: a new one starts
        XCTAssertEqual(ran.wait(timeout: .now() + 30), .success)
    }

    /// A timer made while the thread sleeps for a later one wakes it: the earlier one is not
    /// held up by the later one's deadline.
    func testAnEarlierTimerWakesTheThreadSleepingForALaterOne() {
        let s = Scheduler(name: "test-timers", clock: EngineClock.realTime.readMonotonic)
        let late = s.after(.seconds(3600)) {}
        let ran = DispatchSemaphore(value: 0)
        s.after(.zero) { ran.signal() }
        XCTAssertEqual(ran.wait(timeout: .now() + 30), .success, "waited for the hour-long timer")
        late.cancel()
    }
}

/// `seconds` after the manual clock's zero.
private func at(_ seconds: Double) -> MonotonicInstant { MonotonicInstant(nanoseconds: UInt64(seconds * 1e9)) }
