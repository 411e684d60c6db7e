import CacheCore
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
        XCTAssertTrue(eventually { m.engine.status(url: m.origin.url("/v.bin"))?.cachedBytes == length }, "v.bin cached")
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
}
