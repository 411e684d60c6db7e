@testable import CacheCore
import Foundation
import XCTest

/// The pool's keyed serial lanes, which the writer lanes (`WriteQueue`) and the index writer's
/// work (`CacheIndex`) now are: order and exclusion per key, the lane's bound, keys that stay
/// within their lane, and the one wait the pool allows (a job waiting for another lane's job).
final class KeyedLaneTests: XCTestCase {
    /// Jobs running now, by key and in all, and the most seen at once.
    private final class Overlap: Sendable {
        private struct Counts {
            var byKey: [UInt64: Int] = [:]
            var all = 0
            var mostByKey = 0
            var mostAll = 0
            var order: [UInt64: [Int]] = [:]
        }
        private let counts = LockedValue(Counts())
        func begin(_ key: UInt64, _ seq: Int) {
            counts.withLock { c in
                c.byKey[key, default: 0] += 1
                c.all += 1
                c.mostByKey = max(c.mostByKey, c.byKey[key]!)
                c.mostAll = max(c.mostAll, c.all)
                c.order[key, default: []].append(seq)
            }
        }
        func end(_ key: UInt64) {
            counts.withLock { c in
                c.byKey[key]! -= 1
                c.all -= 1
            }
        }
        var mostByKey: Int { counts.withLock { $0.mostByKey } }
        var mostAll: Int { counts.withLock { $0.mostAll } }
        func order(_ key: UInt64) -> [Int] { counts.withLock { $0.order[key] ?? [] } }
    }

    /// A busy file does not keep its lane from another: a key's next job, queued behind the one
    /// running, goes after the lane's jobs that came before it, not straight onto the thread.
    func testAKeysNextJobWaitsBehindTheLanesJobsThatCameFirst() {
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let writer = pool.lane("writer", threads: 1)
        let gate = DispatchSemaphore(value: 0)
        let ran = LockedValue<[String]>([])
        let done = DispatchGroup()
        done.enter()
        pool.submit(key: 1, lane: writer) { gate.wait(); ran.withLock { $0.append("a1") }; done.leave() }
        done.enter()
        pool.submit(key: 1, lane: writer) { ran.withLock { $0.append("a2") }; done.leave() }   // behind a1, its key's
        done.enter()
        pool.submit(key: 2, lane: writer) { ran.withLock { $0.append("b1") }; done.leave() }   // the lane is full: queued
        gate.signal()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(ran.withLock { $0 }, ["a1", "b1", "a2"])
    }

