import XCTest
@testable import CacheCore

/// The write budget alone: who may queue bytes, who pauses, and when a paused transfer resumes.
final class WriteQueueTests: XCTestCase {
    private let queue = WriteQueue(lanes: 1, budget: .init(total: 1000, perTransfer: 400))

    /// A resume callback that counts how often it ran.
    private final class Resumes: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        var count: Int { lock.withLock { n } }
        func callback() -> @Sendable () -> Void { { self.lock.withLock { self.n += 1 } } }
    }

    func testATransferPastItsShareResumesOnlyOnceItsQueueIsDownToHalfItsShare() {
        let resumes = Resumes()
        XCTAssertTrue(queue.reserve(400, transfer: 1, onRoom: resumes.callback()))
        XCTAssertFalse(queue.reserve(100, transfer: 1, onRoom: resumes.callback()), "its share is queued")
        queue.release(100, transfer: 1)
        XCTAssertEqual(resumes.count, 0, "room for one chunk would only pause it again at the next")
        queue.release(100, transfer: 1)
        XCTAssertEqual(resumes.count, 1, "half its share is free: it resumes")
        queue.release(200, transfer: 1)
        XCTAssertEqual(resumes.count, 1, "resumed once")
        XCTAssertEqual(queue.usage.reserved, 0)
    }

    func testTransfersPausedByTheTotalResumeOnceTheQueueIsDownToHalf() {
        let resumes = Resumes()
        XCTAssertTrue(queue.reserve(400, transfer: 1, onRoom: resumes.callback()))
        XCTAssertTrue(queue.reserve(400, transfer: 2, onRoom: resumes.callback()))
        XCTAssertFalse(queue.reserve(300, transfer: 3, onRoom: resumes.callback()), "past the total")
        XCTAssertTrue(queue.reserve(200, transfer: 3, onRoom: resumes.callback()), "within it")
        XCTAssertFalse(queue.reserve(100, transfer: 4, onRoom: resumes.callback()))
        XCTAssertEqual(queue.usage.paused, 1, "transfer 3 went on, transfer 4 waits")
        queue.release(400, transfer: 1)
        XCTAssertEqual(resumes.count, 0, "600 of 1000 still queued")
        queue.release(200, transfer: 2)
        XCTAssertEqual(resumes.count, 1)
        XCTAssertEqual(queue.usage.peak, 1000, "never more than the budget")
    }

    func testAnEmptyQueueTakesAChunkLargerThanTheBudget() {
        XCTAssertTrue(queue.reserve(5000, transfer: 1, onRoom: {}), "a budget smaller than one chunk cannot stall")
        XCTAssertFalse(queue.reserve(1, transfer: 2, onRoom: {}))
    }

    func testJobsOfOneFileRunInOrder() {
        let order = Order()
        for i in 0..<100 { queue.submit(file: 7) { order.append(i) } }
        queue.waitIdle()
        XCTAssertEqual(order.values, Array(0..<100))
        queue.stop()
    }

    func testEveryJobOfOneFileRunsOnOneLane() {
        let lanes = WriteQueue(lanes: 2, budget: .init(total: 1000, perTransfer: 400))
        let threads = Order()
        // However many transfers feed it: one writer thread for the file.
        for _ in 0..<50 { lanes.submit(file: 7) { threads.append(Int(bitPattern: UInt(pthread_self()))) } }
        lanes.waitIdle()
        XCTAssertEqual(Set(threads.values).count, 1)
        lanes.stop()
    }

    private final class Order: @unchecked Sendable {
        private let lock = NSLock()
        private var v: [Int] = []
        func append(_ i: Int) { lock.withLock { v.append(i) } }
        var values: [Int] { lock.withLock { v } }
    }
}
