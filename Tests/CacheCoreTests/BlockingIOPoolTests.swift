import CacheCore
import Foundation
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

    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0   // guarded by lock
        func add() { lock.withLock { n += 1 } }
        var value: Int { lock.withLock { n } }
    }
}
