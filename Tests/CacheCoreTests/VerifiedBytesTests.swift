import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// Bytes on disk from before a start are served only once they match their checksums: damaged
/// ones are dropped and fetched again, never served.
final class VerifiedBytesTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/films/a.mkv"
    private let size = 3 << 20
    private lazy var original = randomBytes(size, seed: 9)

    override func setUp() { dir = NSTemporaryDirectory() + "httpcachefs-verify-\(UUID().uuidString)" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    private func engine(_ source: ScriptedSource) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                                          sliceSize: 1 << 20, readTimeout: 10, engineClock: .realTime), source: source)
    }

    private func source() -> ScriptedSource {
        let s = ScriptedSource()
        s.set(url, .init(bytes: original, etag: "\"v1\""))
        return s
    }

    /// Caches the whole file, stops, and flips 4 bytes at `offset` (if any) in its data file.
    private func cacheThenDamage(at offset: Int64?) async throws {
        let cache = try engine(source())
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)
        _ = try await reader.read(offset: 0, length: size)
        reader.close()
        cache.core.writes.waitIdle()
        cache.shutdown()
        guard let offset else { return }
        let files = try FileManager.default.subpathsOfDirectory(atPath: dir + "/data").filter { $0.hasSuffix(".data") }
        XCTAssertEqual(files.count, 1)
        let fd = open(dir + "/data/" + files[0], O_RDWR)
        defer { close(fd) }
        var word: UInt32 = 0
        XCTAssertEqual(pread(fd, &word, 4, off_t(offset)), 4)
        word = ~word
        XCTAssertEqual(pwrite(fd, &word, 4, off_t(offset)), 4)
    }

    private func unverified(_ cache: CacheEngine) -> Set<Int64> {
        if let key = try? cache.key(for: url) { cache.core.loader.loadNow(key) }   // entries are loaded when looked up
        var found = Set<Int64>()
        for shard in cache.core.shards { shard.locked { for e in $0.all { found.formUnion(e.unverified) } } }
        return found
    }

    /// The file cached by an engine that stopped, damaged at `offset` (if any), opened by a new
    /// engine (a restart) with an origin of its own.
    private func restarted(damagedAt offset: Int64?) async throws -> (ScriptedSource, CacheEngine, EntryInfo) {
        try await cacheThenDamage(at: offset)
        let origin = source()
        let cache = try engine(origin)
        return (origin, cache, try await cache.open(url: url))
    }

    func testDamagedBytesAreFetchedAgainNotServed() async throws {
        let (origin, cache, info) = try await restarted(damagedAt: (1 << 20) + 12345)
        defer { cache.shutdown() }
        let before = origin.bytesServed
        let reader = cache.makeReader(for: info)
        let bytes = try await reader.read(offset: 0, length: size)
        reader.close()
        XCTAssertTrue(bytes == original, "every byte as the origin has it")
        XCTAssertEqual(cache.core.metrics.damagedBytes.total, 1 << 20, "the damaged extent was found")
        XCTAssertGreaterThanOrEqual(origin.bytesServed - before, 1 << 20, "its slice came from the origin again")
        XCTAssertLessThan(origin.bytesServed - before, 2 << 20, "the other slices were checked and served from disk")
        XCTAssertEqual(unverified(cache), [])
    }

    func testIntactBytesAreCheckedOnceThenServedFromDisk() async throws {
        try await cacheThenDamage(at: nil)
        let origin = source()
        let cache = try engine(origin)
        defer { cache.shutdown() }
        XCTAssertEqual(unverified(cache), [0, 1, 2], "from before the start: unchecked")
        let info = try await cache.open(url: url)
        let passthrough = cache.makeReader(for: info)
        defer { passthrough.close() }
        XCTAssertNil(passthrough.wholeFile(), "not handed to the kernel unchecked")
        let before = origin.bytesServed
        let cacheReader = cache.makeReader(for: info)
        let bytes = try await cacheReader.read(offset: 0, length: size)
        cacheReader.close()
        XCTAssertTrue(bytes == original)
        XCTAssertEqual(origin.bytesServed - before, 0, "all from disk")
        XCTAssertEqual(cache.core.metrics.damagedBytes.total, 0)
        XCTAssertEqual(unverified(cache), [])
        XCTAssertNotNil(passthrough.wholeFile(), "checked whole: passthrough may have it")
    }

    func testAReadChecksTheSlicesItsReaderComesToNext() async throws {
        let (origin, cache, info) = try await restarted(damagedAt: nil)
        defer { cache.shutdown() }
        let reader = cache.makeReader(for: info)
        let first = try await reader.read(offset: 0, length: 64 << 10)
        XCTAssertTrue(first[...] == original[0..<(64 << 10)])
        cache.core.pool.waitForJobs(key: EngineCore.verifyKey)
        XCTAssertEqual(unverified(cache), [], "slice 0 for the read, slices 1 and 2 ahead of it")
        let rest = try await reader.read(offset: 64 << 10, length: size)
        reader.close()
        XCTAssertTrue(rest[...] == original[(64 << 10)...])
        XCTAssertEqual(origin.bytesServed, 0, "all from disk")
    }

    func testDamageFoundAheadOfAReaderIsFetchedAgainWhenItGetsThere() async throws {
        let (origin, cache, info) = try await restarted(damagedAt: (2 << 20) + 4096)
        defer { cache.shutdown() }
        let before = origin.bytesServed
        let reader = cache.makeReader(for: info)
        _ = try await reader.read(offset: 0, length: 4096)
        cache.core.pool.waitForJobs(key: EngineCore.verifyKey)
        XCTAssertGreaterThan(cache.core.metrics.damagedBytes.total, 0, "found by the check ahead")
        XCTAssertEqual(origin.bytesServed - before, 0, "nothing fetched before the reader gets there")
        let bytes = try await reader.read(offset: 0, length: size)
        reader.close()
        XCTAssertTrue(bytes == original, "every byte as the origin has it")
        XCTAssertGreaterThanOrEqual(origin.bytesServed - before, 1 << 20, "the damaged slice came from the origin again")
    }

    func testTheScrubChecksSlicesNobodyReads() async throws {
        try await cacheThenDamage(at: 100)
        let cache = try engine(source())
        defer { cache.shutdown() }
        for _ in 0..<3 {
            cache.core.maintenance.scrubOne()
            cache.core.pool.waitForJobs(key: EngineCore.verifyKey)
        }
        XCTAssertEqual(unverified(cache), [])
        XCTAssertEqual(cache.core.metrics.damagedBytes.total, 256 << 10, "the extent the open's first bytes made")
        XCTAssertEqual(cache.status(url: url)?.cachedBytes, 2 << 20, "its whole slice is no longer cached")
    }
}
