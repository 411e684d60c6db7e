import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// SIGTERM to a mount daemon while a player reads: the mount is detached at once (nothing new
/// opens), the file already open reads on to its end byte for byte, and the daemon exits once it
/// is closed, or at `--stop-timeout`, after which reads fail rather than come back short.
final class GracefulStopTests: XCTestCase {
    var h: DaemonHarness!
    let length = 3 << 20
    var length64: Int64 { Int64(length) }

    override func setUpWithError() throws {
        h = try DaemonHarness()
        h.origin.setGeneratedFile("/film.mkv", length: length64, seed: 23)
    }

    override func tearDown() {
        h?.cleanup()
    }

    func expected(_ offset: Int, _ count: Int) -> [UInt8] {
        OriginServer.generatedBytes(seed: 23, offset: Int64(offset), count: count)
    }

    func testSIGTERMDetachesAtOnceAndAReaderMidFileReadsTheRestByteExactThenTheDaemonExits() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/film.mkv"), "--stop-timeout", "1h"]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        let fd = try POSIX.open(h.path("film.mkv"))
        var closed = false
        defer { if !closed { close(fd) } }
        XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: 1 << 20) == expected(0, 1 << 20))

        kill(pid, SIGTERM)
        h.waitForMountTable("the mountpoint is detached") { !Mountpoint.isMounted(h.mountpoint) }
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.open(h.path("film.mkv")) }, ENOENT, "nothing new opens: the directory underneath shows")
        XCTAssertTrue(h.isAlive(pid), "the daemon serves the open file (the stop timeout is an hour)")

        let rest = try POSIX.pread(fd, offset: 1 << 20, count: length)
        XCTAssertEqual(rest.count, length - (1 << 20), "read to the end, nothing short")
        XCTAssertTrue(rest == expected(1 << 20, length - (1 << 20)), "byte-exact after the stop")

        close(fd)
        closed = true
        h.waitForExit(pid, "the daemon exits once the last open file is closed")
        XCTAssertTrue(h.log.contains("serving 1 open file until closed"), h.log)
        XCTAssertTrue(h.log.contains("unmounted \(h.mountpoint)"), h.log)
    }

    func testTheStopTimeoutEndsTheWaitForAFileLeftOpenAndItsReadsFailInsteadOfComingBackShort() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/film.mkv"), "--stop-timeout", "100ms"]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        let fd = try POSIX.open(h.path("film.mkv"))
        defer { close(fd) }
        XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: 4096) == expected(0, 4096))

        kill(pid, SIGTERM)
        h.waitForExit(pid, "the daemon exits at the stop timeout, the file still open")
        XCTAssertTrue(h.log.contains("stop timeout (0.10s) passed with 1 file still open"), h.log)
        let after = POSIX.errnoOf { _ = try POSIX.pread(fd, offset: 2 << 20, count: 65536) }
        XCTAssertTrue([ENOTCONN, ECONNABORTED].contains(after ?? 0), "a read after the end fails: \(String(describing: after))")
    }

    func testASecondSignalEndsTheWaitAtOnce() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/film.mkv"), "--stop-timeout", "1h"]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        let fd = try POSIX.open(h.path("film.mkv"))
        defer { close(fd) }
        kill(pid, SIGTERM)
        h.waitForMountTable("the mountpoint is detached") { !Mountpoint.isMounted(h.mountpoint) }
        kill(pid, SIGINT)
        h.waitForExit(pid, "the daemon exits on the second signal")
        XCTAssertTrue(h.log.contains("again: ending the session now"), h.log)
    }
}
