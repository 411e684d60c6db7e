import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// The real stack (loopback origin, libcurl, engine, FUSE) with the origin stopped under a
/// partly cached `--index` library and `--revalidate-after 0s`: listings and cached files are
/// served, a file never cached fails with EIO instead of hanging, the status document lists the
/// origin as down, and once the origin is back (same port) the probe finds it up again. The
/// probe timer runs on a manual scheduler: the probe goes out when the test moves its clock.
final class OfflineMountTests: XCTestCase {
    static func dirListing(_ path: String, dirs: [String], files: [(String, Int)]) -> [UInt8] {
        var html = "<html><head><title>Index of \(path)</title></head><body><h1>Index of \(path)</h1><hr><pre><a href=\"../\">../</a>\n"
        for d in dirs { html += "<a href=\"\(d)/\">\(d)/</a>    04-Jan-2024 10:00    -\n" }
        for (f, n) in files { html += "<a href=\"\(f)\">\(f)</a>    04-Jan-2024 10:00    \(n)\n" }
        return Array((html + "</pre><hr></body></html>\n").utf8)
    }

    static func serveLibrary(_ o: OriginServer) {
        let html = [("Content-Type", "text/html")]
        o.setResponse("/lib/", status: 200, headers: html, body: dirListing("/lib/", dirs: ["films"], files: [("notes.txt", 6)]))
        o.setResponse("/lib/films/", status: 200, headers: html,
                      body: dirListing("/lib/films/", dirs: [], files: [("cached.mkv", 3 << 20), ("never.mkv", 1 << 20)]))
        o.setFile("/lib/notes.txt", data: Array("notes\n".utf8))
        o.setGeneratedFile("/lib/films/cached.mkv", length: 3 << 20, seed: 21, contentType: "video/x-matroska")
        o.setGeneratedFile("/lib/films/never.mkv", length: 1 << 20, seed: 22, contentType: "video/x-matroska")
    }

    func testWithTheOriginStoppedCachedFilesAndListingsAreServedAndTheRestFailsFast() throws {
        let engineLog = RecordedLog()
        let probes = Scheduler.manual()
        let m = try EngineMount(tree: { o in try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("lib = \(o.url("/lib/"))")]) },
                                cache: { $0.revalidateAfter = 0 }, options: MountOptions(listingTTL: 0, readDeadline: nil),
                                setup: Self.serveLibrary, engineLog: engineLog, probes: probes)
        var restarted: OriginServer?
        defer {
            restarted?.stop()
            m.stop()
        }
        let film = OriginServer.generatedBytes(seed: 21, offset: 0, count: 3 << 20)
        try withinBound(60, "the library, cached in part") {
            XCTAssertEqual(try POSIX.list(m.path("lib")), ["films", "notes.txt"])
            XCTAssertEqual(try POSIX.list(m.path("lib/films")), ["cached.mkv", "never.mkv"])
            XCTAssertEqual(try POSIX.readAll(m.path("lib/films/cached.mkv")), film)
        }
        let port = m.origin.port
        m.origin.stop()

        try withinBound(30, "the library with the origin stopped") {
            XCTAssertEqual(try POSIX.list(m.path("lib")), ["films", "notes.txt"])
            XCTAssertEqual(try POSIX.list(m.path("lib/films")), ["cached.mkv", "never.mkv"])
            XCTAssertEqual(try POSIX.readAll(m.path("lib/films/cached.mkv")), film, "cached bytes, byte for byte")
            XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.readAll(m.path("lib/films/never.mkv")) }, EIO)
            XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.readAll(m.path("lib/films/never.mkv")) }, EIO, "again, at once")
        }
        let doc = m.engine.statusDocument(version: "test", showDirectory: false)
        XCTAssertEqual(doc.originsDown?.map(\.origin), ["http://127.0.0.1:\(port)"])
        XCTAssertLessThan(doc.cache.hitRatio ?? 1, 1, "failed reads are no hits")

        restarted = try OriginServer(port: port)
        Self.serveLibrary(restarted!)
        // The probe is due 1 s after the origin went down; it goes out now, on this thread, and the
        // engine says so once it got an answer.
        XCTAssertEqual(probes.pending, 1, "one probe timer set while the origin is down")
        probes.advance(by: .seconds(1))
        guard engineLog.wait(for: "origin reachable again", timeout: 30) else { return XCTFail("the origin never came back up") }
        XCTAssertTrue(m.engine.originsDown.isEmpty)
        try withinBound(30, "the file never cached, once the origin is back") {
            XCTAssertEqual(try POSIX.readAll(m.path("lib/films/never.mkv")), OriginServer.generatedBytes(seed: 22, offset: 0, count: 1 << 20))
        }
    }
}
