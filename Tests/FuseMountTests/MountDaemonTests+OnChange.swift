import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Issue 46, item 5, through the real daemon: an `--on-change` command, and a child it detached
/// into a session of its own, hold neither the connection of the `refresh` that triggered it nor
/// the proxy's listening socket; the command itself ends with the daemon.
extension LibraryRefreshTests {
    func testADetachedChildOfTheCommandHoldsNeitherTheRefreshNorTheProxyPort() throws {
        let hold = h.directory.appending("hold"), up = h.directory.appending("up"), hook = h.directory.appending("hook")
        XCTAssertEqual(mkfifo(hold, 0o600), 0)
        // The child reads `hold` until every writer is gone: it lives as long as this is open.
        let writer = open(hold, O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(writer, 0)
        defer { close(writer) }
        // `setsid`: out of the command's group, so it outlives the run and the daemon. The
        // command itself waits on `hold` too: only the daemon's end ends it.
        let command = "setsid sh -c 'exec 3<\(hold); echo $$ > \(up); cat <&3 > /dev/null' & "
            + "exec 3<\(hold); echo $$ > \(hook); cat <&3 > /dev/null"
        let r = try h.mount(["--index", h.origin.url("/lib/"), "--index-ttl", "1h", "--proxy-port", "0",
                             "--on-change", command], proxy: true)
        XCTAssertEqual(r.status, 0, r.stderr)
        let line = try XCTUnwrap(h.log.split(separator: "\n").first { $0.contains("proxy listening on http://127.0.0.1:") })
        let port = try XCTUnwrap(Int(line.split(separator: ":").last.map(String.init) ?? ""), String(line))
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "sub"])

        list("/lib/", ["a.txt", "b.txt", "sub/"])
        // Answered once the refresh is done; before, the child kept its connection open.
        let out = try h.run(h.binary, ["refresh", h.mountpoint], timeout: 30)
        XCTAssertEqual(out.status, 0, out.stderr)
        let pid = { (file: String) in pid_t(((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) }
        h.waitForFiles(in: h.directory.path, "the command and its detached child are up") {
            [up, hook].allSatisfy { ((try? String(contentsOfFile: $0, encoding: .utf8)) ?? "").hasSuffix("\n") }
        }
        let child = try XCTUnwrap(pid(up)), hookPID = try XCTUnwrap(pid(hook))

        let daemon = try XCTUnwrap(h.daemonPID())
        XCTAssertEqual(try h.run(h.binary, ["unmount", h.mountpoint]).status, 0)
        h.waitForExit(daemon, "the daemon ends")
        h.waitForExit(hookPID, "the command ends with the daemon")
        XCTAssertTrue(h.isAlive(child), "the detached child still runs")
        // The next mount on the same port: before, "the port is in use" (the child held it).
        let again = try h.mount([h.origin.url("/lib/a.txt"), "--proxy-port", String(port)], proxy: true)
        XCTAssertEqual(again.status, 0, again.stderr)
        if let next = h.daemonPID() {
            XCTAssertEqual(try h.run(h.binary, ["unmount", h.mountpoint]).status, 0)
            h.waitForExit(next, "the second daemon ends")
        }
    }
}
