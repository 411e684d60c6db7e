import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// `httpcachefs unmount MOUNTPOINT` as users run it, and the warning for a mountpoint that is
/// not empty.
final class UnmountCommandTests: XCTestCase {
    var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
        h.origin.setGeneratedFile("/a.bin", length: 1 << 20, seed: 5)
    }

    override func tearDown() {
        h?.cleanup()
    }

    func unmount(_ path: String) throws -> DaemonHarness.Outcome {
        try h.run(h.binary, ["unmount", path])
    }

    func testUnmountEndsTheMountAndItsDaemon() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/a.bin")]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        let r = try unmount(h.mountpoint)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, "")
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
        h.waitForExit(pid, "the daemon exits")
    }

    /// `--fuse-spin 0` (a loop that always sleeps) and the longest spin serve the same bytes.
    func testAMountServesTheSameWithOrWithoutTheLoopsSpin() throws {
        for spin in ["0", "1ms"] {
            XCTAssertEqual(try h.mount([h.origin.url("/a.bin"), "--fuse-spin", spin]).status, 0)
            let pid = try XCTUnwrap(h.daemonPID())
            XCTAssertEqual(try POSIX.readAll(h.path("a.bin")), OriginServer.generatedBytes(seed: 5, offset: 0, count: 1 << 20), "--fuse-spin \(spin)")
            XCTAssertEqual(try unmount(h.mountpoint).status, 0)
            h.waitForExit(pid, "the daemon exits")
        }
    }

    func testABusyMountIsDetachedLazilyAndSaysSoWhileTheOpenFileReadsOn() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/a.bin"), "--stop-timeout", "1h"]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        let fd = try POSIX.open(h.path("a.bin"))
        var closed = false
        defer { if !closed { close(fd) } }
        let r = try unmount(h.mountpoint)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.hasPrefix("httpcachefs: warning: \(h.mountpoint) is busy (files are open there): detached it lazily"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
        XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: 1 << 20) == OriginServer.generatedBytes(seed: 5, offset: 0, count: 1 << 20))
        close(fd)
        closed = true
        h.waitForExit(pid, "the daemon exits once the file is closed")
    }

    func testUnmountNamesWhatIsNotAMountOfOurs() throws {
        var r = try unmount(h.mountpoint)
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "httpcachefs: error: \(h.mountpoint) is not mounted\n")
        r = try unmount(h.directory.appending("nowhere"))
        XCTAssertEqual(r.stderr, "httpcachefs: error: \(h.directory.appending("nowhere")) does not exist\n")
        r = try unmount("/proc")
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.hasPrefix("httpcachefs: error: /proc is not a httpcachefs mount: proc (proc) is mounted there"), r.stderr)
        XCTAssertTrue(Mountpoint.isMounted("/proc"))
    }

    func testMountingOverANonEmptyDirectoryWarnsThatItsFilesAreHidden() throws {
        try "mine".write(toFile: h.path("notes.txt"), atomically: true, encoding: .utf8)
        let r = try h.mount([h.origin.url("/a.bin")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, "httpcachefs: warning: mountpoint \(h.mountpoint) is not empty: the mount hides its 1 entry until it is unmounted\n")
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.bin"])
    }
}
