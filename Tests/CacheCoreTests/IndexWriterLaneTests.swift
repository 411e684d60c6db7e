@testable import CacheCore
import Foundation
import GRDB
import XCTest

/// The index writer as the engine pool's `index` lane and a lock: rows are committed behind, by
/// a job of the lane 50 ms after the first one pending (a timer of the scheduler, driven here by
/// a manual clock), and a deletion queued behind stays in order with what is waited for, as the
/// serial queue it replaces kept it.
final class IndexWriterLaneTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "httpcachefs-indexlane-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func row(_ id: Int64, generation: Int64 = 1) -> CacheIndex.EntryRow {
        CacheIndex.EntryRow(id: id, key: "http://h/\(id)", url: "http://h/\(id)", finalURL: "http://h/\(id)", length: 100,
                            contentType: nil, etag: nil, lastModified: nil, acceptsRanges: true, generation: generation,
                            validatedAt: 0, lastAccess: 0, hits: 0, misses: 0, bytesFromCache: 0, bytesFromOrigin: 0,
                            lastError: nil)
    }

    private func committedEntries(_ index: CacheIndex) throws -> Int {
        try index.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM entry") ?? 0 }
    }

    private func committedExtents(_ index: CacheIndex) throws -> [Int64] {
        try index.pool.read { db in try Int64.fetchAll(db, sql: "SELECT generation FROM extent ORDER BY generation") }
    }

    func testRowsAreCommittedByAJobOfTheIndexLaneFiftyMillisecondsAfterTheFirst() throws {
        let index = try CacheIndex(path: dir + "/index.sqlite")
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let clock = Scheduler.manual()
        index.writeBehind(on: pool, scheduler: clock)
        let lane = pool.lane("index", threads: 1)
        index.updateEntry(row(1))
        clock.advance(by: .seconds(0.02))
        index.updateEntry(row(2))   // the same batch: no second timer
        XCTAssertEqual(clock.pending, 1)
        clock.advance(by: .seconds(0.029))
        pool.waitUntilDrained(lane)
        XCTAssertEqual(try committedEntries(index), 0, "committed before its 50 ms")
        clock.advance(by: .seconds(0.001))
        pool.waitUntilDrained(lane)
        XCTAssertEqual(try committedEntries(index), 2, "both rows in the one flush")
        try index.close()
        pool.finish()
    }

    /// A deletion of older generations is queued behind; a write waited for (an eviction's
    /// commit) that comes after it commits it first, so its rows are gone before, and the
    /// rows pending before it are committed before it runs.
    func testADeletionQueuedBehindIsCommittedBeforeAWriteWaitedForThatCameAfterIt() throws {
        let index = try CacheIndex(path: dir + "/index.sqlite")
        let pool = BlockingIOPool(name: "test-pool", threads: 1)
        let lane = pool.lane("index", threads: 1)
        let clock = Scheduler.manual()
        index.writeBehind(on: pool, scheduler: clock)
        index.updateEntry(row(1, generation: 1))
        index.addExtent(.init(entryID: 1, generation: 1, slice: 0, start: 0, end: 10, checksum: 0))
        index.flush()
        XCTAssertEqual(try committedExtents(index), [1])
        pool.hold(lane, true)   // the lane's job has not run yet when the write waited for comes
        index.updateEntry(row(1, generation: 2))   // a remote change
        index.addExtent(.init(entryID: 1, generation: 2, slice: 1, start: 0, end: 10, checksum: 0))
        let order = LockedValue<[String]>([])
        index.deleteOtherGenerations(entryID: 1, keep: 2) { order.withLock { $0.append("older generations' files") } }
        try index.deleteSlices([.init(entryID: 9, generation: 1, slice: 0)]) { order.withLock { $0.append("evicted slices' files") } }
        XCTAssertEqual(order.withLock { $0 }, ["older generations' files", "evicted slices' files"])
        XCTAssertEqual(try committedExtents(index), [2], "the older generation's row went, the new one stayed")
        pool.hold(lane, false)
        pool.waitUntilDrained(lane)
        XCTAssertEqual(order.withLock { $0 }.count, 2, "the lane's job found nothing left to do")
        try index.close()
        pool.finish()
    }
}
