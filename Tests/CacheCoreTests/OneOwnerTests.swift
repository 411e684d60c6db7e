import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// Issue 36, item 4: one owner per cache directory. Daemon A ran; its cache directory was
/// removed; a second process B on the same path found no lock (its file had gone with the
/// directory), numbered its data files from 1 as A did, and A then opened B's files by path:
/// A served one file's bytes for another's. Now a second engine is refused while the first
/// runs (the owner lock lives outside the directory), and the first only ever opens files
/// through the directory it holds open.
final class OneOwnerTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/media/big4.bin"

    override func setUp() { dir = NSTemporaryDirectory() + "httpcachefs-owner-\(UUID().uuidString)" }
    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
        try? FileManager.default.removeItem(atPath: dir + ".old")
    }

    private func engine(_ source: ScriptedSource) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 64 << 20, freeSpaceFloor: 0,
                                                          sliceSize: 1 << 20, readTimeout: 10, engineClock: .realTime), source: source)
    }

    private func read(_ cache: CacheEngine, _ count: Int) async throws -> [UInt8] {
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        return try await reader.read(offset: 0, length: count)
    }

    func testASecondEngineOnADeletedDirectoryIsRefusedNamingTheFirst() throws {
        let first = try engine(ScriptedSource())
        try FileManager.default.removeItem(atPath: dir)
        XCTAssertThrowsError(try engine(ScriptedSource())) { error in
            guard case let .locked(path, holder) = error as? CacheError else { return XCTFail("\(error)") }
            XCTAssertEqual(path, dir)
            XCTAssertTrue(holder.hasPrefix("process \(getpid()) "), holder)
            XCTAssertTrue("\(error)".contains("is in use by process \(getpid())"), "\(error)")
        }
        first.shutdown()
        // Once the first let go, the path is free.
        let second = try engine(ScriptedSource())
        second.shutdown()
    }

    func testASecondEngineOnALiveDirectoryIsRefusedToo() throws {
        let first = try engine(ScriptedSource())
        defer { first.shutdown() }
        XCTAssertThrowsError(try engine(ScriptedSource())) { error in
            XCTAssertTrue("\(error)".contains("is in use by process \(getpid())"), "\(error)")
        }
    }

    /// The worst case the lock cannot rule out (another program, a restored backup): the
    /// directory is deleted and made again at the same path with a data file of the same name
    /// and length but other bytes. The running engine reads the right bytes, never those.
    func testADirectoryMadeAgainUnderTheEngineNeverHandsItAnotherCachesBytes() async throws {
        let film = randomBytes(3 << 20, seed: 41), other = randomBytes(3 << 20, seed: 42)
        let source = ScriptedSource()
        source.set(url, .init(bytes: film, etag: "\"4\""))
        let cache = try engine(source)
        defer { cache.shutdown() }
        let first = try await read(cache, film.count)
        XCTAssertEqual(first, film)
        cache.core.writes.waitIdle()
        cache.core.index.flush()
        let dataNames = try FileManager.default.subpathsOfDirectory(atPath: dir + "/data").filter { $0.hasSuffix(".data") }
        XCTAssertEqual(dataNames.count, 1)

        try FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir + "/data/" + (dataNames[0] as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/data/" + dataNames[0], contents: Data(other)))
        cache.core.idleFiles.removeAll()   // the next read opens its file

        // The read that finds its data file gone fails (as for any vanished data file), and its
        // bytes are forgotten; the next ones come from the origin. Never the other cache's.
        do {
            let again = try await read(cache, film.count)
            XCTAssertEqual(again, film, "never the other cache's bytes")
        } catch let error as CacheError {
            guard case .storage = error else { return XCTFail("\(error)") }
        }
        for _ in 0..<2 {
            let later = try await read(cache, film.count)
            XCTAssertEqual(later, film, "never the other cache's bytes")
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dir + "/data/" + dataNames[0])), Data(other),
                       "and nothing written into the other cache")
    }
}
