import XCTest
@testable import CacheCore
import TestSupport

final class CacheEngineTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/media/video.mp4"

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-core-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Blocks until no fetch sink is running (a condition wait: not from an async context's own lock).
    private static func waitUntilSinksAreIdle(_ core: EngineCore) {
        core.activeSinks.wait(until: { $0 == 0 })
    }

    private func engine(_ source: ScriptedSource, capacity: Int64 = 1 << 30, slice: Int64 = 1 << 20) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: capacity, freeSpaceFloor: 0,
                                                          sliceSize: slice, readTimeout: 10, engineClock: .realTime),
                        source: source)
    }

    func testColdThenWarmReadIsByteExactAndFetchesOnce() async throws {
        let data = randomBytes(3 << 20, seed: 1)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try engine(source)
        let info = try await cache.open(url: url)
        XCTAssertEqual(info.length, Int64(data.count))
        let reader = cache.makeReader(for: info)
        let cold = try await reader.read(offset: 1000, length: 500_000)
        XCTAssertEqual(cold, Array(data[1000..<501_000]))
        // The cold read's read-ahead may still be running: what counts is that the warm read
        // asks the origin for none of its bytes.
        let requestsAfterCold = source.requestLog.count
        let warm = try await cache.makeReader(for: info).read(offset: 1000, length: 500_000)
        XCTAssertEqual(warm, cold)
        let asked = source.requestLog.dropFirst(requestsAfterCold).filter { ($0.start..<($0.end ?? .max)).overlaps(1000..<501_000) }
        XCTAssertEqual(asked, [], "cached bytes are never fetched twice")
        reader.close()
        cache.shutdown()
    }

    func testHitsAndLastAccessReachTheIndexWithoutAFetch() async throws {
        let data = randomBytes(1 << 20, seed: 11)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        let core = cache.core
        Self.waitUntilSinksAreIdle(core)   // the fetch wrote its row

        // Pure hits change nothing a fetch would write: the sweeper's pass hands them over.
        _ = try await cache.makeReader(for: info).read(offset: 0, length: 4096)
        _ = try await cache.makeReader(for: info).read(offset: 4096, length: 4096)
        core.maintenance.writeReadStats()
        core.index.flush()
        let row = try XCTUnwrap(CacheSnapshot(configuration: cache.configuration).status(url: url))
        XCTAssertEqual(row.hits, 2)
        XCTAssertEqual(row.lastAccess.timeIntervalSince1970, cache.status(url: url)?.lastAccess.timeIntervalSince1970 ?? -1,
                       accuracy: 0.001)
    }

    func testConcurrentReadersOfOneColdRangeCauseOneDownload() async throws {
        let data = randomBytes(4 << 20, seed: 3)
        let source = ScriptedSource(chunk: 4096)
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try engine(source)
        let info = try await cache.open(url: url)
        source.resetCounters()
        try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let r = cache.makeReader(for: info)
                    defer { r.close() }
                    return try await r.read(offset: 1 << 20, length: 2 << 20)
                }
            }
            for try await bytes in group { XCTAssertEqual(bytes, Array(data[(1 << 20)..<(3 << 20)])) }
        }
        let ratio = Double(source.bytesServed) / Double(data.count)
        XCTAssertLessThanOrEqual(ratio, 1.0, "origin bytes over file size: \(ratio)")
        cache.shutdown()
    }

    func testCachedBytesSurviveARestart() async throws {
        let data = randomBytes(2 << 20, seed: 4)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        var cache = try engine(source)
        var info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        cache.shutdown()
        source.resetCounters()
        cache = try engine(source)
        info = try await cache.open(url: url)
        let bytes = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        XCTAssertEqual(bytes, data)
        XCTAssertEqual(source.bytesServed, 0)
        XCTAssertEqual(cache.verify().problems, [])
        cache.shutdown()
    }

    func testAChangedRemoteFileGetsANewGenerationAndNeverMixes() async throws {
        let v1 = randomBytes(2 << 20, seed: 5), v2 = randomBytes(2 << 20, seed: 6)
        let source = ScriptedSource()
        source.set(url, .init(bytes: v1, etag: "\"v1\""))
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, sliceSize: 1 << 20,
                                                                     revalidateAfter: 0, readTimeout: 10, engineClock: .realTime), source: source)
        let info1 = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info1).read(offset: 0, length: 1 << 20)
        source.set(url, .init(bytes: v2, etag: "\"v2\""))
        let info2 = try await cache.open(url: url)
        XCTAssertEqual(info2.etag, "\"v2\"")
        XCTAssertGreaterThan(info2.generation, info1.generation)
        let all = try await cache.makeReader(for: info2).read(offset: 0, length: v2.count)
        XCTAssertEqual(all, v2)
        cache.shutdown()
    }

    func testAReaderOfARemovedEntryNeverReadsTheEntryMadeAfterIt() async throws {
        // `cache rm` while a file is open, and the remote file changes before it is opened again:
        // the old reader must not take the new entry (same URL, made anew) for its version.
        let v1 = randomBytes(2 << 20, seed: 7), v2 = randomBytes(2 << 20, seed: 8)
        let source = ScriptedSource()
        source.set(url, .init(bytes: v1, etag: "\"v1\""))
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info1 = try await cache.open(url: url)
        let old = cache.makeReader(for: info1)
        let first = try await old.read(offset: 0, length: 1000)
        XCTAssertEqual(first, Array(v1[0..<1000]))
        try await cache.remove(url: url)
        source.set(url, .init(bytes: v2, etag: "\"v2\""))
        let info2 = try await cache.open(url: url)
        XCTAssertNotEqual(info2.generation, info1.generation, "a new entry is a new version for every reader")
        let all = try await cache.makeReader(for: info2).read(offset: 0, length: v2.count)
        XCTAssertEqual(all, v2)
        do {
            let bytes = try await old.read(offset: 1 << 20, length: 1000)
            XCTFail("the old reader got \(bytes == Array(v2[(1 << 20)..<((1 << 20) + 1000)]) ? "the new version's" : "some") bytes")
        } catch {
            // Refused: its version is gone.
        }
    }

    func testNotFoundIsATypedErrorAndCachesNothing() async throws {
        let source = ScriptedSource()
        let cache = try engine(source)
        do {
            _ = try await cache.open(url: url)
            XCTFail("expected an error")
        } catch let e as CacheError {
            XCTAssertEqual(e, .notFound(url: url, status: 404))
        }
        XCTAssertNil(cache.status(url: url))
        XCTAssertEqual(cache.list().count, 0)
        cache.shutdown()
    }

    func testServerIgnoringRangesStillServesTheRightBytes() async throws {
        let data = randomBytes(3 << 20, seed: 7)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\"", ignoresRanges: true))
        let cache = try engine(source)
        let info = try await cache.open(url: url)
        let bytes = try await cache.makeReader(for: info).read(offset: 2 << 20, length: 4096)
        XCTAssertEqual(bytes, Array(data[(2 << 20)..<((2 << 20) + 4096)]))
        cache.shutdown()
    }

    func testAnOriginThatIgnoresRangesIsStreamedOnceForAllReaders() async throws {
        let data = randomBytes(4 << 20, seed: 17)
        let source = ScriptedSource(chunk: 64 << 10, chunkDelay: 20_000)   // about 3 MB/s: readers far ahead do not wait for it
        source.set(url, .init(bytes: data, etag: "\"a\"", ignoresRanges: true))
        let cache = try engine(source)
        let info = try await cache.open(url: url)
        try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for i in 0..<8 {
                group.addTask {
                    let r = cache.makeReader(for: info)
                    defer { r.close() }
                    return (i, try await r.read(offset: Int64(i) * (512 << 10), length: 64 << 10))
                }
            }
            for try await (i, bytes) in group {
                XCTAssertEqual(bytes, Array(data[(i * (512 << 10))..<(i * (512 << 10) + (64 << 10))]))
            }
        }
        XCTAssertLessThanOrEqual(source.bytesServed, Int64(data.count),
                                 "one whole-body transfer at a time feeds every reader")
        cache.shutdown()
    }

    func testReadsAreAnsweredEvenWhenNothingCanBeCached() async throws {
        let data = randomBytes(3 << 20, seed: 21)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try engine(source, capacity: 0)   // no room at all: nothing may be written
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)
        for offset in stride(from: 0, to: data.count, by: 700_000) {
            let got = try await reader.read(offset: Int64(offset), length: 300_000)
            XCTAssertEqual(got, Array(data[offset..<min(data.count, offset + 300_000)]), "bytes at \(offset)")
        }
        XCTAssertEqual(cache.usage.bytes, 0, "nothing was cached")
        XCTAssertTrue(cache.status(url: url)?.recentErrors.contains { $0.contains("not cached") } ?? false)
        reader.close()
        cache.shutdown()
    }

    func testTheCapHolds() async throws {
        let source = ScriptedSource()
        let cache = try engine(source, capacity: 4 << 20, slice: 1 << 20)
        for i in 0..<6 {
            let u = "http://origin.test/f\(i).bin"
            let d = randomBytes(2 << 20, seed: UInt64(10 + i))
            source.set(u, .init(bytes: d, etag: "\"\(i)\""))
            let info = try await cache.open(url: u)
            let r = cache.makeReader(for: info)
            let got = try await r.read(offset: 0, length: d.count)
            XCTAssertEqual(got, d)
            r.close()
        }
        XCTAssertLessThanOrEqual(cache.usage.bytes, (4 << 20) + (2 << 20), "cap plus in-flight slices")
        XCTAssertEqual(cache.verify().problems, [])
        cache.shutdown()
    }

    func testVerifyFindsAndDropsCorruptedBytes() async throws {
        let data = randomBytes(1 << 20, seed: 8)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try engine(source)
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        // The read may be answered from the arriving bytes before the transfer's last batch is
        // queued for the writer: wait until all of it is on disk, not only for the writer's queue.
        XCTAssertTrue(cache.waitUntilCached(url: url, bytes: Int64(data.count)), "all of it cached")
        cache.core.writes.waitIdle()
        // Flip a byte in the slice file behind the cache's back.
        let sub = try FileManager.default.contentsOfDirectory(atPath: dir + "/data").first!
        let file = try FileManager.default.contentsOfDirectory(atPath: dir + "/data/" + sub).first!
        let h = FileHandle(forUpdatingAtPath: dir + "/data/" + sub + "/" + file)!
        h.seek(toFileOffset: 100)
        h.write(Data([~data[100]]))
        h.closeFile()
        let report = cache.verify()
        XCTAssertEqual(report.problems.count, 1)
        source.resetCounters()
        let again = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        XCTAssertEqual(again, data, "dropped bytes are fetched again, never served wrong")
        XCTAssertGreaterThan(source.bytesServed, 0)
        cache.shutdown()
    }

    func testASecondProcessIsToldWhoHoldsTheCache() throws {
        let cache = try engine(ScriptedSource())
        XCTAssertThrowsError(try engine(ScriptedSource())) { error in
            guard case .locked = error as? CacheError else { return XCTFail("\(error)") }
        }
        cache.shutdown()
    }
}
