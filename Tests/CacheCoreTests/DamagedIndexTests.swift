import Foundation
import GRDB
import Logging
import TestSupport
import XCTest
@testable import CacheCore

/// One overwritten page of `index.sqlite` used to lock the user out of the cache; now the index
/// is set aside and the cache starts empty.
final class DamagedIndexTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/film.mp4"
    private let data = randomBytes(300_000, seed: 9)

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-damaged-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func engine(_ source: ScriptedSource = ScriptedSource(), log: RecordedLog? = nil) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, sliceSize: 1 << 20, engineClock: .realTime),
                        source: source, logger: log?.logger ?? Logger(label: "test"))
    }

    /// Caches the file, stops cleanly (everything in `index.sqlite`, nothing in the WAL), then
    /// overwrites the index's second page with garbage.
    private func cacheThenDamageTheIndex() async throws {
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"f\""))
        let cache = try engine(source)
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        cache.core.writes.waitIdle()
        cache.shutdown()
        let fd = open(dir + "/index.sqlite", O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let garbage = [UInt8](repeating: 0xA5, count: 4096)
        XCTAssertEqual(garbage.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 4096) }, 4096)
        close(fd)
    }

    /// The page that holds the root of the extent table (read nowhere at start after a clean stop).
    private func extentRootPage() throws -> Int {
        var c = Configuration()
        c.readonly = true
        let queue = try DatabaseQueue(path: dir + "/index.sqlite", configuration: c)
        defer { try? queue.close() }
        return try queue.read { db in try Int.fetchOne(db, sql: "SELECT rootpage FROM sqlite_master WHERE name = 'extent'") } ?? 0
    }

    private func setAside() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasPrefix("index.sqlite.damaged-") }
    }

    func testADamagedIndexIsSetAsideAndTheCacheStartsEmpty() async throws {
        try await cacheThenDamageTheIndex()
        let log = RecordedLog()
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"f\""))
        let cache = try engine(source, log: log)
        defer { cache.shutdown() }
        XCTAssertTrue(log.lines.contains { $0.hasPrefix("warning the cache index is damaged") }, log.lines.joined(separator: "\n"))
        XCTAssertEqual(setAside().count, 1, "the damaged index is kept for a post-mortem")
        XCTAssertEqual(cache.list().count, 0)
        cache.core.cleanedUpAfterStart.wait(until: { $0 })   // files no row describes go in the background
        let files = try FileManager.default.subpathsOfDirectory(atPath: dir + "/data").filter { $0.hasSuffix(".data") }
        XCTAssertEqual(files, [], "the data files of the lost index are orphans")
        // The cache works again: the file is fetched anew, and verify and clear run.
        let info = try await cache.open(url: url)
        let bytes = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        XCTAssertEqual(bytes, data)
        XCTAssertEqual(cache.verify().problems, [])
    }

    /// A damage no write made (the file as its clean close left it, stamp and all: a bad sector)
    /// in a table the start does not read: the start skips the full check for such an index, the
    /// check after the start finds it, and the next start sets the index aside.
    func testADamageTheCleanStampCannotSeeIsFoundAfterTheStartAndSetAsideAtTheNext() async throws {
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"f\""))
        var cache = try engine(source)
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        cache.core.writes.waitIdle()
        cache.shutdown()
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/index.clean"), "a clean stop leaves its stamp")
        let root = try extentRootPage()
        XCTAssertGreaterThan(root, 2)
        let fd = open(dir + "/index.sqlite", O_WRONLY)
        let garbage = [UInt8](repeating: 0xA5, count: 4096)
        XCTAssertEqual(garbage.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t((root - 1) * 4096)) }, 4096)
        close(fd)
        CleanStopStamp.write(indexPath: dir + "/index.sqlite", held: nil)   // the stamp as if nothing wrote the file

        let log = RecordedLog()
        cache = try engine(source, log: log)
        XCTAssertEqual(setAside(), [], "not checked in full at start")
        cache.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertTrue(log.lines.contains { $0.hasPrefix("error the cache index is damaged; it is set aside at the next start") },
                      log.lines.joined(separator: "\n"))
        cache.shutdown()
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/index.clean"), "no stamp once a damage was found")

        cache = try engine(source, log: log)
        defer { cache.shutdown() }
        XCTAssertEqual(setAside().filter { !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.count, 1, "set aside at the next start")
        XCTAssertEqual(cache.list().count, 0)
    }

    func testVerifyAndClearWorkOnADamagedCache() async throws {
        try await cacheThenDamageTheIndex()
        let cache = try engine()
        defer { cache.shutdown() }
        XCTAssertEqual(cache.verify().problems, [])
        XCTAssertNoThrow(try cache.clear())
        XCTAssertEqual(cache.list().count, 0)
    }
}
