import XCTest
@testable import CacheCore
import TestSupport

/// `--cache-max-age`: entries not read for that long lose their bytes, besides the size cap; an
/// entry a reader holds open keeps them however old its last read. Time comes from a test clock
/// the reads are stamped with and the sweep is given, so nothing here waits. (The engine's own
/// sweeper runs on the same clock; it may evict first, so the checks look at what is cached,
/// which is the same either way.)
final class MaxAgeTests: XCTestCase {
    private var dir: String!
    private let hour: TimeInterval = 3600

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-maxage-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// A clock that moves only when told to.
    private func engine(_ source: ScriptedSource, clock: MovableClock, maxAge: TimeInterval?) throws -> CacheEngine {
        var c = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20, readTimeout: 10, engineClock: .realTime)
        c.maxAge = maxAge
        c.clock = { clock.now }
        return try CacheEngine(configuration: c, source: source)
    }

    /// Reads all of `url` through a new reader and waits until every transfer has written its
    /// bytes (so no slice is pinned by a write any more). Returns the reader, still open.
    private func readAll(_ cache: CacheEngine, _ url: String, _ data: [UInt8]) async throws -> CacheReader {
        let reader = cache.makeReader(for: try await cache.open(url: url))
        let got = try await reader.read(offset: 0, length: data.count)
        XCTAssertTrue(got == data, "bytes of \(url)")
        waitForTransfers(cache.core)
        return reader
    }

    private func waitForTransfers(_ core: EngineCore) {
        core.activeSinks.wait(until: { $0 == 0 })
    }

    private func cachedBytes(_ cache: CacheEngine, _ url: String) -> Int64 { cache.status(url: url)?.cachedBytes ?? -1 }

    /// Bytes the data files hold on disk (punched slices hold none).
    private func allocatedBytes() -> Int64 {
        let data = dir + "/data"
        let files = ((try? FileManager.default.subpathsOfDirectory(atPath: data)) ?? []).filter { $0.hasSuffix(".data") }
        return files.reduce(0) { sum, f in
            var st = stat()
            return sum + (stat(data + "/" + f, &st) == 0 ? Int64(st.st_blocks) * 512 : 0)
        }
    }

    func testEntriesNotReadForMaxAgeLoseTheirBytesButOpenOnesKeepThem() async throws {
        let (a, b, c) = ("http://origin.test/a.mkv", "http://origin.test/b.mkv", "http://origin.test/c.mkv")
        let bytes = [a: randomBytes(2 << 20, seed: 1), b: randomBytes(2 << 20, seed: 2), c: randomBytes(1 << 20, seed: 3)]
        let source = ScriptedSource()
        for (url, data) in bytes { source.set(url, .init(bytes: data, etag: "\"\(url.count)\"")) }
        let clock = MovableClock(start: Date())
        let cache = try engine(source, clock: clock, maxAge: hour)
        defer { cache.shutdown() }

        // t = 0: a is read and closed; b is read and stays open (a paused player).
        try await readAll(cache, a, bytes[a]!).close()
        let openB = try await readAll(cache, b, bytes[b]!)
        // t = 30 min: c is read and closed.
        clock.advance(hour / 2)
        try await readAll(cache, c, bytes[c]!).close()
        cache.core.maintenance.evictExpired(now: clock.now)
        XCTAssertEqual(cache.usage.bytes, 5 << 20, "nothing is an hour old yet")

        // t = 61 min: a is past the age and goes; b is as old but open; c was read 31 min ago.
        clock.advance(hour / 2 + 60)
        cache.core.maintenance.evictExpired(now: clock.now)
        XCTAssertEqual(cachedBytes(cache, a), 0)
        XCTAssertEqual(cachedBytes(cache, b), 2 << 20, "an open entry keeps its bytes")
        XCTAssertEqual(cachedBytes(cache, c), 1 << 20)
        XCTAssertEqual(cache.usage.bytes, 3 << 20)
        XCTAssertEqual(allocatedBytes(), 3 << 20, "a's bytes are freed on disk")

        // b is closed: now its age counts.
        openB.close()
        cache.core.maintenance.evictExpired(now: clock.now)
        XCTAssertEqual(cachedBytes(cache, b), 0)

        // A new read of a is a miss that fetches it again, with the right bytes, and restarts its age.
        source.resetCounters()
        try await readAll(cache, a, bytes[a]!).close()
        XCTAssertEqual(source.bytesServed, 2 << 20)
        clock.advance(hour / 2)   // t = 91 min: c (read at 30) goes, a (read at 61) stays
        cache.core.maintenance.evictExpired(now: clock.now)
        XCTAssertEqual(cachedBytes(cache, a), 2 << 20)
        XCTAssertEqual(cachedBytes(cache, c), 0)
    }

    func testWithoutMaxAgeOnlyTheCapEvicts() async throws {
        let url = "http://origin.test/old.mkv"
        let data = randomBytes(1 << 20, seed: 9)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"x\""))
        let clock = MovableClock(start: Date())
        let cache = try engine(source, clock: clock, maxAge: nil)
        defer { cache.shutdown() }
        try await readAll(cache, url, data).close()
        clock.advance(365 * 86400)
        cache.core.maintenance.evictExpired(now: clock.now)
        XCTAssertEqual(cachedBytes(cache, url), 1 << 20)
    }
}
