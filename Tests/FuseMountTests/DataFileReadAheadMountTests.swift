@testable import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// A cached file's data file read from the disk ahead of a sequential reader, through a real
/// mount without passthrough: the reader gets its bytes exactly, from the cache alone.
final class DataFileReadAheadMountTests: XCTestCase {
    func testAWarmReaderWithoutPassthroughHasItsDataFileReadAheadAndItsBytesExact() throws {
        let length: Int64 = 48 << 20
        var options = MountOptions(readDeadline: nil)
        options.passthrough = false
        XCTAssertEqual(options.dataFileReadAhead, 32 << 20, "on by default")
        let m = try EngineMount(tree: { o in try treeFromList("v.bin = \(o.url("/v.bin"))") }, options: options,
                                setup: { o in o.setGeneratedFile("/v.bin", length: length, seed: 77) })
        defer { m.stop() }
        let expected = OriginServer.generatedBytes(seed: 77, offset: 0, count: Int(length))
        XCTAssertTrue(try withinBound(120, "cold read") { try POSIX.readAll(m.path("v.bin")) } == expected)
        XCTAssertTrue(m.engine.waitUntilCached(url: m.origin.url("/v.bin"), bytes: length), "v.bin cached")
        // The kernel's copy dropped, as memory pressure would: every read comes to the daemon.
        let fd = try POSIX.open(m.path("v.bin"))
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
        m.origin.resetLog()
        let before = m.mount.fs.session.readAheadBytes.withLock { $0 }
        let bytes = try withinBound(120, "warm read") { try POSIX.readAll(m.path("v.bin"), chunk: 128 << 10) }
        XCTAssertTrue(bytes == expected, "bytes differ from the origin's")
        XCTAssertGreaterThan(m.mount.fs.session.readAheadBytes.withLock { $0 }, before, "the data file was read ahead of the reader")
        XCTAssertEqual(m.origin.bytesServed(path: "/v.bin"), 0, "all from the cache")
    }

    func testWithMoreFilesOpenThanItReadsAheadForNothingIsReadAheadAndTheBytesStayExact() throws {
        let length: Int64 = 24 << 20
        var options = MountOptions(readDeadline: nil)
        options.passthrough = false
        let names = ["a.bin", "b.bin", "c.bin"]
        XCTAssertGreaterThan(names.count, FileSystemCore.filesReadAhead)
        let m = try EngineMount(tree: { o in try treeFromList(names.map { "\($0) = \(o.url("/" + $0))" }.joined(separator: "\n")) },
                                options: options,
                                setup: { o in for (i, n) in names.enumerated() { o.setGeneratedFile("/" + n, length: length, seed: 80 + UInt64(i)) } })
        defer { m.stop() }
        for n in names {
            _ = try withinBound(120, "cold read of \(n)") { try POSIX.readAll(m.path(n)) }
            XCTAssertTrue(m.engine.waitUntilCached(url: m.origin.url("/" + n), bytes: length), "\(n) cached")
        }
        // Two other files held open while the first is read again, its page cache dropped.
        let held = try names.dropFirst().map { try POSIX.open(m.path($0)) }
        defer { held.forEach { close($0) } }
        let fd = try POSIX.open(m.path("a.bin"))
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
        let before = m.mount.fs.session.readAheadBytes.withLock { $0 }
        let bytes = try withinBound(120, "warm read") { try POSIX.readAll(m.path("a.bin"), chunk: 128 << 10) }
        XCTAssertTrue(bytes == OriginServer.generatedBytes(seed: 80, offset: 0, count: Int(length)), "bytes differ from the origin's")
        XCTAssertEqual(m.mount.fs.session.readAheadBytes.withLock { $0 }, before, "three files open: nothing read ahead")
    }
}
