import XCTest
@testable import CacheCore
import TestSupport

/// Rounds of eviction: bounded in slices beyond what the write needs, taken from the oldest
/// slices of the last scan, each checked again before it goes.
final class EvictionRoundTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/hls/all-segments.bin"
    /// Small slices, so one file holds more slices than a round may take.
    private let slice: Int64 = 4096
    private let slices = 1200

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-evictround-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// An engine holding all `slices` slices of one file, slice `s` last read at time `s`.
    private func filledEngine() async throws -> (CacheEngine, EntryHandle, [UInt8]) {
        let data = randomBytes(slices * Int(slice), seed: 61)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                                                      sliceSize: slice, readTimeout: 10, engineClock: .realTime),
                                    source: source)
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)
        _ = try await reader.read(offset: 0, length: data.count)
        reader.close()
        // The transfer hands its last bytes to the writer after the read is answered: wait for it.
        cache.core.activeSinks.wait(until: { $0 == 0 })
        cache.core.writes.waitIdle()
        let entry = try XCTUnwrap(entry(cache))
        let shard = cache.core.shard(for: entry.key)
        shard.locked { entries in for s in 0..<Int64(slices) { entries[entry]!.machine.slicesTouched(s...s, now: Double(s)) } }
        XCTAssertEqual(cachedSlices(cache, entry), Set(0..<Int64(slices)))
        return (cache, entry, data)
    }

    private func entry(_ cache: CacheEngine) -> EntryHandle? {
        guard let key = try? cache.core.configuration.keyRules.key(for: url) else { return nil }
        cache.core.loader.loadNow(key)   // entries are loaded when looked up
        return cache.core.shard(for: key).locked { $0[key]?.handle }
    }

    private func cachedSlices(_ cache: CacheEngine, _ entry: EntryHandle) -> Set<Int64> {
        cache.core.shard(for: entry.key).locked { $0[entry].map { Set($0.sliceBytes.keys) } ?? [] }
    }

    /// Evicts as a write would; a round taken in several batches is still one round to
    /// complete, so none is left in flight for the next write needing room to wait for.
    private func evict(_ cache: CacheEngine, bytes: Int64, needed: Int64, file: StaticString = #filePath, line: UInt = #line) -> Int64 {
        let freed = cache.core.evictor.evictNow(bytes: bytes, needed: needed)
        XCTAssertTrue(cache.core.evictor.rounds.idle, "no eviction round left in flight", file: file, line: line)
        return freed
    }

    func testARoundEvictsAtMostRoundSlicesBeyondWhatTheWriteNeeds() async throws {
        let (cache, entry, _) = try await filledEngine()
        defer { cache.shutdown() }
        // Room for one slice is needed, and the whole cache was asked as headroom.
        let freed = evict(cache, bytes: Int64(slices) * slice, needed: slice)
        XCTAssertEqual(freed, Int64(Evictor.roundSlices) * slice)
        XCTAssertEqual(cache.metrics.totals.evictions, Int64(Evictor.roundSlices))
        XCTAssertEqual(cachedSlices(cache, entry), Set(Int64(Evictor.roundSlices)..<Int64(slices)), "the oldest went")
    }

    func testWhatTheWriteNeedsIsFreedWhateverTheNumberOfSlices() async throws {
        let (cache, entry, _) = try await filledEngine()
        defer { cache.shutdown() }
        let needed = Int64(Evictor.roundSlices + 100) * slice
        XCTAssertEqual(evict(cache, bytes: needed + 10 * slice, needed: needed), needed, "no headroom past a full round")
        XCTAssertEqual(cachedSlices(cache, entry).count, slices - Evictor.roundSlices - 100)
    }

    func testASliceReadAfterTheScanIsNotEvictedInItsOldTurn() async throws {
        let (cache, entry, _) = try await filledEngine()
        defer { cache.shutdown() }
        XCTAssertEqual(evict(cache, bytes: 2 * slice, needed: 2 * slice), 2 * slice)   // scans; 0 and 1 go
        // Slice 2 is read now: no longer among the oldest, though the queue still lists it.
        cache.core.shard(for: entry.key).locked { $0[entry]!.machine.slicesTouched(2...2, now: Double(slices)) }
        XCTAssertEqual(evict(cache, bytes: 2 * slice, needed: 2 * slice), 2 * slice)
        XCTAssertEqual(Set(0..<6).subtracting(cachedSlices(cache, entry)), [0, 1, 3, 4])
    }

    func testASlicePinnedAfterTheScanIsNotEvicted() async throws {
        let (cache, entry, _) = try await filledEngine()
        defer { cache.shutdown() }
        XCTAssertEqual(evict(cache, bytes: slice, needed: slice), slice)
        // A read under way pins slice 1; the user pins slice 2.
        cache.core.shard(for: entry.key).locked { let e = $0[entry]!; e.pin(1...1, generation: e.info.generation) }
        _ = try cache.pin(url: url, ranges: [2 * slice..<(3 * slice)], limit: 1 << 30)
        XCTAssertEqual(evict(cache, bytes: 2 * slice, needed: 2 * slice), 2 * slice)
        XCTAssertEqual(Set(0..<6).subtracting(cachedSlices(cache, entry)), [0, 3, 4])
        cache.core.shard(for: entry.key).locked { let e = $0[entry]!; e.unpin(1...1, generation: e.info.generation) }
    }

    func testEvictedBytesAreFetchedAgainAndTheRestServedFromTheCache() async throws {
        let (cache, entry, data) = try await filledEngine()
        XCTAssertEqual(evict(cache, bytes: Int64(slices) * slice, needed: slice), Int64(Evictor.roundSlices) * slice)
        cache.shutdown()
        // After a restart the index agrees with the disk: the evicted slices are gone, the rest
        // read back as they were.
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let again = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                                                      sliceSize: slice, readTimeout: 10, engineClock: .realTime),
                                    source: source)
        defer { again.shutdown() }
        let reloaded = try XCTUnwrap(self.entry(again))
        XCTAssertEqual(cachedSlices(again, reloaded), Set(Int64(Evictor.roundSlices)..<Int64(slices)))
        _ = entry
        let info = try await again.open(url: url)
        let reader = again.makeReader(for: info)
        defer { reader.close() }
        let bytes = try await reader.read(offset: 0, length: data.count)
        XCTAssertEqual(bytes, data)
        XCTAssertEqual(source.bytesServed, Int64(Evictor.roundSlices) * slice, "only the evicted slices came from the origin")
    }

    func testTheQueueKeepsTheOldestCandidatesUpToItsLimitInOrder() {
        let queue = EvictionQueue(limit: 3, maxAge: 30)
        XCTAssertTrue(queue.isEmpty)
        XCTAssertTrue(queue.isStale(now: 0), "never scanned")
        let candidates = (0..<5).map { Evictor.Candidate(shard: 0, key: CacheKey(rawValue: "k"), slice: Int64($0), access: Double($0), bytes: 1) }
        queue.refill(candidates, at: 100)
        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual([queue.pop(), queue.pop(), queue.pop()].map { $0?.slice }, [0, 1, 2])
        XCTAssertNil(queue.pop())
        XCTAssertFalse(queue.isStale(now: 130))
        XCTAssertTrue(queue.isStale(now: 131))
    }
}
