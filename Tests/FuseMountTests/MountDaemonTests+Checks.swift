import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// `mount` checks every URL and listing it is given before it returns: each failure is a line on
/// the terminal, failed entries are left out, and a mount with nothing left fails.
final class MountCheckTests: XCTestCase {
    var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
        h.origin.setFile("/b.txt", data: Array("bee\n".utf8))
        h.origin.setGeneratedFile("/film.mp4", length: 64 << 10, seed: 7, contentType: "video/mp4")
        h.origin.setGeneratedFile("/film/", length: 64 << 10, seed: 7, contentType: "video/mp4")
    }

    override func tearDown() {
        h?.cleanup()
    }

    /// A port nothing listens on: the connection is refused at once.
    var refusedURL: String { "http://127.0.0.1:1/gone.mp4" }

    func testFailuresAreToldOnTheTerminalAndTheRestIsMounted() throws {
        let r = try h.mount([h.origin.url("/b.txt"), h.origin.url("/missing.mp4"), refusedURL,
                             "--index", "films=" + h.origin.url("/film/")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(h.origin.url("/missing.mp4")): HTTP 404"), r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(refusedURL): "), r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(h.origin.url("/film/")): not a listing"), r.stderr)
        XCTAssertTrue(r.stderr.contains("warning: mounting 1 of 4 entries; 3 failed"), r.stderr)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["b.txt"])
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("bee\n".utf8))
    }

    func testAListingPastTheListingMemorySaysSoAndHowToRaiseIt() throws {
        // 1 MiB holds 5,698 entries at 184 bytes each: 6,000 links are more.
        let links = (0..<6000).map { "<a href=\"f\($0).mkv\">f\($0).mkv</a>\n" }.joined()
        h.origin.setFile("/many/", data: Array("<html><body><pre>\n\(links)</pre></body></html>".utf8), contentType: "text/html")
        let r = try h.mount([h.origin.url("/b.txt"), "--index", "many=" + h.origin.url("/many/"), "--listing-memory", "1M"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(h.origin.url("/many/")): a listing of more than 5698 entries"), r.stderr)
        XCTAssertTrue(r.stderr.contains("--listing-memory raises it"), r.stderr)
        XCTAssertFalse(r.stderr.contains("not a listing"), r.stderr)
    }

    func testAListingLargerThanAPageMayBeSaysSoAndHowToRaiseIt() throws {
        // Past 64 MiB, the least a page may have: refused by its length, before its bytes come.
        h.origin.setGeneratedFile("/huge/", length: (64 << 20) + 1, seed: 9, contentType: "text/html")
        let r = try h.mount([h.origin.url("/b.txt"), "--index", "huge=" + h.origin.url("/huge/"), "--listing-memory", "1M"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(h.origin.url("/huge/")): a listing larger than 64 MiB"), r.stderr)
        XCTAssertTrue(r.stderr.contains("--listing-memory raises it"), r.stderr)
        XCTAssertLessThan(h.origin.bytesServed(path: "/huge/"), 64 << 20, "refused before the page came whole")
    }

    func testTheCheckAsksEachFileForOneByteNotItsFirstBytes() throws {
        // Four films on a thin link: their headers would share it with the first play.
        for name in ["a", "b", "c"] { h.origin.setGeneratedFile("/\(name).mp4", length: 4 << 20, seed: 7, contentType: "video/mp4") }
        let r = try h.mount(["a", "b", "c"].map { h.origin.url("/\($0).mp4") })
        XCTAssertEqual(r.status, 0, r.stderr)
        for name in ["a", "b", "c"] {
            XCTAssertEqual(h.origin.bytesServed(path: "/\(name).mp4"), 1, "\(name).mp4 is checked, not read")
        }
        XCTAssertEqual(try POSIX.readAll(h.path("b.mp4")).count, 4 << 20)
    }

    func testMoreEntriesThanChecksAtOnceAreEachCheckedOnce() throws {
        // Eight checks run at once; each one finished starts the next.
        let names = (0..<20).map { "f\($0).mp4" }
        for name in names where name != "f13.mp4" { h.origin.setGeneratedFile("/\(name)", length: 8 << 10, seed: 3, contentType: "video/mp4") }
        let r = try h.mount(names.map { h.origin.url("/\($0)") })
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(h.origin.url("/f13.mp4")): HTTP 404"), r.stderr)
        XCTAssertTrue(r.stderr.contains("warning: mounting 19 of 20 entries; 1 failed"), r.stderr)
        XCTAssertEqual(try POSIX.list(h.mountpoint).count, 19)
        for name in names where name != "f13.mp4" {
            XCTAssertEqual(h.origin.requestCount(path: "/\(name)"), 1, "\(name) asked once")
        }
    }

    /// `--index` of a file's URL: the listing asked (the URL with a slash) is not found, and the
    /// line says what to do instead.
    func testAnIndexOfAFilesURLSaysToMountItWithoutIndex() throws {
        h.origin.setGeneratedFile("/film.mp4", length: 1000, seed: 3)
        let r = try h.mount(["--index", h.origin.url("/film.mp4")])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(h.origin.url("/film.mp4/")): HTTP 404 "
            + "(--index takes a folder's listing; a file's URL mounts without --index)"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
    }

    func testNothingMountableFailsTheCommand() throws {
        let r = try h.mount([h.origin.url("/missing.mp4"), refusedURL])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(h.origin.url("/missing.mp4")): HTTP 404"), r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: \(refusedURL): "), r.stderr)
        XCTAssertTrue(r.stderr.contains("nothing to mount: all 2 URLs and listings given failed"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
        XCTAssertNil(h.daemonPID())
    }

    func testCachedEntriesMountWhileTheOriginIsDown() throws {
        let url = h.origin.url("/b.txt")
        XCTAssertEqual(try h.mount([url]).status, 0)
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("bee\n".utf8))
        let pid = try XCTUnwrap(h.daemonPID())
        kill(pid, SIGTERM)
        h.waitForExit(pid, "the first daemon exits")

        h.origin.stop()
        let r = try h.mount([url, "--revalidate-after", "0s"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: warning: \(url): "), r.stderr)
        XCTAssertTrue(r.stderr.contains("the origin did not answer; serving what the cache holds"), r.stderr)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["b.txt"])
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("bee\n".utf8))
    }

    func testAnIndexWhoseOriginIsDownMountsFromItsCachedListingsWithAWarning() throws {
        OfflineMountTests.serveLibrary(h.origin)
        let index = "lib=" + h.origin.url("/lib/")
        XCTAssertEqual(try h.mount(["--index", index]).status, 0)
        XCTAssertEqual(try POSIX.list(h.path("lib/films")), ["cached.mkv", "never.mkv"])
        XCTAssertEqual(try POSIX.readAll(h.path("lib/notes.txt")), Array("notes\n".utf8))
        let pid = try XCTUnwrap(h.daemonPID())
        kill(pid, SIGTERM)
        h.waitForExit(pid, "the first daemon exits")

        h.origin.stop()
        let r = try h.mount(["--index", index, "--revalidate-after", "0s"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("httpcachefs: warning: \(h.origin.url("/lib/")): "), r.stderr)
        XCTAssertTrue(r.stderr.contains("serving what the cache holds"), r.stderr)
        XCTAssertEqual(try POSIX.list(h.path("lib")), ["films", "notes.txt"])
        XCTAssertEqual(try POSIX.list(h.path("lib/films")), ["cached.mkv", "never.mkv"])
        XCTAssertEqual(try POSIX.readAll(h.path("lib/notes.txt")), Array("notes\n".utf8))
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.readAll(h.path("lib/films/never.mkv")) }, EIO)
        XCTAssertTrue(h.log.contains("origin unreachable"), h.log)
    }
}
