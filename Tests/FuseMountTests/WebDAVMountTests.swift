import CacheCore
import Fetcher
import Foundation
import Glibc
import Logging
import TestSupport
import XCTest
@testable import FuseMount

/// `--index` on a real WebDAV server that lists folders by PROPFIND alone (Debian's nginx with the
/// dav_ext module, autoindex off): the mount shows the tree and reads the files byte-exact.
final class WebDAVMountTests: XCTestCase {
    var h: DaemonHarness!
    var dav: NginxWebDAV!
    var files: [String: [UInt8]] = [:]

    override func setUpWithError() throws {
        h = try DaemonHarness()
        let root = h.directory.appending("dav")
        files = [
            "media/Film One.mkv": testBytes(count: 700_000, seed: 1),
            "media/café.txt": Array("crème\n".utf8),
            "media/Shows/e02.mp4": testBytes(count: 50_000, seed: 2),
            "media/Shows/Season 1/e01.mp4": testBytes(count: 123_457, seed: 3),
        ]
        for (path, bytes) in files {
            let full = root + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            XCTAssertTrue(FileManager.default.createFile(atPath: full, contents: Data(bytes)), "cannot write \(full)")
        }
        try FileManager.default.createDirectory(atPath: root + "/media/Empty", withIntermediateDirectories: true)
        do { dav = try NginxWebDAV(root: root) } catch let error as NginxWebDAV.Unavailable {
            print("⚠️  SKIPPING WebDAV test: \(error)")
            throw XCTSkip("\(error)")
        }
    }

    override func tearDown() {
        dav?.stop()
        h?.cleanup()
    }

    /// Every path under `dir`, relative, folders with a trailing slash (what `ls -R` walks).
    func tree(_ dir: String, prefix: String = "") throws -> [String] {
        var out: [String] = []
        for name in try POSIX.list(dir) {
            let st = try POSIX.stat(dir + "/" + name)
            if st.st_mode & S_IFMT == S_IFDIR {
                out.append(prefix + name + "/")
                out += try tree(dir + "/" + name, prefix: prefix + name + "/")
            } else {
                out.append(prefix + name)
            }
        }
        return out
    }

