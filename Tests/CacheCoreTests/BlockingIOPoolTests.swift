@testable import CacheCore
import Foundation
import TestSupport
import XCTest

final class BlockingIOPoolTests: XCTestCase {
    /// Eight jobs that each wait for a gate all start before any ends: a slow disk is read by
    /// eight at once, not one after another.
    func testRunsAsManyJobsAtOnceAsItHasThreads() {
        let pool = BlockingIOPool(name: "test-pool", threads: 8)
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let ended = DispatchGroup()
        for _ in 0..<8 {
            ended.enter()
            pool.submit {
                started.signal()
                gate.wait()
                ended.leave()
            }
        }
        for i in 0..<8 {
            XCTAssertEqual(started.wait(timeout: .now() + 30), .success, "job \(i) never started while the others waited")
        }
        for _ in 0..<8 { gate.signal() }
        XCTAssertEqual(ended.wait(timeout: .now() + 30), .success)
        pool.finish()
    }

    /// A ninth job waits for a thread: the pool never grows.
    func testAJobBeyondTheThreadsWaitsItsTurn() {
        let pool = BlockingIOPool(name: "test-pool", threads: 2)
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let thirdRan = DispatchSemaphore(value: 0)
        for _ in 0..<2 { pool.submit { started.signal(); gate.wait() } }
        XCTAssertEqual(started.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(started.wait(timeout: .now() + 30), .success)
        pool.submit { thirdRan.signal() }
        XCTAssertEqual(pool.queued, 1, "both threads are busy: the third job is queued")
        gate.signal()
        XCTAssertEqual(thirdRan.wait(timeout: .now() + 30), .success)
        gate.signal()
        pool.finish()
    }

    /// One key's jobs run one at a time, in the order submitted, while another key's job and an
    /// unkeyed one run beside them: the checks of one start stay in order, and nothing else
    /// waits behind a long one.
    func testJobsOfOneKeyRunInOrderOneAtATimeBesideOtherKeys() {
        let pool = BlockingIOPool(name: "test-pool", threads: 4)
        let gate = DispatchSemaphore(value: 0)
        let firstStarted = DispatchSemaphore(value: 0)
        let order = LockedValue<[Int]>([])
        let othersRan = DispatchGroup()
        let allRan = DispatchGroup()
        allRan.enter()
        pool.submit(key: 7) {
            firstStarted.signal()
            gate.wait()
            order.withLock { $0.append(0) }
            allRan.leave()
        }
        XCTAssertEqual(firstStarted.wait(timeout: .now() + 30), .success)
        for i in 1...5 {
            allRan.enter()
            pool.submit(key: 7) {
                order.withLock { $0.append(i) }
                allRan.leave()
            }
        }
        othersRan.enter()
        pool.submit(key: 8) { othersRan.leave() }
        othersRan.enter()
        pool.submit { othersRan.leave() }
        XCTAssertEqual(othersRan.wait(timeout: .now() + 30), .success, "another key and an unkeyed job ran while key 7 was busy")
        XCTAssertEqual(order.withLock { $0 }, [], "key 7's later jobs wait for its first")
        XCTAssertEqual(pool.queued, 5, "held jobs count as queued")
        gate.signal()
        XCTAssertEqual(allRan.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(order.withLock { $0 }, [0, 1, 2, 3, 4, 5])
        pool.finish()
    }

    /// What a job captured goes once the job ran, not when the queue is next compacted: a
    /// read's answer captures its lease and the chunks it holds, counted in the memory budget.
    func testWhatAJobCapturedIsLetGoOnceItRan() {
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let ran = DispatchSemaphore(value: 0), released = DispatchSemaphore(value: 0)
        do {
            let token = CapturedToken(released)
            pool.submit { [token] in
                _ = token
                ran.signal()
            }
        }
        XCTAssertEqual(ran.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(released.wait(timeout: .now() + 30), .success, "the queue still holds the job's captures")
        pool.finish()
    }

    /// `finish` runs what was queued; a job submitted afterwards runs on the caller's thread, so
    /// what it holds is still released.
    func testFinishDrainsAndLaterJobsRunInline() {
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let count = Counter()
        for _ in 0..<100 { pool.submit { count.add() } }
        pool.finish()
        XCTAssertEqual(count.value, 100)
        pool.submit { count.add() }
        XCTAssertEqual(count.value, 101)
    }

    /// A pool never used starts no threads, and finishing it returns at once.
    func testAnUnusedPoolFinishes() {
        BlockingIOPool(name: "test-pool", threads: 4).finish()
    }

    /// Threads start as jobs need them: one job at a time takes one thread, however many the
    /// pool may have; an idle daemon holds none.
    func testThreadsStartOnlyAsJobsNeedThemAndNeverPastTheBound() {
        let pool = BlockingIOPool(name: "test-pool", threads: 8)
        XCTAssertEqual(pool.threadCount, 0, "a pool never used has no thread")
        for _ in 0..<20 {
            let ran = DispatchSemaphore(value: 0)
            pool.submit { ran.signal() }
            XCTAssertEqual(ran.wait(timeout: .now() + 30), .success)
        }
        // A job that finds no idle thread may start one, so jobs one after another may use a
        // few; never more than the pool's bound.
        XCTAssertLessThanOrEqual(pool.threadCount, 8, "never more threads than the bound")
        pool.finish()
        XCTAssertEqual(pool.threadCount, 0)
    }

    /// A thread with nothing to do for the pool's idle time ends; the next job starts one again.
    func testAnIdleThreadEndsAndTheNextJobStartsOne() {
        let pool = BlockingIOPool(name: "test-pool", threads: 4, idleTime: 0.01)
        let ran = DispatchSemaphore(value: 0)
        pool.submit { ran.signal() }
        XCTAssertEqual(ran.wait(timeout: .now() + 30), .success)
        XCTAssertTrue(pool.waitForThreads(atMost: 0, timeout: 30), "the idle thread never ended")
        pool.submit { ran.signal() }
        XCTAssertEqual(ran.wait(timeout: .now() + 30), .success, "a job after the idle thread ended still runs")
        pool.finish()
    }

    /// A lane's jobs run up to the lane's bound however busy the other lanes are: eight FUSE
    /// replies that splice from a slow disk start while the engine's lane is full, and the
    /// engine's lane never gets more than its own bound.
    func testALaneRunsUpToItsBoundWhateverTheOtherLanesDo() {
        let pool = BlockingIOPool(name: "test-pool", threads: 2)
        let replies = pool.lane("replies", threads: 8)
        XCTAssertEqual(pool.lane("replies", threads: 8), replies, "a lane asked for again is the same lane")
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let ended = DispatchGroup()
        for _ in 0..<3 {
            ended.enter()
            pool.submit { started.signal(); gate.wait(); ended.leave() }
        }
        XCTAssertEqual(started.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(started.wait(timeout: .now() + 30), .success)
        for i in 0..<8 {
            ended.enter()
            pool.submit(lane: replies) { started.signal(); gate.wait(); ended.leave() }
            XCTAssertEqual(started.wait(timeout: .now() + 30), .success, "reply \(i) waited behind the other lane")
        }
        XCTAssertEqual(pool.queued, 1, "the first lane's third job waits for one of its two")
        XCTAssertEqual(pool.threadCount, 10, "the threads are the two lanes' bounds, no more")
        for _ in 0..<11 { gate.signal() }
        XCTAssertEqual(ended.wait(timeout: .now() + 30), .success)
        pool.finish()
    }

    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0   // guarded by lock
        func add() { lock.withLock { n += 1 } }
        var value: Int { lock.withLock { n } }
    }

    /// The kernel refuses thread names over 15 bytes (the thread would show its creator's name):
    /// the pool's threads get a short one that still says which pool and which thread.
    func testThreadNamesFitTheKernelsFifteenBytes() {
        XCTAssertEqual(BlockingIOPool.kernelName("httpcachefs-fuse-disk", 3), "fuse-disk-3")
        XCTAssertEqual(BlockingIOPool.kernelName("disk", 12), "disk-12")
        let long = BlockingIOPool.kernelName("httpcachefs-a-very-long-pool-name", 7)
        XCTAssertEqual(long.utf8.count, 15)
        XCTAssertTrue(long.hasSuffix("-7"), long)
    }

    /// The name is the one the kernel shows (`top`, `perf`, /proc), not only Foundation's.
    func testItsThreadsCarryTheirNameInTheKernel() {
        let pool = BlockingIOPool(name: "httpcachefs-test-pool", threads: 1)
        let seen = DispatchSemaphore(value: 0)
        let name = Locked("")
        pool.submit {
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            name.mutate { $0 = comm.trimmingCharacters(in: .whitespacesAndNewlines) }
            seen.signal()
        }
        XCTAssertEqual(seen.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(name.value, "test-pool-0")
        pool.finish()
    }
}

/// Something a job captures, which says when the pool lets go of it (its `deinit`).
private final class CapturedToken: Sendable {
    private let released: DispatchSemaphore
    init(_ released: DispatchSemaphore) { self.released = released }
    deinit { released.signal() }
}