    /// Many files' write jobs on a lane of two: each file's jobs run one at a time in the order
    /// submitted, and never more than two at once in all.
    func testEachKeysJobsRunInOrderOneAtATimeAndTheLaneWithinItsBound() {
        let pool = BlockingIOPool(name: "test-pool", threads: 4)
        let writer = pool.lane("writer", threads: 2)
        let overlap = Overlap()
        let done = DispatchGroup()
        for seq in 0..<200 {
            for key: UInt64 in [1, 2, 3, 4, 5] {
                done.enter()
                pool.submit(key: key, lane: writer) {
                    overlap.begin(key, seq)
                    for _ in 0..<100 { _ = pool.threadCount }   // a little work, under the pool's lock now and then
                    overlap.end(key)
                    done.leave()
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        for key: UInt64 in [1, 2, 3, 4, 5] { XCTAssertEqual(overlap.order(key), Array(0..<200), "key \(key)") }
        XCTAssertEqual(overlap.mostByKey, 1, "two jobs of one file ran at once")
        XCTAssertLessThanOrEqual(overlap.mostAll, 2, "the lane ran past its bound")
        pool.finish()
    }

    /// A file's later jobs wait beside the one running and run on its thread: no thread is
    /// started or woken for them (a stream of 16 KiB batches costs no wake-up each).
    func testAKeysLaterJobsStartNoThread() {
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let writer = pool.lane("writer", threads: 2)
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        done.enter()
        pool.submit(key: 9, lane: writer) { started.signal(); gate.wait(); done.leave() }
        XCTAssertEqual(started.wait(timeout: .now() + 30), .success)
        let threads = LockedValue<Set<UInt>>([])
        for _ in 0..<10 {
            done.enter()
            pool.submit(key: 9, lane: writer) { threads.withLock { _ = $0.insert(UInt(bitPattern: Int(bitPattern: pthread_self()))) }; done.leave() }
        }
        XCTAssertEqual(pool.threadCount, 1, "a thread was started for jobs that must wait for their key")
        XCTAssertEqual(pool.queued, 10)
        gate.signal()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(threads.withLock { $0.count }, 1, "the key's jobs ran on the thread that ran its first")
        pool.finish()
    }

    /// The same key in two lanes is two keys: a check keyed 7 never waits for file 7's writes.
    func testKeysOfDifferentLanesNeverMeet() {
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let writer = pool.lane("writer", threads: 1)
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let other = DispatchSemaphore(value: 0)
        pool.submit(key: 7) { started.signal(); gate.wait() }
        XCTAssertEqual(started.wait(timeout: .now() + 30), .success)
        pool.submit(key: 7, lane: writer) { other.signal() }
        XCTAssertEqual(other.wait(timeout: .now() + 30), .success, "the writer lane's key 7 waited for the jobs lane's")
        gate.signal()
        pool.finish()
    }

    /// The pool's one allowed wait: every thread of two lanes (the engine's jobs and the writer
    /// lanes) blocks until a job it submitted to the index lane ran, and all of them queued
    /// before the index lane runs anything (it is held until they all wait). The index lane's
    /// thread is reserved in the pool's bound, so its jobs run and everyone goes on. Submitted to
    /// the `jobs` lane instead (a lane whose threads are all waiting), the same jobs hang for
    /// ever: the deadlock that "no job waits for a job of its own lane" rules out.
    func testEveryThreadWaitingOnTheIndexLaneStillGetsItsCommit() {
        let pool = BlockingIOPool(name: "test-pool", threads: 2)
        let writer = pool.lane("writer", threads: 2)
        let index = pool.lane("index", threads: 1)
        pool.hold(index, true)
        let waiting = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        let commits = LockedValue(0)
        for (lane, key) in [(BlockingIOPool.jobs, nil), (BlockingIOPool.jobs, nil), (writer, UInt64(1)), (writer, UInt64(2))] {
            done.enter()
            pool.submit(key: key, lane: lane) {
                let committed = DispatchSemaphore(value: 0)
                pool.submit(lane: index) {
                    commits.withLock { $0 += 1 }
                    committed.signal()
                }
                waiting.signal()
                committed.wait()   // as a writer job waits for an eviction's commit
                done.leave()
            }
        }
        for i in 0..<4 { XCTAssertEqual(waiting.wait(timeout: .now() + 30), .success, "job \(i) never started") }
        XCTAssertEqual(pool.threadCount, 4, "every thread of the two lanes is waiting")
        XCTAssertEqual(pool.queued, 4, "the four commits wait on the held index lane")
        pool.hold(index, false)
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "the index lane found no thread")
        XCTAssertEqual(commits.withLock { $0 }, 4)
        XCTAssertEqual(pool.threadCount, 5, "the index lane's thread was one more, within the bound")
        pool.finish()
    }

    /// Held (a test replaying a writer that is behind): no job of the lane starts, not even the
    /// next of a key whose job was running when the hold began; released, they run in order.
    func testAHeldLaneStartsNothingUntilReleasedThenRunsInOrder() {
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let writer = pool.lane("writer", threads: 2)
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let order = LockedValue<[Int]>([])
        pool.submit(key: 3, lane: writer) { started.signal(); gate.wait(); order.withLock { $0.append(0) } }
        XCTAssertEqual(started.wait(timeout: .now() + 30), .success)
        pool.hold(writer, true)
        for i in 1...3 { pool.submit(key: 3, lane: writer) { order.withLock { $0.append(i) } } }
        pool.submit(key: 4, lane: writer) { order.withLock { $0.append(10) } }
        gate.signal()
        let drained = DispatchSemaphore(value: 0)
        pool.submit { drained.signal() }   // the jobs lane still runs
        XCTAssertEqual(drained.wait(timeout: .now() + 30), .success)
        // The first job has ended or is ending; nothing after it may start.
        XCTAssertEqual(order.withLock { $0.filter { $0 != 0 } }, [])
        pool.hold(writer, false)
        pool.waitUntilDrained(writer)
        let ran = order.withLock { $0 }
        XCTAssertEqual(ran.filter { $0 < 10 }, [0, 1, 2, 3])
        XCTAssertTrue(ran.contains(10))
        pool.finish()
    }
}
