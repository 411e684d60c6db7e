import Foundation
import GRDB
import TestSupport
import XCTest
@testable import CacheCore

/// The cap's scan share (`ScanShare`): slices a scanner read are evicted last and only by the
/// share's own oldest; the share's bound, pins, a share of 0, the disk floor's last resort, and
/// the marks across a restart and an index from before the share.
///
/// One file of 12 slices, slice `s` last read at time `s`; a scanner read one byte of slices 2,
/// 5, 8 and 11 (scan slices), the rest are a player's.
final class ScanShareEvictionTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/library/film.mkv"
    private let slice: Int64 = 4096
    private let count = 12
    private let scanned: [Int64] = [2, 5, 8, 11]
    private lazy var data = randomBytes(count * Int(slice), seed: 47)

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-scanshare-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func engine(share: Int64?, capacity: Int64 = 1 << 30, source: ScriptedSource? = nil) throws -> CacheEngine {
        var configuration = CacheConfiguration(directory: dir, capacity: capacity, freeSpaceFloor: 0, sliceSize: slice, readTimeout: 10, engineClock: .realTime)
        configuration.scanShare = share
        let source = source ?? ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"v1\""))
        return try CacheEngine(configuration: configuration, source: source)
    }

    /// The whole file read by a player, `scanned` read by a scanner, then slice `s` last read at `s`.
    private func filled(share: Int64?) async throws -> CacheEngine {
        let cache = try engine(share: share)
        let info = try await cache.open(url: url)
        let player = cache.makeReader(for: info)
        _ = try await player.read(offset: 0, length: data.count)
        player.close()
        let scanner = cache.makeReader(for: info, readerClass: .scanner)
        for s in scanned { _ = try await scanner.read(offset: s * slice + 100, length: 1) }
        scanner.close()
        cache.core.writes.waitIdle()
        agedInOrder(cache)
        return cache
    }

    private func agedInOrder(_ cache: CacheEngine) {
        let key = try! cache.core.configuration.keyRules.key(for: url)
        cache.core.loader.loadNow(key)   // entries are loaded when looked up
        cache.core.shard(for: key).locked { entries in
            for s in 0..<Int64(count) { entries[key]!.machine.slicesTouched(s...s, now: Double(s)) }
        }
    }

    private func state(_ cache: CacheEngine) -> (cached: Set<Int64>, scan: Set<Int64>) {
        let key = try! cache.core.configuration.keyRules.key(for: url)
        cache.core.loader.loadNow(key)
        return cache.core.shard(for: key).locked { entries in
            guard let e = entries[key] else { return ([], []) }
            return (Set(e.sliceBytes.keys), e.scanSlices)
        }
    }

    private func evict(_ cache: CacheEngine, slices n: Int, lastResort: Bool = false) {
        cache.core.evictor.evictNow(bytes: Int64(n) * slice, needed: Int64(n) * slice, lastResort: lastResort)
    }

    private var all: Set<Int64> { Set(0..<Int64(count)) }

    // MARK: The order

    func testScanSlicesAreEvictedAfterEveryOtherSliceAndNeverForPlayback() async throws {
        let cache = try await filled(share: 4 * slice)
        defer { cache.shutdown() }
        XCTAssertEqual(state(cache).scan, Set(scanned))
        XCTAssertEqual(cache.core.evictor.scanShare.usedBytes, 4 * slice)
        evict(cache, slices: 1)
        XCTAssertEqual(state(cache).cached, all.subtracting([0]), "the oldest ordinary slice goes first")
        evict(cache, slices: 100)
        XCTAssertEqual(state(cache).cached, Set(scanned), "every other slice went; the share, within its bound, stays")
        evict(cache, slices: 1)
        XCTAssertEqual(state(cache).cached, Set(scanned), "nothing else is left: a write for the cap gets no room from the share")
        XCTAssertEqual(cache.core.evictor.scanShare.usedBytes, 4 * slice)
    }

    func testWhenTheShareIsOverItsBoundItsOwnOldestGoFirst() async throws {
        let cache = try await filled(share: 2 * slice)
        defer { cache.shutdown() }
        evict(cache, slices: 1)
        XCTAssertEqual(state(cache).cached, all.subtracting([2]), "the share's oldest, not the cache's oldest (0)")
        evict(cache, slices: 2)
        XCTAssertEqual(state(cache).cached, all.subtracting([2, 5, 0]), "the share fits its bound again, then LRU")
        evict(cache, slices: 100)
        XCTAssertEqual(state(cache).cached, [8, 11], "the share's youngest, within its bound, stay")
        XCTAssertEqual(cache.core.evictor.scanShare.usedBytes, 2 * slice)
        XCTAssertEqual(state(cache).scan, [8, 11], "an evicted slice's mark goes with it")
    }

    func testTheDiskFloorTakesTheShareLastOldestFirst() async throws {
        let cache = try await filled(share: 4 * slice)
        defer { cache.shutdown() }
        evict(cache, slices: 9, lastResort: true)
        XCTAssertEqual(state(cache).cached, [5, 8, 11], "the eight ordinary slices, then the share's oldest")
        evict(cache, slices: 3, lastResort: true)
        XCTAssertEqual(state(cache).cached, [])
        XCTAssertEqual(cache.core.evictor.scanShare.usedBytes, 0)
    }

    func testPinsStillWinOverTheShareAndOverEviction() async throws {
        let cache = try await filled(share: 2 * slice)
        defer { cache.shutdown() }
        _ = try cache.pin(url: url, ranges: [0..<1, 2 * slice..<(2 * slice + 1)], limit: 1 << 30)
        evict(cache, slices: 100)
        // Pinned slice 2 counts in the share and cannot go: the share sheds 5 and 8 to fit.
        XCTAssertEqual(state(cache).cached, [0, 2, 11])
        XCTAssertEqual(cache.core.evictor.scanShare.usedBytes, 2 * slice)
    }

    func testAShareOfZeroMarksNothingAndEvictsByAgeAlone() async throws {
        let cache = try await filled(share: 0)
        defer { cache.shutdown() }
        XCTAssertEqual(state(cache).scan, [])
        XCTAssertEqual(cache.core.evictor.scanShare.usedBytes, 0)
        XCTAssertEqual(cache.statusDocument(version: "test", showDirectory: false).cache.scanShare, ScanShareStatus(limitBytes: 0, usedBytes: 0))
        evict(cache, slices: 3)
        XCTAssertEqual(state(cache).cached, all.subtracting([0, 1, 2]))
    }

    func testTheShareDefaultsToTwoPercentOfTheCap() {
        var c = CacheConfiguration(directory: "/nonexistent", capacity: 100 << 20, engineClock: .realTime)
        XCTAssertEqual(c.scanShareBytes, 2 << 20)
        c.scanShare = 0
        XCTAssertEqual(c.scanShareBytes, 0)
        c.scanShare = 200 << 20
        XCTAssertEqual(c.scanShareBytes, 100 << 20, "never more than the cap")
    }

    func testTheStatusDocumentShowsTheShareAndItsUse() async throws {
        let cache = try await filled(share: 8 * slice)
        defer { cache.shutdown() }
        XCTAssertEqual(cache.statusDocument(version: "test", showDirectory: false).cache.scanShare, ScanShareStatus(limitBytes: 8 * slice, usedBytes: 4 * slice))
    }

    /// A small cap, turned over by a player reading another file: the probed slices stay.
    func testAPlayerTurningTheCapOverLeavesTheScanSlices() async throws {
        let other = "http://origin.test/library/other.mkv"
        let otherData = randomBytes(4 * count * Int(slice), seed: 48)
        let source = ScriptedSource()
        source.set(other, .init(bytes: otherData, etag: "\"o\""))
        let cache = try engine(share: 4 * slice, capacity: Int64(count + 4) * slice, source: source)
        defer { cache.shutdown() }
        let info = try await cache.open(url: url)
        let scanner = cache.makeReader(for: info, readerClass: .scanner)
        for s in scanned { _ = try await scanner.read(offset: s * slice, length: 100) }
        scanner.close()
        let film = try await cache.open(url: other)
        let player = cache.makeReader(for: film)
        for at in stride(from: 0, to: otherData.count, by: Int(slice)) {
            let bytes = try await player.read(offset: Int64(at), length: Int(slice))
            XCTAssertEqual(bytes, Array(otherData[at..<at + Int(slice)]))
        }
        player.close()
        cache.core.writes.waitIdle()
        XCTAssertEqual(state(cache).scan, Set(scanned))
        XCTAssertEqual(state(cache).cached, Set(scanned), "the probed slices survived 4x the cap of playback")
    }

    // MARK: The parts

    private func candidate(_ s: Int64, bytes: Int64 = 1, scan: Bool = false) -> Evictor.Candidate {
        Evictor.Candidate(shard: 0, key: CacheKey(rawValue: "k"), slice: s, access: Double(s), bytes: bytes, scan: scan)
    }

    func testTheShareSplitsItsOldestBeyondItsBoundFromWhatItKeeps() {
        struct Row { var line: UInt; var used: Int64; var bound: Int64; var excess: [Int64] }
        let scan = [candidate(1, bytes: 10, scan: true), candidate(2, bytes: 20, scan: true), candidate(3, bytes: 30, scan: true)]
        let rows = [
            Row(line: #line, used: 60, bound: 60, excess: []),
            Row(line: #line, used: 60, bound: 100, excess: []),
            Row(line: #line, used: 60, bound: 55, excess: [1]),
            Row(line: #line, used: 60, bound: 50, excess: [1]),
            Row(line: #line, used: 60, bound: 49, excess: [1, 2]),
            Row(line: #line, used: 60, bound: 0, excess: [1, 2, 3]),
            // Pinned scan slices count in `used` but are no candidates: the others make way.
            Row(line: #line, used: 100, bound: 60, excess: [1, 2, 3]),
        ]
        for row in rows {
            let (excess, kept) = ScanShare.split(scan, used: row.used, bound: row.bound)
            XCTAssertEqual(excess.map(\.slice), row.excess, line: row.line)
            XCTAssertEqual(kept.map(\.slice), scan.map(\.slice).filter { !row.excess.contains($0) }, line: row.line)
        }
    }

    func testTheQueueHandsItsLastResortOnlyWhenAsked() {
        let queue = EvictionQueue(limit: 3, maxAge: 30)
        queue.refill([candidate(0), candidate(1)], lastResort: [candidate(5, scan: true)], at: 0)
        XCTAssertEqual(queue.count, 2, "the last resort is not counted as candidates")
        XCTAssertEqual([queue.pop(), queue.pop(), queue.pop()].map { $0?.slice }, [0, 1, nil])
        XCTAssertTrue(queue.isEmpty)
        XCTAssertFalse(queue.isEmpty(lastResort: true))
        XCTAssertEqual(queue.pop(lastResort: true)?.slice, 5)
        XCTAssertNil(queue.pop(lastResort: true))
    }

    /// A re-scan answered from the share asks nothing ahead: its window would be the one request
    /// it sends, cancelled when the probe closes. A read that misses keeps the window it earned.
    func testAScannerReadsNothingAheadOfReadsTheCacheAnswers() {
        XCTAssertEqual(Reader.scannerWindow(64 << 10, 0..<100, cached: RangeSet([0..<4096])), 0)
        XCTAssertEqual(Reader.scannerWindow(64 << 10, 0..<100, cached: RangeSet([0..<50])), 64 << 10)
        XCTAssertEqual(Reader.scannerWindow(64 << 10, 0..<100, cached: RangeSet()), 64 << 10)
    }

    // MARK: Restarts

    /// Takes the share's table and migration out of an index, as a version before it left it.
    private func forgetTheShare(index path: String) throws {
        let db = try DatabaseQueue(path: path)
        try db.write { db in
            try db.execute(sql: "DROP TABLE scan_slice")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v5-scan-slice'")
        }
        try db.close()
    }

    func testTheMarksSurviveARestart() async throws {
        let cache = try await filled(share: 4 * slice)
        cache.shutdown()
        let again = try engine(share: 4 * slice)
        defer { again.shutdown() }
        XCTAssertEqual(state(again).scan, Set(scanned))
        XCTAssertEqual(again.core.evictor.scanShare.usedBytes, 4 * slice)
        agedInOrder(again)
        evict(again, slices: 100)
        XCTAssertEqual(state(again).cached, Set(scanned), "still evicted last after the restart")
    }

    func testAnEvictedSlicesMarkDoesNotComeBackAfterARestart() async throws {
        let cache = try await filled(share: 2 * slice)
        evict(cache, slices: 1)   // slice 2, the share's oldest
        cache.shutdown()
        let again = try engine(share: 2 * slice)
        defer { again.shutdown() }
        XCTAssertEqual(state(again).scan, [5, 8, 11])
        XCTAssertEqual(again.core.evictor.scanShare.usedBytes, 3 * slice)
    }

    /// An index from before the share (no `scan_slice` table, its migration not recorded) opens,
    /// keeps its bytes, and gets the table: no slice is marked until a scanner reads it again.
    func testACacheFromBeforeTheShareIsMigrated() async throws {
        let cache = try await filled(share: 4 * slice)
        cache.shutdown()
        try forgetTheShare(index: dir + "/index.sqlite")
        let again = try engine(share: 4 * slice)
        defer { again.shutdown() }
        XCTAssertEqual(state(again).cached, all, "its bytes are kept")
        XCTAssertEqual(state(again).scan, [])
        let info = try await again.open(url: url)
        let scanner = again.makeReader(for: info, readerClass: .scanner)
        _ = try await scanner.read(offset: 5 * slice, length: 1)
        scanner.close()
        XCTAssertEqual(state(again).scan, [5])
    }
}
