import XCTest
@testable import CacheCore

/// `preload --pin`: pinned ranges stay through eviction pressure and restarts, and the total is
/// bounded by the pin limit (at most half the cap).
final class PinTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/media/film.mp4"
    private let other = "http://origin.test/media/other.mp4"
    private let slice: Int64 = 1 << 20

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-pin-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func engine(_ source: ScriptedSource, capacity: Int64 = 8 << 20) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: capacity, freeSpaceFloor: 0,
                                                          sliceSize: slice, readTimeout: 10),
                        source: source)
    }

    private func readAll(_ cache: CacheEngine, _ url: String, _ count: Int) async throws -> [UInt8] {
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        let bytes = try await reader.read(offset: 0, length: count)
        cache.core.writes.waitIdle()
        return bytes
    }

    func testPinnedHeadAndTailSurviveEvictionPressureAndARestart() async throws {
        let film = randomBytes(4 << 20, seed: 31), rest = randomBytes(6 << 20, seed: 32)
        let source = ScriptedSource()
        source.set(url, .init(bytes: film, etag: "\"f\""))
        source.set(other, .init(bytes: rest, etag: "\"o\""))
        var cache = try engine(source)
        _ = try await readAll(cache, url, film.count)
        let head = 0..<Int64(1 << 20), tail = Int64(3 << 20)..<Int64(4 << 20)
        XCTAssertEqual(try cache.pin(url: url, ranges: [head, tail], limit: cache.pinLimit), 2 << 20)
        XCTAssertEqual(cache.pinnedBytes, 2 << 20)
        cache.shutdown()

        // After a restart, the pins still hold: reading 6 MiB more into an 8 MiB cap evicts the
        // film's middle, never its head or tail.
        cache = try engine(source)
        XCTAssertEqual(cache.pinnedRanges(url: url), [head, tail])
        _ = try await readAll(cache, other, rest.count)
        XCTAssertEqual(cache.core.evictNow(bytes: 64 << 20) > 0, true)
        let kept = try XCTUnwrap(cache.status(url: url)).cachedRanges
        XCTAssertEqual(kept, [head, tail], "only the pinned slices are left")
        source.resetCounters()
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)
        let tailBytes = try await reader.read(offset: tail.lowerBound, length: Int(tail.count))
        XCTAssertEqual(tailBytes, Array(film[Int(tail.lowerBound)...]))
        reader.close()
        XCTAssertEqual(source.bytesServed, 0, "the tail came from the cache")

        // Unpinned, they go like any other bytes.
        XCTAssertEqual(try cache.unpin(url: url), 2 << 20)
        XCTAssertEqual(cache.pinnedBytes, 0)
        _ = cache.core.evictNow(bytes: 64 << 20)
        XCTAssertEqual(cache.status(url: url)?.cachedBytes ?? 0, 0)
        cache.shutdown()
        cache = try engine(source)
        XCTAssertEqual(cache.pinnedRanges(url: url), [], "the unpin was recorded")
        cache.shutdown()
    }

    /// `cache clear` releases the pins too: they outlived it, invisible in `cache ls` (no file
    /// left to show them on), and still refused the next pin past `--pin-max`.
    func testClearReleasesEveryPin() throws {
        var cache = try engine(ScriptedSource())
        XCTAssertNoThrow(try cache.pin(url: url, ranges: [0..<(3 << 20)], limit: cache.pinLimit))
        try cache.clear()
        XCTAssertEqual(cache.pinnedBytes, 0)
        XCTAssertNoThrow(try cache.pin(url: other, ranges: [0..<(3 << 20)], limit: 3 << 20), "the old pin no longer counts")
        cache.shutdown()
        cache = try engine(ScriptedSource())
        defer { cache.shutdown() }
        XCTAssertEqual(cache.pinnedRanges(url: url), [], "the release was recorded")
    }

    func testPinsPastTheLimitAreRefusedWithTheWayOut() throws {
        let cache = try engine(ScriptedSource())
        defer { cache.shutdown() }
        XCTAssertEqual(cache.pinLimit, 4 << 20, "half the cap")
        XCTAssertNoThrow(try cache.pin(url: url, ranges: [0..<(3 << 20)], limit: 100 << 20))
        XCTAssertThrowsError(try cache.pin(url: other, ranges: [0..<(2 << 20)], limit: 100 << 20)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("3145728 bytes are pinned already") && text.contains("cache unpin"), text)
        }
        XCTAssertThrowsError(try cache.pin(url: other, ranges: [0..<(1 << 20)], limit: 3 << 20))
        XCTAssertEqual(cache.pinnedBytes, 3 << 20, "a refused pin pins nothing")
        // Pinning what is pinned already costs nothing.
        XCTAssertEqual(try cache.pin(url: url, ranges: [0..<(1 << 20)], limit: 3 << 20), 0)
    }
}
