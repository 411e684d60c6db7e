import XCTest
@testable import CacheCore

/// The memory budget's queued share alone: who may queue bytes, who pauses, and when a paused
/// transfer resumes; the retained share; and the queue's lanes.
final class WriteQueueTests: XCTestCase {
    private let memory = MemoryBudget(limits: .init(queued: 1000, perTransfer: 400, retained: 500))
    private lazy var queue = WriteQueue(jobs: BlockingIOPool(name: "test-pool", threads: 1), memory: memory)

    /// A resume callback that counts how often it ran.
    private final class Resumes: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        var count: Int { lock.withLock { n } }
        func callback() -> @Sendable () -> Void { { self.lock.withLock { self.n += 1 } } }
    }

    func testATransferPastItsShareResumesOnlyOnceItsQueueIsDownToHalfItsShare() {
        let resumes = Resumes()
        XCTAssertTrue(memory.reserve(400, transfer: 1, onRoom: resumes.callback()))
        XCTAssertFalse(memory.reserve(100, transfer: 1, onRoom: resumes.callback()), "its share is queued")
        memory.release(100, transfer: 1)
        XCTAssertEqual(resumes.count, 0, "room for one chunk would only pause it again at the next")
        memory.release(100, transfer: 1)
        XCTAssertEqual(resumes.count, 1, "half its share is free: it resumes")
        memory.release(200, transfer: 1)
        XCTAssertEqual(resumes.count, 1, "resumed once")
        XCTAssertEqual(memory.usage.queued, 0)
    }

    func testTransfersPausedByTheTotalResumeOnceTheQueueIsDownToHalf() {
        let resumes = Resumes()
        XCTAssertTrue(memory.reserve(400, transfer: 1, onRoom: resumes.callback()))
        XCTAssertTrue(memory.reserve(400, transfer: 2, onRoom: resumes.callback()))
        XCTAssertFalse(memory.reserve(300, transfer: 3, onRoom: resumes.callback()), "past the total")
        XCTAssertTrue(memory.reserve(200, transfer: 3, onRoom: resumes.callback()), "within it")
        XCTAssertFalse(memory.reserve(100, transfer: 4, onRoom: resumes.callback()))
        XCTAssertEqual(memory.usage.paused, 1, "transfer 3 went on, transfer 4 waits")
        memory.release(400, transfer: 1)
        XCTAssertEqual(resumes.count, 0, "600 of 1000 still queued")
        memory.release(200, transfer: 2)
        XCTAssertEqual(resumes.count, 1)
        XCTAssertEqual(memory.usage.peakQueued, 1000, "never more than the budget")
    }

    func testAnEmptyQueueTakesAChunkLargerThanTheBudget() {
        XCTAssertTrue(memory.reserve(5000, transfer: 1, onRoom: {}), "a budget smaller than one chunk cannot stall")
        XCTAssertFalse(memory.reserve(1, transfer: 2, onRoom: {}))
    }

    func testReadsRetainWithinTheirShareExceptWhenForcedAndNeverTakeFromTheQueue() {
        XCTAssertTrue(memory.retain(300, force: false))
        XCTAssertFalse(memory.retain(300, force: false), "past the retained share")
        XCTAssertTrue(memory.retain(300, force: true), "bytes nothing else holds go past it")
        XCTAssertTrue(memory.reserve(400, transfer: 1, onRoom: {}), "the queue's share is the queue's alone")
        memory.unretain(300)
        memory.unretain(300)
        memory.release(400, transfer: 1)
        XCTAssertEqual(memory.usage, .init(queued: 0, retained: 0, peakQueued: 400, peakRetained: 600, paused: 0))
    }

    func testJobsOfOneFileRunInOrder() {
        let order = Order()
        for i in 0..<100 { queue.submit(file: 7) { order.append(i) } }
        queue.waitIdle()
        XCTAssertEqual(order.values, Array(0..<100))
        queue.stop()
    }

    func testTheJobsOfOneFileNeverRunTogether() {
        let lanes = WriteQueue(jobs: BlockingIOPool(name: "test-pool", threads: 1), memory: memory)
        let running = LockedValue((now: 0, most: 0))
        // However many transfers feed it: one writer at a time for the file.
        for _ in 0..<50 {
            lanes.submit(file: 7) {
                running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                for _ in 0..<100 { _ = running.withLock { $0.now } }
                running.withLock { $0.now -= 1 }
            }
            lanes.submit(file: 8) {}   // another file's jobs run beside them
        }
        lanes.waitIdle()
        XCTAssertEqual(running.withLock { $0.most }, 1)
        lanes.stop()
    }

    /// Jobs taken from the lane together still let go of each job's captures once it ran (the
    /// chunks a write job holds go back to the pool then), not after the last of them.
    func testALaneLetsGoOfEachJobOnceItRan() {
        final class Token: Sendable {}
        weak var kept: Token?
        let stillKept = LockedValue<Bool?>(nil)
        queue.holdWrites()   // both jobs are queued before the lane takes them, together
        do {
            let token = Token()
            kept = token
            queue.submit(file: 1) { _ = token }
        }
        queue.submit(file: 1) { [weak kept] in stillKept.withLock { $0 = kept != nil } }
        queue.releaseWrites()
        queue.waitIdle()
        XCTAssertEqual(stillKept.withLock { $0 }, false, "the first job's captures lived on while the second ran")
        queue.stop()
    }

    private final class Order: @unchecked Sendable {
        private let lock = NSLock()
        private var v: [Int] = []
        func append(_ i: Int) { lock.withLock { v.append(i) } }
        var values: [Int] { lock.withLock { v } }
    }
}
