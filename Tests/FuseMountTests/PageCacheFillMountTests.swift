@testable import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Cached bytes put into the kernel's page cache ahead of a sequential reader, through a real
/// mount without passthrough: the bytes are exact, and a file changed remotely never shows
/// what was put there for its old version.
final class PageCacheFillMountTests: XCTestCase {
    static func expected(_ seed: UInt64, _ count: Int64) -> [UInt8] {
        OriginServer.generatedBytes(seed: seed, offset: 0, count: Int(count))
    }

    private func mount(files: [String: (length: Int64, seed: UInt64)], revalidateAfter: TimeInterval? = nil) throws -> EngineMount {
        var options = MountOptions(readDeadline: nil)
        options.passthrough = false
        options.pageCacheFill = 4 << 20
        return try EngineMount(tree: { o in try treeFromList(files.keys.sorted().map { "\($0) = \(o.url("/" + $0))" }.joined(separator: "\n")) },
                               cache: { if let revalidateAfter { $0.revalidateAfter = revalidateAfter } },
                               options: options,
                               setup: { o in for (name, f) in files { o.setGeneratedFile("/" + name, length: f.length, seed: f.seed) } })
    }

    private func waitUntilCached(_ m: EngineMount, _ name: String, _ length: Int64) {
        XCTAssertTrue(m.engine.waitUntilCached(url: m.origin.url("/" + name), bytes: length), "\(name) cached")
    }

    /// Drops the kernel's copy of the file, as memory pressure would.
    private func dropPageCache(_ path: String) throws {
        let fd = try POSIX.open(path)
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
    }

    private func stored(_ m: EngineMount) -> Int64 { m.mount.fs.session.storedBytes.withLock { $0 } }

    func testAReaderOfACachedFileFindsItsBytesInThePageCacheExactly() throws {
        let length: Int64 = 24 << 20
        let m = try mount(files: ["v.bin": (length, 41)])
        defer { m.stop() }
        XCTAssertTrue(try withinBound(120, "cold read") { try POSIX.readAll(m.path("v.bin")) } == Self.expected(41, length))
        waitUntilCached(m, "v.bin", length)
        try dropPageCache(m.path("v.bin"))
        m.origin.resetLog()
        let before = stored(m)
        // The kernel's read-ahead of a user's daemon: 128 KiB reads.
        let bytes = try withinBound(120, "warm read") { try POSIX.readAll(m.path("v.bin"), chunk: 128 << 10) }
        XCTAssertTrue(bytes == Self.expected(41, length), "bytes differ from the origin's")
        XCTAssertGreaterThan(stored(m), before, "bytes went into the page cache ahead of the reader")
        XCTAssertEqual(m.origin.bytesServed(path: "/v.bin"), 0, "all from the cache")
    }

    func testAFileChangedRemotelyNeverShowsWhatWasPutThereForTheOldVersion() throws {
        let length: Int64 = 12 << 20
        let m = try mount(files: ["v.bin": (length, 50)], revalidateAfter: 0)
        defer { m.stop() }
        for version: UInt64 in 50...53 {
            m.origin.setGeneratedFile("/v.bin", length: length, seed: version)
            XCTAssertTrue(try withinBound(120, "first read of \(version)") { try POSIX.readAll(m.path("v.bin")) } == Self.expected(version, length),
                          "version \(version) on its first open")
            waitUntilCached(m, "v.bin", length)
            let before = stored(m)
            // Read again from the cache, the page cache dropped: filled ahead of the reader.
            try dropPageCache(m.path("v.bin"))
            XCTAssertTrue(try withinBound(120, "second read of \(version)") { try POSIX.readAll(m.path("v.bin"), chunk: 128 << 10) } == Self.expected(version, length),
                          "version \(version) from the cache")
            XCTAssertGreaterThan(stored(m), before, "version \(version) was put into the page cache")
        }
    }

    func testAnOldVersionsReaderFillingWhileTheNewVersionOpensNeverLeaksIntoIt() throws {
        let length: Int64 = 16 << 20
        let m = try mount(files: ["v.bin": (length, 60)], revalidateAfter: 0)
        defer { m.stop() }
        XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == Self.expected(60, length))
        waitUntilCached(m, "v.bin", length)
        try dropPageCache(m.path("v.bin"))
        // An old handle reads on in order (each of its reads fills ahead of it) ...
        let old = try POSIX.open(m.path("v.bin"))
        defer { close(old) }
        for i in 0..<4 { _ = try POSIX.pread(old, offset: Int64(i) << 17, count: 128 << 10) }
        // ... while the file changes and a new open reads the new version whole.
        m.origin.setGeneratedFile("/v.bin", length: length, seed: 61)
        let reading = DispatchGroup()
        DispatchQueue.global().async(group: reading) {
            var at: Int64 = 4 << 17
            while at < length, (try? POSIX.pread(old, offset: at, count: 128 << 10)) != nil { at += 128 << 10 }
        }
        let bytes = try withinBound(120, "the new version") { try POSIX.readAll(m.path("v.bin"), chunk: 128 << 10) }
        XCTAssertTrue(bytes == Self.expected(61, length), "the new open shows the new version only")
        XCTAssertEqual(reading.wait(timeout: .now() + 120), .success)
        let again = try withinBound(120, "the new version again") { try POSIX.readAll(m.path("v.bin"), chunk: 128 << 10) }
        XCTAssertTrue(again == Self.expected(61, length), "and so does the next one")
    }

    func testManyReadersOfCachedFilesAtOnceAllFinishExactly() throws {
        // Stores wait for pages the kernel locked for reads in flight: they must never hold up
        // the threads that answer those reads.
        let count = 6, length: Int64 = 8 << 20
        var files: [String: (length: Int64, seed: UInt64)] = [:]
        for i in 0..<count { files["f\(i).bin"] = (length, 70 + UInt64(i)) }
        let m = try mount(files: files)
        defer { m.stop() }
        for i in 0..<count {
            XCTAssertTrue(try POSIX.readAll(m.path("f\(i).bin")) == Self.expected(70 + UInt64(i), length))
            waitUntilCached(m, "f\(i).bin", length)
            try dropPageCache(m.path("f\(i).bin"))
        }
        let results = Locked<[Int: Bool]>([:])
        try withinBound(120, "\(count) readers at once") {
            DispatchQueue.concurrentPerform(iterations: count) { i in
                let ok = (try? POSIX.readAll(m.path("f\(i).bin"), chunk: 128 << 10)) == Self.expected(70 + UInt64(i), length)
                results.mutate { $0[i] = ok }
            }
        }
        XCTAssertEqual(results.value, Dictionary(uniqueKeysWithValues: (0..<count).map { ($0, true) }))
    }
}