    func testTheMountShowsTheTreeAndReadsTheFilesByteExact() throws {
        // The server lists on no GET: this is what the mount has to go on.
        XCTAssertEqual(try ExternalTool.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", dav.url("/media/")]).stdout, "403")
        let r = try h.mount(["--index", dav.url("/media/")])
        XCTAssertEqual(r.status, 0, r.stderr + h.log)
        XCTAssertEqual(try tree(h.mountpoint), ["Empty/", "Film One.mkv", "Shows/", "Shows/Season 1/", "Shows/Season 1/e01.mp4",
                                                "Shows/e02.mp4", "café.txt"], h.log)
        for (path, bytes) in files {
            let rel = String(path.dropFirst("media/".count))
            let size = try POSIX.stat(h.path(rel)).st_size
            XCTAssertEqual(Int(size), bytes.count, rel)
            XCTAssertEqual(try POSIX.readAll(h.path(rel)), bytes, rel)
        }
        // Sizes came from the listing: a stat asked nothing of the file itself before its read.
        let folders: Set<String> = ["/media/", "/media/Shows/", "/media/Shows/Season%201/", "/media/Empty/"]
        let propfinds = dav.requests { Set($0.filter { $0.method == "PROPFIND" }.map(\.uri)).isSuperset(of: folders) }
            .filter { $0.method == "PROPFIND" }
        XCTAssertEqual(Set(propfinds.map(\.uri)), folders)
        XCTAssertTrue(propfinds.allSatisfy { $0.status == 207 }, "\(propfinds)")

        // A file added at the origin shows after a refresh (SIGHUP), by PROPFIND again.
        FileManager.default.createFile(atPath: dav.root + "/media/Shows/new.mp4", contents: Data([1, 2, 3]))
        let pid = try XCTUnwrap(h.daemonPID())
        kill(pid, SIGHUP)
        h.waitForLog("SIGHUP: re-read")  // logged once every listing is read again and applied
        XCTAssertTrue(try POSIX.list(h.path("Shows")).contains("new.mp4"), h.log)
        XCTAssertEqual(try POSIX.readAll(h.path("Shows/new.mp4")), [1, 2, 3])
    }

    func testRecursivePreloadFollowsWebDAVFoldersAndFetchesHeadsAndTails() throws {
        let r = try h.run(h.binary, ["preload", "--recursive", dav.url("/media/"), "--head", "64K", "--tail", "64K",
                                     "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("4 of 4 files in 4 folders"), r.stdout)
        // Each file: a one-byte probe, then the rest of its head, then its tail (below).
        let expectedGets = files.reduce(0) { $0 + ($1.value.count <= 128 << 10 ? 2 : 3) }
        let gets = dav.requests { $0.filter { $0.method == "GET" && !$0.uri.hasSuffix("/") }.count >= expectedGets }
            .filter { $0.method == "GET" && !$0.uri.hasSuffix("/") }
        // Each file: a one-byte probe, then the rest of its head, then its tail (files of at most
        // 128 KiB are one range).
        for (path, bytes) in files {
            let uri = "/" + path.split(separator: "/").map { $0.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)! }.joined(separator: "/")
            let ranges = gets.filter { $0.uri == uri }.map { $0.range ?? "none" }
            let n = bytes.count
            let expected = n <= 128 << 10 ? ["bytes=0-0", "bytes=1-\(n - 1)"]
                : ["bytes=0-0", "bytes=1-65535", "bytes=\(n - 65536)-\(n - 1)"]
            XCTAssertEqual(ranges, expected, uri)
        }
        // Head and tail are in the cache.
        let n = try XCTUnwrap(files["media/Film One.mkv"]).count
        let info = try h.run(h.binary, ["cache", "info", dav.url("/media/Film%20One.mkv"), "--cache-dir", h.cacheDirectory])
        XCTAssertTrue(info.stdout.contains("0-65535, \(n - 65536)-\(n - 1)"), info.stdout)
    }

    /// A WebDAV server whose folder answers GET with a page (an index.html, not a listing) and a
    /// `DAV:` header is listed by PROPFIND: the mount shows the folder's files, not the page's links.
    func testAFolderPageWithADAVHeaderIsListedByPROPFIND() throws {
        let page = #"<html><body><a href="about.html">About</a> <a href="Film%20One.mkv">Watch</a></body></html>"#
        FileManager.default.createFile(atPath: dav.root + "/media/index.html", contents: Data(page.utf8))
        let head = try ExternalTool.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-D", "-", dav.url("/media/")]).stdout
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 200"), head)
        XCTAssertTrue(head.lowercased().contains("dav: 1,2"), head)

        let r = try h.mount(["--index", dav.url("/media/")])
        XCTAssertEqual(r.status, 0, r.stderr + h.log)
        XCTAssertEqual(try tree(h.mountpoint), ["Empty/", "Film One.mkv", "Shows/", "Shows/Season 1/", "Shows/Season 1/e01.mp4",
                                                "Shows/e02.mp4", "café.txt", "index.html"], h.log)
    }

    /// PROPFIND listings are kept in the cache as GET listings are: a remount while the WebDAV
    /// server is down starts from them, with a warning on the terminal, and shows the whole tree
    /// and the cached bytes.
    func testAMountWhoseWebDAVOriginIsDownStartsFromTheKeptListings() throws {
        let r = try h.mount(["--index", dav.url("/media/")])
        XCTAssertEqual(r.status, 0, r.stderr + h.log)
        let listed = try tree(h.mountpoint)
        XCTAssertEqual(listed.count, 7, h.log)
        XCTAssertEqual(try POSIX.readAll(h.path("café.txt")), files["media/café.txt"])
        let pid = try XCTUnwrap(h.daemonPID())
        XCTAssertEqual(try h.run(h.binary, ["unmount", h.mountpoint]).status, 0)
        h.waitForExit(pid, "the daemon ends")

        dav.stop()
        let again = try h.mount(["--index", dav.url("/media/")])
        XCTAssertEqual(again.status, 0, again.stderr + h.log)
        XCTAssertTrue(again.stderr.contains("warning: \(dav.url("/media/")): "), again.stderr)
        XCTAssertTrue(again.stderr.contains("serving what the cache holds"), again.stderr)
        XCTAssertEqual(try tree(h.mountpoint), listed, h.log)
        XCTAssertEqual(try POSIX.readAll(h.path("café.txt")), files["media/café.txt"])
        XCTAssertEqual(Int(try POSIX.stat(h.path("Film One.mkv")).st_size), files["media/Film One.mkv"]?.count)
    }

    /// A kept listing is answered from the cache while it is younger than the TTL, asked again
    /// when older (a refresh asks at once), and served as it is when the origin cannot be reached.
    func testKeptPropfindAnswersFollowTheListingTTL() throws {
        let source = CurlRangeSource(configuration: FetcherConfiguration(clock: .realTime, lowSpeedTime: 2, maxRetries: 1, retryBaseDelay: 0.05),
                                     logger: Logger(label: "webdav-kept-test"))
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: h.directory.appending("engine"), freeSpaceFloor: 0, engineClock: .realTime),
                                     source: source, layers: FetchLayers.standard())
        defer {
            engine.shutdown()
            source.shutdown()
        }
        let request = WebDAVListing.request(url: dav.url("/media/"))
        func propfind(maxAge: TimeInterval) throws -> [UInt8] {
            let box = ResultBox<[UInt8]>()
            let done = DispatchSemaphore(value: 0)
            engine.fetchDocument(request, limit: 1 << 20, maxAge: maxAge) {
                box.set($0)
                done.signal()
            }
            guard done.wait(timeout: .now() + 20) == .success else { throw CacheError.timeout(url: request.url) }
            return try box.get()
        }
        /// PROPFINDs nginx has logged, once there are `atLeast` (it logs after it answered).
        func asked(atLeast n: Int) -> Int {
            dav.requests { $0.filter { $0.method == "PROPFIND" }.count >= n }.filter { $0.method == "PROPFIND" }.count
        }

        XCTAssertFalse(engine.hasKeptDocument(request))
        let first = try propfind(maxAge: 60)
        XCTAssertTrue(engine.hasKeptDocument(request))
        XCTAssertEqual(asked(atLeast: 1), 1)
        XCTAssertEqual(try propfind(maxAge: 60), first)
        XCTAssertEqual(asked(atLeast: 1), 1, "a fresh kept answer is used as it is")
        _ = try propfind(maxAge: 0)
        XCTAssertEqual(asked(atLeast: 2), 2, "max age 0 asks the origin")

        dav.stop()
        XCTAssertEqual(try propfind(maxAge: 0), first, "the kept answer stands in for an origin that is down")
        XCTAssertEqual(try propfind(maxAge: 0), first)
        try engine.clear()
        XCTAssertFalse(engine.hasKeptDocument(request))
    }
}
