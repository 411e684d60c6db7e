@testable import CacheCore
import Foundation
import TestSupport
import XCTest

/// `ConditionLock`: the value is reached by one thread at a time, and a waiter goes on exactly
/// when another thread made the change it waits for. No sleeps: a waiter tells the test when it
/// found nothing (a semaphore signalled from its check, which runs under the lock; a waiter that
/// found nothing waits before the lock is let go of, so a change made after that check wakes it).
final class ConditionLockTests: XCTestCase {
    private struct Gate {
        var open = false
        var tokens = 0
        /// The waiters whose body ran and found nothing to go on with: waiting, or about to
        /// (under the lock still), so a change made from now on wakes them. A set, so a
        /// spurious wake-up does not count twice.
        var waiting: Set<Int> = []
        var taken: [Int] = []
    }

    /// Increments from many threads at once all count: `withLock` lets one thread at a time in.
    func testWithLockLetsOneThreadInAtATime() {
        let counter = ConditionLock(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.withLock { $0 += 1 } }
        }
        XCTAssertEqual(counter.withLock { $0 }, 80_000)
    }

    /// `waitFor` whose body has its result at once does not wait (no signal ever comes); nor does
    /// `wait(until:)` whose condition holds.
    func testWaitForReturnsAtOnceWhenTheBodyHasItsResult() {
        let lock = ConditionLock(Gate(open: true))
        let seen: Bool = lock.waitFor { $0.open ? true : nil }
        XCTAssertTrue(seen)
        lock.wait(until: { $0.open })
        XCTAssertEqual(lock.withLock { $0.waiting }, [])
    }

    /// A waiter that found the gate shut goes on once another thread opens it and signals.
    func testAWaiterGoesOnWhenAnotherThreadMakesTheChange() {
        let lock = ConditionLock(Gate())
        let done = DispatchSemaphore(value: 0), foundShut = DispatchSemaphore(value: 0)
        Thread {
            lock.waitFor { (g: inout Gate) -> Void? in
                if g.open { return () }
                if g.waiting.insert(0).inserted { foundShut.signal() }
                return nil
            }
            done.signal()
        }.start()
        XCTAssertEqual(foundShut.wait(timeout: .now() + 30), .success, "the waiter never found the gate shut")
        XCTAssertEqual(done.wait(timeout: .now()), .timedOut, "went on with the gate shut")
        lock.withLock { $0.open = true }
        lock.signal()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "the waiter was not woken by the change")
    }

    /// `broadcast` wakes every waiter.
    func testBroadcastReleasesEveryWaiter() {
        let lock = ConditionLock(Gate())
        let done = DispatchGroup(), waiting = DispatchSemaphore(value: 0)
        for i in 0..<6 {
            done.enter()
            Thread {
                lock.waitFor { (g: inout Gate) -> Void? in
                    if g.open { return () }
                    if g.waiting.insert(i).inserted { waiting.signal() }
                    return nil
                }
                done.leave()
            }.start()
        }
        for i in 0..<6 {
            XCTAssertEqual(waiting.wait(timeout: .now() + 30), .success, "waiter \(i) of 6 never found nothing to go on with")
        }
        lock.withLock { $0.open = true }
        lock.broadcast()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "a waiter slept through the broadcast")
    }

    /// Tokens handed out one at a time with `signal` each go to exactly one waiter: a waiter
    /// takes what it waited for in the same hold of the lock as its check.
    func testEachSignalledTokenIsTakenByOneWaiter() {
        let lock = ConditionLock(Gate())
        let done = DispatchGroup(), waiting = DispatchSemaphore(value: 0), took = DispatchSemaphore(value: 0)
        for i in 0..<6 {
            done.enter()
            Thread {
                lock.waitFor { (g: inout Gate) -> Void? in
                    guard g.tokens > 0 else {
                        if g.waiting.insert(i).inserted { waiting.signal() }
                        return nil
                    }
                    g.tokens -= 1
                    g.taken.append(i)
                    took.signal()
                    return ()
                }
                done.leave()
            }.start()
        }
        for i in 0..<6 {
            XCTAssertEqual(waiting.wait(timeout: .now() + 30), .success, "waiter \(i) of 6 never found nothing to go on with")
        }
        for n in 1...6 {
            lock.withLock { $0.tokens += 1 }
            lock.signal()
            XCTAssertEqual(took.wait(timeout: .now() + 30), .success, "token \(n) was not taken")
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        let (tokens, taken) = lock.withLock { ($0.tokens, $0.taken) }
        XCTAssertEqual(tokens, 0)
        XCTAssertEqual(taken.sorted(), Array(0..<6), "a waiter took two tokens or none")
    }

    /// A timed wait ends when the change comes, and says so; without the change it ends at its
    /// timeout and says it did not come.
    func testATimedWaitEndsWithTheChangeOrAtItsTimeout() {
        let lock = ConditionLock(Gate())
        XCTAssertFalse(lock.wait(until: { $0.open }, timeout: 0.02), "nobody opened it")
        let result = LockedValue<Bool?>(nil), ended = DispatchSemaphore(value: 0)
        Thread {
            let opened = lock.wait(until: { $0.open }, timeout: 300)
            result.withLock { $0 = opened }
            ended.signal()
        }.start()
        lock.withLock { $0.open = true }
        lock.broadcast()
        XCTAssertEqual(ended.wait(timeout: .now() + 30), .success, "the timed wait never ended")
        XCTAssertEqual(result.withLock { $0 }, true)
    }
}
