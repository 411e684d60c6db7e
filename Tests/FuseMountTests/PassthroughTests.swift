import Foundation
import Glibc
import TestSupport
import XCTest
@testable import CacheCore
@testable import FuseMount

/// Fully cached files open with FUSE passthrough: the kernel reads the cache's data file itself.
final class PassthroughTests: XCTestCase {
    private func expected(_ seed: UInt64, _ count: Int) -> [UInt8] {
        OriginServer.generatedBytes(seed: seed, offset: 0, count: count)
    }

    /// Passthrough needs Linux 6.9+ and CAP_SYS_ADMIN (root here): where either is missing, the
    /// test says so loudly and is skipped (CI has both).
    private func requirePassthrough() throws {
        var u = utsname()
        uname(&u)
        let release = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let parts = release.split(separator: ".").prefix(2).compactMap { Int($0.prefix { $0.isNumber }) }
        let recent = parts.count == 2 && (parts[0] > 6 || (parts[0] == 6 && parts[1] >= 9))
        if !recent || geteuid() != 0 {
            let message = "SKIPPING FUSE passthrough test: needs Linux 6.9+ and root (kernel \(release), euid \(geteuid()))"
            print("⚠️  \(message)")
            throw XCTSkip(message)
        }
    }

    private func mount(length: Int64, seed: UInt64, revalidateAfter: TimeInterval = 600) throws -> EngineMount {
        try requirePassthrough()
        return try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                               cache: { $0.revalidateAfter = revalidateAfter },
                               setup: { $0.setGeneratedFile("/v.bin", length: length, seed: seed) })
    }

    private func ino(_ m: EngineMount) throws -> UInt64 { try XCTUnwrap(m.mount.fs.core.inode(at: ["v.bin"])) }

    /// Handles of the file open with passthrough, once the inode's backing file is registered.
    private func passthroughHandles(_ m: EngineMount) throws -> Int {
        let ino = try ino(m), core = m.mount.fs.core
        return core.state.withLock { s in
            s.passthroughInodes[ino] == nil ? 0 : s.openFiles.values.filter { $0.ino == ino && $0.passthrough }.count
        }
    }

    /// The kernel sends a file's release after close() returns.
    private func waitForReleases(_ m: EngineMount) throws {
        XCTAssertTrue(try m.mount.fs.core.waitForLetGo { try passthroughHandles(m) == 0 },
                      "the release of the last handle reached the daemon")
    }

    private func cacheWhole(_ m: EngineMount, _ data: [UInt8]) throws {
        XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == data)
        m.engine.core.writes.waitIdle()
        try waitForReleases(m)
    }

    func testAFullyCachedFileIsReadByTheKernelFromTheDataFileAndStaysPinnedWhileOpen() throws {
        let length: Int64 = 6 << 20
        let m = try mount(length: length, seed: 41)
        defer { m.stop() }
        let data = expected(41, Int(length))
        try cacheWhole(m, data)

        m.origin.resetLog()
        let fd = try POSIX.open(m.path("v.bin"))
        XCTAssertEqual(try passthroughHandles(m), 1, "opened with passthrough")
        let second = try POSIX.open(m.path("v.bin"))
        XCTAssertEqual(try passthroughHandles(m), 2, "a second open shares the inode's backing file")
        close(second)
        XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: Int(length)) == data, "byte-exact through the kernel")
        XCTAssertEqual(m.origin.requests.count, 0)

        // While it is open, eviction cannot take its bytes (the kernel reads them without us).
        let core = m.engine.core
        XCTAssertEqual(core.evictor.evictNow(bytes: length), 0, "pinned while open")
        close(fd)
        try waitForReleases(m)
        // A release is counted once its reader and pin were let go too.
        XCTAssertEqual(core.evictor.evictNow(bytes: length), length, "evictable once closed")
    }

    /// A file the kernel reads with one request opens without passthrough: a backing file at
    /// every open would cost more than the one READ after which the kernel keeps its pages.
    func testAFileOfOneReadOpensOrdinarilyAndIsReadFromTheKernelsPagesAfterItsFirstOpen() throws {
        let length: Int64 = 64 << 10
        let m = try mount(length: length, seed: 43)
        defer { m.stop() }
        let data = expected(43, Int(length))
        XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == data)
        m.engine.core.writes.waitIdle()
        let requests = m.mount.fs.session.requests
        let readsBefore = requests.count(.read)
        for _ in 0..<3 {
            let fd = try POSIX.open(m.path("v.bin"))
            XCTAssertEqual(try passthroughHandles(m), 0, "an ordinary open, though passthrough is there")
            XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: Int(length)) == data)
            close(fd)
        }
        XCTAssertEqual(requests.count(.read), readsBefore, "the pages of the unchanged version were kept")
        XCTAssertTrue(m.mount.fs.core.opensOrdinarily(length: Int64(m.mount.fs.options.effectiveMaxRead)))
        XCTAssertFalse(m.mount.fs.core.opensOrdinarily(length: Int64(m.mount.fs.options.effectiveMaxRead) + 1))
        XCTAssertFalse(m.mount.fs.core.opensOrdinarily(length: nil), "a length not known yet: as before")
    }

    func testAnOrdinaryOpenKeepsLaterOpensOrdinaryUntilItCloses() throws {
        let length: Int64 = 3 << 20
        let m = try mount(length: length, seed: 42)
        defer { m.stop() }
        let data = expected(42, Int(length))
        // Opened before anything was cached: an ordinary open, read through the daemon.
        let first = try POSIX.open(m.path("v.bin"))
        XCTAssertTrue(try POSIX.pread(first, offset: 0, count: Int(length)) == data)
        m.engine.core.writes.waitIdle()
        // All cached now, but the kernel would refuse passthrough beside an ordinary open.
        let second = try POSIX.open(m.path("v.bin"))
        XCTAssertEqual(try passthroughHandles(m), 0)
        XCTAssertTrue(try POSIX.pread(second, offset: 0, count: Int(length)) == data)
        close(first)
        close(second)
        XCTAssertTrue(m.mount.fs.core.waitForLetGo { m.mount.fs.core.openFileCount == 0 }, "both releases reached the daemon")
        let third = try POSIX.open(m.path("v.bin"))
        defer { close(third) }
        XCTAssertEqual(try passthroughHandles(m), 1, "alone, it opens with passthrough")
        XCTAssertTrue(try POSIX.pread(third, offset: 0, count: Int(length)) == data)
    }

    func testARemoteChangeWhileOpenWithPassthroughKeepsTheOldBytesForTheOpenFileAndOpensTheNewVersionBesideIt() throws {
        let length: Int64 = 2 << 20
        let m = try mount(length: length, seed: 43, revalidateAfter: 0)
        defer { m.stop() }
        let old = expected(43, Int(length)), new = expected(44, Int(length))
        try cacheWhole(m, old)
        let oldIno = try ino(m)
        let fd = try POSIX.open(m.path("v.bin"))
        XCTAssertEqual(try passthroughHandles(m), 1)

        m.origin.setGeneratedFile("/v.bin", length: length, seed: 44)
        // The old inode is bound to the old version's backing file: the name moves to a new
        // inode, and the kernel repeats the open there (the daemon answered the first one ESTALE).
        let second = try POSIX.open(m.path("v.bin"))
        XCTAssertNotEqual(try ino(m), oldIno, "the name has a new inode")
        XCTAssertTrue(try POSIX.pread(second, offset: 0, count: Int(length)) == new, "a new open sees the new version")
        XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: Int(length)) == old, "the open file keeps its version")
        var st = stat()
        XCTAssertEqual(fstat(fd, &st), 0)
        XCTAssertEqual(UInt64(st.st_ino), oldIno)
        close(fd)
        close(second)
        // Fully cached by now, alone on its inode: the next open of the new version is passthrough.
        m.engine.core.writes.waitIdle()
        let core = m.mount.fs.core
        XCTAssertTrue(core.waitForLetGo { core.openFileCount == 0 }, "both releases reached the daemon")
        XCTAssertNil(core.state.withLock { $0.passthroughInodes[oldIno] }, "the old version's backing file was let go")
        XCTAssertTrue(core.waitForLetGo { core.state.withLock { $0.table.node(oldIno) == nil } }, "the kernel forgot the old inode")
        let third = try POSIX.open(m.path("v.bin"))
        defer { close(third) }
        XCTAssertEqual(try passthroughHandles(m), 1)
        XCTAssertTrue(try POSIX.pread(third, offset: 0, count: Int(length)) == new)
    }
}
