import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// A file added at the origin of an `--index` mount shows up on demand: `httpcachefs refresh
/// [PATH]` (through the daemon's proxy, or SIGHUP to one without) and SIGHUP itself.
final class LibraryRefreshTests: XCTestCase {
    var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
        list("/lib/", ["a.txt", "sub/"])
        list("/lib/sub/", ["s1.txt"])
        for name in ["a.txt", "b.txt", "sub/s1.txt", "sub/s2.txt"] {
            h.origin.setFile("/lib/" + name, data: Array("\(name)\n".utf8))
        }
    }

    override func tearDown() {
        h?.cleanup()
    }

    /// An nginx-style autoindex page for `names` (directories end in `/`).
    func list(_ path: String, _ names: [String]) {
        let rows = names.map { "<a href=\"\($0)\">\($0)</a>                 01-Jan-2024 00:00    -\n" }.joined()
        let html = "<html><head><title>Index of \(path)</title></head><body><h1>Index of \(path)</h1><hr><pre><a href=\"../\">../</a>\n\(rows)</pre><hr></body></html>\n"
        h.origin.setResponse(path, status: 200, headers: [("Content-Type", "text/html")], body: Array(html.utf8))
    }

    func refresh(_ arguments: [String]) throws -> DaemonHarness.Outcome {
        try h.run(h.binary, ["refresh"] + arguments)
    }

    func testRefreshReadsTheListingsUnderAPathAgainNow() throws {
        let r = try h.mount(["--index", h.origin.url("/lib/"), "--index-ttl", "1h", "--proxy-port", "0"], proxy: true)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "sub"])
        XCTAssertEqual(try POSIX.list(h.path("sub")), ["s1.txt"])

        list("/lib/", ["a.txt", "b.txt", "sub/"])
        list("/lib/sub/", ["s1.txt", "s2.txt"])
        // Only what is under the path given.
        var out = try refresh([h.path("sub")])
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("re-read 1 listing under /sub"), out.stdout)
        XCTAssertEqual(try POSIX.list(h.path("sub")), ["s1.txt", "s2.txt"])
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "sub"])

        out = try refresh([h.mountpoint])
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("re-read 2 listings under /"), out.stdout)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "b.txt", "sub"])
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("b.txt\n".utf8))

        // A path the mount does not hold is named.
        out = try refresh([h.path("nope")])
        XCTAssertNotEqual(out.status, 0)
        XCTAssertTrue(out.stderr.contains("not in the mount: /nope"), out.stderr)
    }

    func testSIGHUPReadsEveryListingAgain() throws {
        XCTAssertEqual(try h.mount(["--index", h.origin.url("/lib/"), "--index-ttl", "1h"]).status, 0)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "sub"])
        XCTAssertEqual(try POSIX.list(h.path("sub")), ["s1.txt"])
        let pid = try XCTUnwrap(h.daemonPID())

        list("/lib/", ["a.txt", "b.txt", "sub/"])
        list("/lib/sub/", ["s1.txt", "s2.txt"])
        kill(pid, SIGHUP)
        // The daemon logs the refresh once every listing is read again and applied.
        h.waitForLog("SIGHUP: re-read")
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "b.txt", "sub"], h.log)
        XCTAssertEqual(try POSIX.list(h.path("sub")), ["s1.txt", "s2.txt"], h.log)
        XCTAssertFalse(h.log.contains("no --url-list to re-read"), h.log)

        // `refresh` on a daemon without a proxy sends it SIGHUP.
        list("/lib/", ["a.txt", "b.txt", "c.txt", "sub/"])
        h.origin.setFile("/lib/c.txt", data: Array("sea\n".utf8))
        let out = try refresh([h.mountpoint])
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("sent SIGHUP to pid \(pid)"), out.stdout)
        h.waitForLog("SIGHUP: re-read", occurrences: 2)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "b.txt", "c.txt", "sub"], h.log)
    }
}
