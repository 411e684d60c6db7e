import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// `cache rm` and `cache clear` while a mount daemon holds the cache: they ask the daemon.
final class CacheControlThroughDaemonTests: XCTestCase {
    var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
        h.origin.setGeneratedFile("/a.bin", length: 1 << 20, seed: 5)
        h.origin.setFile("/b.txt", data: Array("bee\n".utf8))
    }

    override func tearDown() {
        h?.cleanup()
    }

    func cache(_ arguments: [String]) throws -> DaemonHarness.Outcome {
        try h.run(h.binary, ["cache"] + arguments + ["--cache-dir", h.cacheDirectory])
    }

    func testRemoveAndClearGoThroughTheRunningDaemon() throws {
        let (a, b) = (h.origin.url("/a.bin"), h.origin.url("/b.txt"))
        XCTAssertEqual(try h.mount([a, b, "--proxy-port", "0"], proxy: true).status, 0)
        XCTAssertEqual(try POSIX.readAll(h.path("a.bin")).count, 1 << 20)
        let pid = try XCTUnwrap(h.daemonPID())

        var r = try cache(["rm", a])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("removed \(a) (1"), r.stdout)
        XCTAssertTrue(r.stdout.contains("through the daemon holding the cache (pid \(pid))"), r.stdout)
        r = try cache(["rm", a])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("not in the cache: \(a)"), r.stderr)

        // The mount still serves the file: it is fetched again.
        let before = h.origin.requestCount(path: "/a.bin")
        XCTAssertEqual(try POSIX.readAll(h.path("a.bin")), OriginServer.generatedBytes(seed: 5, offset: 0, count: 1 << 20))
        XCTAssertGreaterThan(h.origin.requestCount(path: "/a.bin"), before)

        r = try cache(["clear"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("cleared 2 files"), r.stdout)
        XCTAssertTrue(r.stdout.contains("(pid \(pid))"), r.stdout)
        r = try cache(["rm", b])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("not in the cache: \(b)"), r.stderr)
        XCTAssertTrue(h.isAlive(pid))
    }

    func testWithoutAProxyTheLockIsNamed() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/b.txt")]).status, 0)
        let r = try cache(["clear"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("is in use by"), r.stderr)
    }
}
