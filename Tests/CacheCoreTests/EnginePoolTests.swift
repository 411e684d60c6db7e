import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// The engine's one pool for blocking I/O (docs/threads.md): its jobs never wait for one
/// another, so a pool of one thread or four does what a crowd of threads did, and a slow disk
/// job holds up neither reads nor the locks they need.
final class EnginePoolTests: GatedEngineTestCase {
    /// Two hundred chunked reads wait for the network at once on a four-thread pool: a read that
    /// waits holds no thread (it continues from its completion), so every one of them gets to
    /// ask before any byte arrives. Were a waiting read to block its thread, four would ask and
    /// the rest would queue behind them for ever.
    func testTwoHundredWaitingChunkedReadsHoldNoThreadOfAFourThreadPool() throws {
        let source = GatedSource()
        let cache = try engine(source, retainBudget: 0, ioThreads: 4)   // answers come from disk, on the pool
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let base: Int64 = 256 << 10, piece: Int64 = 4 << 10, runs = 200
        // One read over the whole range starts one transfer, which the runs' reads then wait for.
        let first = cache.makeReader(for: info)
        let done = DispatchGroup()
        done.enter()
        first.lease(offset: base, length: Int(piece) * runs) { result in
            if case let .success(lease) = result { lease.release() }
            done.leave()
        }
        XCTAssertEqual(source.transfers.count, 2, "the probe and the first read's transfer")
        let got = (0..<runs).map { _ in ResultBox<[UInt8]>() }
        var readers: [CacheReader] = [first]
        for i in 0..<runs {
            let reader = cache.makeReader(for: info)
            readers.append(reader)
            let start = base + Int64(i) * piece
            let bytes = Collected()
            done.enter()
            ChunkedRead.start(reader, from: start, to: start + piece, consume: bytes.append) { result in
                got[i].set(result.map { _ in bytes.value }.mapError { $0 as? CacheError ?? .cancelled })
                done.leave()
            }
        }
        defer { readers.forEach { $0.close() } }
        // Each run's first step is a job of the pool that asks its read and returns: once the
        // pool drained, every one of them asked.
        XCTAssertTrue(cache.blockingIO.waitUntilDrained(BlockingIOPool.jobs, timeout: 30), "the runs' first steps never ran")
        XCTAssertEqual(waiters(cache), runs + 1, "every run asked its read while the others waited")
        XCTAssertEqual(source.transfers.count, 2, "the runs wait for the transfer that runs")
        for t in source.transfers.dropFirst() {
            t.partial(length: length)
            t.send(data[Int(t.request.start)..<Int(t.request.end ?? length)])
            t.finish()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "every run completed")
        for i in 0..<runs {
            let start = base + Int64(i) * piece
            XCTAssertEqual(try got[i].get(), Array(bytes(start, piece)), "run \(i)")
        }
    }

    /// After a restart every slice must be checked before it is served: each chunk of a chunked
    /// read waits for a check that runs on the same pool, here of one thread. The loop hands
    /// its thread back while it waits, so the check runs and the read completes; a loop that
    /// waited for its read on the pool's thread would wait for ever.
    func testAChunkedReadOfSlicesToCheckCompletesOnAOneThreadPool() throws {
        try cacheWholeFileThenStop()
        let source = GatedSource()
        let cache = try engine(source, ioThreads: 1)
        defer { source.finishAll(); cache.shutdown() }
        cache.core.maintenance.scrubDone.store(true, ordering: .relaxed)   // only the reads check slices here
        XCTAssertEqual(unverified(cache), [0, 1, 2, 3])
        let info = try XCTUnwrap(cache.cachedInfo(url: url))
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        let bytes = try ChunkedRead.readWaiting(reader, offset: 0, count: Int(length))
        XCTAssertTrue(bytes == data, "every byte, checked")
        XCTAssertEqual(unverified(cache), [])
        XCTAssertEqual(source.transfers.count, 0, "all from disk")
    }

    /// Checks run one at a time, in the order the reads asked for them (their key of the pool),
    /// while the pool's other threads run other jobs.
    func testChecksRunOneAtATimeInTheOrderAskedBesideOtherJobs() throws {
        try cacheWholeFileThenStop()
        let source = GatedSource()
        let cache = try engine(source, ioThreads: 2)
        defer { source.finishAll(); cache.shutdown() }
        cache.core.maintenance.scrubDone.store(true, ordering: .relaxed)
        let info = try XCTUnwrap(cache.cachedInfo(url: url))
        // A check already running (a slow disk): the reads' checks queue behind it.
        let checking = DispatchSemaphore(value: 0), gate = DispatchSemaphore(value: 0)
        cache.core.pool.submit(key: EngineCore.verifyKey) { checking.signal(); gate.wait() }
        XCTAssertEqual(checking.wait(timeout: .now() + 30), .success)
        let order = LockedValue<[String]>([])
        let answered = DispatchGroup()
        let readers = (0..<2).map { _ in cache.makeReader(for: info) }
        defer { readers.forEach { $0.close() } }
        for (name, reader, slice) in [("slice 2", readers[0], Int64(2)), ("slice 1", readers[1], Int64(1))] {
            answered.enter()
            reader.lease(offset: slice << 20, length: 4096) { result in
                if case let .success(lease) = result { lease.release() }
                order.withLock { $0.append(name) }
                answered.leave()
            }
        }
        let other = DispatchSemaphore(value: 0)
        cache.core.pool.submit { other.signal() }
        XCTAssertEqual(other.wait(timeout: .now() + 30), .success, "another job ran while the checks waited")
        XCTAssertEqual(order.withLock { $0 }, [], "no read answered before its check")
        gate.signal()
        XCTAssertEqual(answered.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(order.withLock { $0 }, ["slice 2", "slice 1"], "checked in the order asked")
    }

    // MARK: Helpers

    private func unverified(_ cache: CacheEngine) -> Set<Int64> {
        if let key = try? cache.key(for: url) { cache.core.loader.loadNow(key) }   // entries are loaded when looked up
        var found = Set<Int64>()
        for shard in cache.core.shards { shard.locked { for e in $0.all { found.formUnion(e.unverified) } } }
        return found
    }

    private func waiters(_ cache: CacheEngine) -> Int {
        cache.core.shards.reduce(0) { n, shard in n + shard.locked { $0.all.reduce(0) { $0 + $1.waiters.count } } }
    }
}
