import XCTest
@testable import CacheCore
import TestSupport

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
                                                          sliceSize: slice, readTimeout: 10, engineClock: .realTime),
                        source: source)
    }

    private func readAll(_ cache: CacheEngine, _ url: String, _ count: Int) async throws -> [UInt8] {
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        let bytes = try await reader.read(offset: 0, length: count)
        // The read is answered from the arriving bytes; the transfer's last batch goes to the
        // writer only once its source drained: wait for the transfers to end, then the writer.
        cache.core.activeSinks.wait(until: { $0 == 0 })
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
        XCTAssertEqual(cache.core.evictor.evictNow(bytes: 64 << 20) > 0, true)
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
        _ = cache.core.evictor.evictNow(bytes: 64 << 20)
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

    /// Issue 36, item 6: pins were counted in requested bytes while eviction keeps whole
    /// slices: `--head 1 --tail 1 --pin` over 10 files "pinned 20 bytes" and kept 60 MiB under
    /// a 64 MiB cap. They now count the slices they keep (up to the file's end), against the limit.
    func testPinsCountTheSlicesTheyKeepAndAreRefusedPastTheLimitInThem() async throws {
        let source = ScriptedSource()
        let files = (0..<3).map { "http://origin.test/media/film\($0).mp4" }
        for (i, u) in files.enumerated() { source.set(u, .init(bytes: randomBytes(3 << 20, seed: UInt64(50 + i)), etag: "\"\(i)\"")) }
        let small = "http://origin.test/media/poster.jpg"
        source.set(small, .init(bytes: randomBytes(100_000, seed: 59), etag: "\"p\""))
        let cache = try engine(source)
        defer { cache.shutdown() }
        for u in files + [small] { _ = try await readAll(cache, u, u == small ? 100_000 : 3 << 20) }
        let last = Int64(3 << 20)
        // One byte at each end keeps two slices: 2 MiB, not 2 bytes.
        XCTAssertEqual(try cache.pin(url: files[0], ranges: [0..<1, (last - 1)..<last], limit: cache.pinLimit), 2 << 20)
        XCTAssertEqual(cache.pinnedBytes, 2 << 20)
        XCTAssertEqual(cache.pinnedBytes(url: files[0]), 2 << 20)
        // A small file's pin keeps the file, not a whole slice.
        XCTAssertEqual(try cache.pin(url: small, ranges: [0..<1], limit: cache.pinLimit), 100_000)
        // Two bytes in one slice keep it once.
        XCTAssertEqual(try cache.pin(url: files[1], ranges: [0..<1, 10..<11], limit: cache.pinLimit), 1 << 20)
        XCTAssertEqual(cache.pinnedBytes, (3 << 20) + 100_000)
        // The limit (4 MiB, half the cap) is checked in kept bytes: two more slices do not fit.
        XCTAssertThrowsError(try cache.pin(url: files[2], ranges: [0..<1, (last - 1)..<last], limit: cache.pinLimit)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("cannot pin 2097152 more bytes") && text.contains("whole slices of 1048576 bytes"), text)
        }
        XCTAssertEqual(cache.pinnedBytes, (3 << 20) + 100_000, "a refused pin pins nothing")

        // The cap holds: with everything else evicted, what is left is at most what the pins
        // keep (a pinned slice evicted before its pin is not fetched by it).
        _ = cache.core.evictor.evictNow(bytes: 64 << 20)
        let kept = cache.list().reduce(Int64(0)) { $0 + $1.cachedBytes }
        XCTAssertLessThanOrEqual(kept, cache.pinnedBytes)
        XCTAssertEqual(cache.status(url: small)?.cachedBytes, 100_000)
        XCTAssertEqual(cache.status(url: files[2])?.cachedBytes ?? 0, 0)
    }

    /// `cache rm` of a pinned file left its pin counted (and its slices kept once fetched again).
    func testRemovingAFileReleasesItsPins() async throws {
        let film = randomBytes(2 << 20, seed: 61)
        let source = ScriptedSource()
        source.set(url, .init(bytes: film, etag: "\"f\""))
        var cache = try engine(source)
        _ = try await readAll(cache, url, film.count)
        try cache.pin(url: url, ranges: [0..<1], limit: cache.pinLimit)
        // Pinned before it was ever cached: `cache rm` releases it, and is no error.
        try cache.pin(url: other, ranges: [0..<1], limit: cache.pinLimit)
        XCTAssertEqual(cache.pinnedBytes, 2 << 20)
        try await cache.remove(url: url)
        try await cache.remove(url: other)
        XCTAssertEqual(cache.pinnedBytes, 0)
        XCTAssertEqual(cache.pinnedRanges(url: url), [])
        do {
            try await cache.remove(url: other)
            XCTFail("neither cached nor pinned: not found")
        } catch let error as CacheError {
            guard case .notFound = error else { return XCTFail("\(error)") }
        }
        cache.shutdown()
        cache = try engine(source)
        defer { cache.shutdown() }
        XCTAssertEqual(cache.pinnedRanges(url: url), [], "the release was recorded")
        XCTAssertEqual(cache.pinnedBytes, 0)
    }

    /// Pins made under a larger cap ("60.0 MiB of 16.0 MiB used, 20 B pinned" after a restart
    /// with `--cache-size 16M`): at start, pins past half the cap are released until they fit.
    func testPinsPastHalfASmallerCapAreReleasedAtStart() throws {
        var cache = try engine(ScriptedSource(), capacity: 16 << 20)
        try cache.pin(url: url, ranges: [0..<(4 << 20)], limit: cache.pinLimit)
        try cache.pin(url: other, ranges: [0..<(3 << 20)], limit: cache.pinLimit)
        XCTAssertEqual(cache.pinnedBytes, 7 << 20)
        cache.shutdown()
        cache = try engine(ScriptedSource(), capacity: 8 << 20)
        defer { cache.shutdown() }
        XCTAssertLessThanOrEqual(cache.pinnedBytes, cache.pinLimit)
        XCTAssertEqual(cache.pinnedRanges(url: url), [0..<(4 << 20)], "whole files are released, the rest kept")
        XCTAssertEqual(cache.pinnedRanges(url: other), [])
    }

    /// What a set of pinned ranges keeps, as a table: whole slices, each slice once, the last
    /// one cut at the file's end when it is known.
    func testWhatPinsKeepIsTheirWholeSlices() {
        let m: Int64 = 1 << 20
        let rows: [(ranges: [Range<Int64>], length: Int64?, held: Int64)] = [
            ([], nil, 0),
            ([0..<1], nil, m),
            ([0..<1], 300_000, 300_000),                         // a small file: the file
            ([0..<1, 10..<11], nil, m),                          // one slice, counted once
            ([0..<1, (m - 1)..<(m + 1)], nil, 2 * m),            // a range across a boundary
            ([0..<1, (5 * m - 1)..<(5 * m)], 5 * m, 2 * m),      // head and tail of 5 MiB
            ([0..<1, (5 * m)..<(5 * m + 10)], 5 * m + 10, m + 10), // a tail in a short last slice
            ([(3 * m)..<(3 * m + 1)], 2 * m, 0),                 // past the end of a shorter version
        ]
        for row in rows {
            XCTAssertEqual(PinTable.held(RangeSet(row.ranges), sliceSize: m, length: row.length), row.held, "\(row)")
        }
    }
}
