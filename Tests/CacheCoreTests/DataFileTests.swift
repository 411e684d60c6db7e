import XCTest
import GRDB
@testable import CacheCore
import TestSupport

/// The on-disk layout: one sparse data file per version of an entry; evicted slices are holes.
final class DataFileTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/media/video.mp4"
    private let slice: Int64 = 1 << 20

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-datafile-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func engine(_ source: ScriptedSource) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                                          sliceSize: slice, readTimeout: 10, engineClock: .realTime),
                        source: source)
    }

    private func dataFiles() -> [String] {
        let root = dir + "/data"
        return ((try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? [])
            .filter { $0.hasSuffix(".data") }.map { root + "/" + $0 }
    }

    /// Caches all of `data` and stops the engine; the one data file's path.
    private func cacheAll(_ data: [UInt8], _ source: ScriptedSource) async throws -> String {
        let cache = try engine(source)
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        cache.core.writes.waitIdle()
        cache.shutdown()
        let files = dataFiles()
        XCTAssertEqual(files.count, 1, "one file for the whole entry: \(files)")
        return try XCTUnwrap(files.first)
    }

    func testAnEntryIsOneFileWithItsBytesAtTheirOwnOffsets() async throws {
        let data = randomBytes(3 << 20 + 1000, seed: 21)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let path = try await cacheAll(data, source)
        XCTAssertEqual(FileManager.default.contents(atPath: path).map(Array.init), data)
    }

    /// A sequential reader's hits are all sent from the one descriptor it keeps open: the
    /// kernel's read-ahead on that descriptor is what brings cached bytes in ahead of it (nothing
    /// else asks the disk for them), so a read must not open the file anew and start it over.
    func testASequentialReaderSendsEveryHitFromTheOneDescriptorItKeepsOpen() async throws {
        let data = randomBytes(4 << 20, seed: 24)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        cache.core.writes.waitIdle()
        source.resetCounters()

        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        var descriptors: Set<Int32> = []
        var read: [UInt8] = []
        for offset in stride(from: 0, to: data.count, by: 128 << 10) {
            let lease = try await withCheckedThrowingContinuation { continuation in
                reader.lease(offset: Int64(offset), length: 128 << 10) { continuation.resume(with: $0) }
            }
            for piece in lease.pieces {
                guard case let .file(fd, _, _) = piece else { return XCTFail("a hit at \(offset) came from memory, not the data file") }
                descriptors.insert(fd)
            }
            read += try lease.bytes()
            lease.release()
        }
        XCTAssertEqual(read, data)
        XCTAssertEqual(descriptors.count, 1, "every hit from the reader's one open descriptor")
        XCTAssertEqual(source.bytesServed, 0, "all hits: nothing came from the origin")
    }

    /// The proxy makes a reader per request: a closed reader's descriptor is kept for the next
    /// reader of the same version (no `open` per request), and never outlives that version.
    func testAClosedReadersDescriptorServesTheNextReaderOfItsVersionOnly() async throws {
        let v1 = randomBytes(2 << 20, seed: 25), v2 = randomBytes(2 << 20, seed: 26)
        let source = ScriptedSource()
        source.set(url, .init(bytes: v1, etag: "\"v1\""))
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                                                     sliceSize: slice, revalidateAfter: 0, readTimeout: 10, engineClock: .realTime),
                                    source: source)
        defer { cache.shutdown() }
        let idle = cache.core.idleFiles
        var info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: v1.count)
        cache.core.writes.waitIdle()

        func readAndClose(_ info: EntryInfo) async throws -> [UInt8] {
            let reader = cache.makeReader(for: info)
            defer { reader.close() }
            return try await reader.read(offset: 0, length: 2 << 20)
        }
        let before = try await readAndClose(info)
        XCTAssertEqual(before, v1)
        XCTAssertEqual(idle.count, 1, "the closed reader's descriptor is kept")
        let again = try await readAndClose(info)
        XCTAssertEqual(again, v1)
        XCTAssertEqual(idle.count, 1, "the next reader took it and gave it back: still one")

        source.set(url, .init(bytes: v2, etag: "\"v2\""))
        info = try await cache.open(url: url)
        XCTAssertEqual(info.etag, "\"v2\"")
        XCTAssertEqual(idle.count, 0, "a new version drops the old one's descriptors")
        let changed = try await readAndClose(info)
        XCTAssertEqual(changed, v2, "never the old version's file")
        cache.core.writes.waitIdle()
        let hit = try await readAndClose(info)
        XCTAssertEqual(hit, v2)
        XCTAssertEqual(idle.count, 1)

        try await cache.remove(url: url)
        XCTAssertEqual(idle.count, 0, "a removed entry's descriptors are dropped")
        source.set(url, .init(bytes: v1, etag: "\"v1\""))
        info = try await cache.open(url: url)
        let fresh = try await readAndClose(info)
        XCTAssertEqual(fresh, v1, "the entry made anew reads its own file")
    }

    func testRowsOverAHoleAreDroppedAtStartAndTheBytesFetchedAgain() async throws {
        // A crash between an eviction's punch and its index commit leaves rows over a hole.
        let data = randomBytes(3 << 20, seed: 22)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let path = try await cacheAll(data, source)
        let fd = open(path, O_WRONLY)
        XCTAssertEqual(LinuxFileCalls.punchHole(fd, offset: slice, length: slice), 0, "punch slice 1")
        close(fd)

        source.resetCounters()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let status = try XCTUnwrap(cache.status(url: url))
        XCTAssertEqual(status.cachedRanges, [0..<slice, (2 * slice)..<(3 * slice)], "slice 1's rows are gone")
        let info = try await cache.open(url: url)
        let bytes = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        XCTAssertEqual(bytes, data, "the hole is fetched again, never served as zeros")
        XCTAssertEqual(Int64(source.bytesServed), slice, "only the hole's bytes came from the origin")
        XCTAssertEqual(cache.verify().problems, [])
    }

    func testSliceFilesOfTheOlderLayoutMoveIntoTheDataFile() async throws {
        let data = randomBytes(2 << 20 + 500, seed: 23)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let path = try await cacheAll(data, source)
        // Split the data file into the slice files the cache used to write.
        let name = (path as NSString).lastPathComponent.dropLast(".data".count)
        let bucket = (path as NSString).deletingLastPathComponent
        for s in 0..<3 {
            let part = Array(data[(s << 20)..<min(data.count, (s + 1) << 20)])
            _ = FileManager.default.createFile(atPath: bucket + "/\(name)-\(s).slice", contents: Data(part))
        }
        try FileManager.default.removeItem(atPath: path)
        // A cache from before: the start that moved its slice files in has not run yet.
        try forgetTheLayoutCheck()

        source.resetCounters()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try await cache.open(url: url)
        let bytes = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        XCTAssertEqual(bytes, data)
        XCTAssertEqual(source.bytesServed, 0, "the moved bytes were served from the cache")
        XCTAssertEqual(dataFiles(), [path], "the slice files are gone, the data file is back")
    }

    func testEvictionFreesTheSlicesBlocksAndKeepsTheRest() async throws {
        let data = randomBytes(4 << 20, seed: 24)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let path = try await cacheAll(data, source)
        let cache = try engine(source)
        defer { cache.shutdown() }
        XCTAssertEqual(Self.allocated(path), 4 << 20)
        XCTAssertGreaterThan(cache.core.evictor.evictNow(bytes: 2 << 20), 0)
        let left = try XCTUnwrap(cache.status(url: url)).cachedBytes
        XCTAssertLessThan(left, 4 << 20)
        XCTAssertEqual(Self.allocated(path), left, "the disk holds exactly what the index lists")
        let info = try await cache.open(url: url)
        let bytes = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        XCTAssertEqual(bytes, data)
    }

    func testACacheDirectoryThatCannotPunchHolesIsRefusedWithItsReason() throws {
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        let held = try HeldDirectory(path: dir)
        XCTAssertNoThrow(try DataFiles.checkHolePunching(in: held), "this file system punches holes")
        let unsupported: (Int32, Int64, Int64) -> Int32 = { _, _, _ in errno = EOPNOTSUPP; return -1 }
        XCTAssertThrowsError(try DataFiles.checkHolePunching(in: held, punch: unsupported)) { error in
            XCTAssertTrue("\(error)".contains("cannot punch holes"), "\(error)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir + "/data"), [], "the probe is gone")
    }

    private static func allocated(_ path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_blocks) * 512 : -1
    }

    /// Forgets that the start looked for slice files of the older layout (`CacheIndex.layoutChecked`).
    private func forgetTheLayoutCheck() throws {
        let db = try DatabaseQueue(path: dir + "/index.sqlite")
        try db.write { try $0.execute(sql: "DELETE FROM meta WHERE name = 'layout_checked'") }
        try db.close()
    }
}
