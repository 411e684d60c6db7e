import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest

/// `preload --recursive`: a library's files warmed through its listings, checked against the
/// origin's request log; `--pin` and `--pin-max`; through a running daemon.
final class LibraryPreloadTests: XCTestCase {
    var h: DaemonHarness!
    let head: Int64 = 256 << 10, tail: Int64 = 512 << 10
    /// Path and length of every media file under /lib/.
    let files: [(String, Int64)] = [("/lib/a.mp4", 5 << 20), ("/lib/sub/b.mkv", 3 << 20 + 17),
                                    ("/lib/sub/deeper/c.mp4", 600 << 10), ("/lib/small.txt", 100)]

    override func setUpWithError() throws {
        h = try DaemonHarness()
        list("/lib/", ["a.mp4", "small.txt", "sub/", "../outside.mp4", "/elsewhere/x.mp4"])
        list("/lib/sub/", ["b.mkv", "deeper/"])
        list("/lib/sub/deeper/", ["c.mp4"])
        for (n, (path, length)) in files.enumerated() { h.origin.setGeneratedFile(path, length: length, seed: UInt64(70 + n)) }
        h.origin.setGeneratedFile("/outside.mp4", length: 1000, seed: 1)
        h.origin.setGeneratedFile("/elsewhere/x.mp4", length: 1000, seed: 2)
    }

    override func tearDown() {
        h?.cleanup()
    }

    /// An nginx-style autoindex page linking `names` (folders end in `/`).
    func list(_ path: String, _ names: [String]) {
        let rows = names.map { "<a href=\"\($0)\">\($0)</a>                 01-Jan-2024 00:00    -\n" }.joined()
        let html = "<html><body><h1>Index of \(path)</h1><hr><pre><a href=\"../\">../</a>\n\(rows)</pre><hr></body></html>\n"
        h.origin.setResponse(path, status: 200, headers: [("Content-Type", "text/html")], body: Array(html.utf8))
    }

    func preload(_ arguments: [String]) throws -> DaemonHarness.Outcome {
        try h.run(h.binary, ["preload"] + arguments + ["--cache-dir", h.cacheDirectory])
    }

    func cache(_ arguments: [String]) throws -> DaemonHarness.Outcome {
        try h.run(h.binary, ["cache"] + arguments + ["--cache-dir", h.cacheDirectory])
    }

    /// The byte ranges the origin sent for `path`, from its log (`bytes=A-B`, half-open here).
    func fetched(_ path: String) -> [Range<Int64>] {
        h.origin.requests.filter { $0.path == path && $0.method == "GET" }.compactMap { r -> Range<Int64>? in
            guard let spec = r.range?.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false),
                  spec.count == 2, let lo = Int64(spec[0]) else { return nil }
            let served = r.bodyBytes
            return lo..<(lo + served)
        }
    }

    func testHeadAndTailOfEveryFileUnderTheFolderAreFetchedOnceAndNothingElse() throws {
        let r = try preload(["--recursive", h.origin.url("/lib/"), "--head", "256K", "--tail", "512K"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("4 of 4 files in 3 folders"), r.stdout)
        for (path, length) in files {
            let wanted = RangeSet([0..<min(head, length), max(0, length - tail)..<length])
            var seen = RangeSet()
            for range in fetched(path) {
                XCTAssertTrue(wanted.contains(range), "\(path): \(range) is outside the head and tail")
                XCTAssertEqual(seen.insert(range), range.upperBound - range.lowerBound, "\(path): \(range) fetched twice")
            }
            XCTAssertEqual(seen, wanted, "\(path): \(h.origin.requests.filter { $0.path == path }.map(\.range))")
        }
        XCTAssertEqual(h.origin.requestCount(path: "/outside.mp4") + h.origin.requestCount(path: "/elsewhere/x.mp4"), 0,
                       "links outside the folder are not followed")
        // The bytes are in the cache, exact.
        let info = try cache(["info", h.origin.url("/lib/a.mp4")])
        XCTAssertTrue(info.stdout.contains("0-262143, 4718592-5242879"), info.stdout)

        // A second run finds them all cached.
        h.origin.resetLog()
        let again = try preload(["--recursive", h.origin.url("/lib"), "--head", "256K", "--tail", "512K"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(files.map { fetched($0.0) }.flatMap { $0 }, [], "a warm library is not fetched again")
    }

    /// A tree of folders with no files (every folder listing more folders, as a symlink loop
    /// with two links does) stops at --max-files folders instead of being listed without end.
    func testATreeOfFoldersAloneStopsAtMaxFilesFolders() throws {
        list("/loop/", ["a/", "b/"])
        for top in ["a", "b"] {
            list("/loop/\(top)/", ["a/", "b/"])
            for inner in ["a", "b"] { list("/loop/\(top)/\(inner)/", ["a/", "b/"]) }
        }
        let r = try preload(["--recursive", h.origin.url("/loop/"), "--max-files", "3"])
        XCTAssertTrue(r.stdout.contains("stopped listing at 3 folders (--max-files counts folders too)")
                      || r.stderr.contains("stopped listing at 3 folders (--max-files counts folders too)"), r.stdout + r.stderr)
        XCTAssertEqual(h.origin.requests.filter { $0.path.hasPrefix("/loop/") }.map(\.path).filter { $0.split(separator: "/").count > 2 }, [],
                       "no folder below the first level was listed")
    }

    func testAListingWithoutRecursiveIsNamedWithTheWayOut() throws {
        let r = try preload([h.origin.url("/lib/"), "--range", "0-1M"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("is a folder listing (3 entries), not a file: add --recursive"), r.stderr)
        XCTAssertEqual(fetched("/lib/a.mp4"), [])
    }

    func testARunThatWouldPassTheCapStopsWithAMessage() throws {
        let r = try preload(["--recursive", h.origin.url("/lib/"), "--cache-size", "6M"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("past the cache cap of 6.00 MiB"), r.stderr)
        XCTAssertTrue(r.stdout.contains("2 of 4 files"), r.stdout)
        // The listing gives no sizes: a one-byte probe asked for its length, and that is all.
        XCTAssertEqual(fetched("/lib/sub/b.mkv"), [0..<1], "nothing more of the file that did not fit")
    }

    /// Pins count the slices they keep (4 MiB here, each up to its file's end), not the bytes
    /// asked for: a 1 MiB head of a 5 MiB file keeps 4 MiB (issue 36, item 6).
    func testPinnedHeadsStayUnderPressureAndTheLimitIsClear() throws {
        let pin = try preload(["--recursive", h.origin.url("/lib/"), "--head", "1M", "--pin", "--cache-size", "16M"])
        XCTAssertEqual(pin.status, 0, pin.stderr)
        XCTAssertTrue(pin.stdout.contains("7954549 bytes pinned"), pin.stdout)  // 4M + (3M + 17) + 600K + 100
        let ls = try cache(["ls", "--cache-size", "16M"])
        XCTAssertTrue(ls.stdout.contains("PINNED") && ls.stdout.contains("7.59 MiB pinned (at most 8.00 MiB)"), ls.stdout)

        // Pressure: 15 MiB more through a 16 MiB cap. The pinned heads stay.
        h.origin.setGeneratedFile("/big.bin", length: 15 << 20, seed: 9)
        XCTAssertEqual(try h.run(h.binary, ["cat", h.origin.url("/big.bin"), "--cache-dir", h.cacheDirectory, "--cache-size", "16M"]).status, 0)
        let info = try cache(["info", h.origin.url("/lib/a.mp4"), "--cache-size", "16M"])
        XCTAssertTrue(info.stdout.contains("Cached ranges:   0-1048575") && info.stdout.contains("Pinned:"), info.stdout)

        // Past --pin-max: refused before anything is fetched, with the way out.
        h.origin.resetLog()
        let refused = try preload(["--recursive", h.origin.url("/lib/"), "--tail", "1M", "--pin", "--pin-max", "3M", "--cache-size", "16M"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("cannot pin") && refused.stderr.contains("whole slices")
                      && refused.stderr.contains("cache unpin"), refused.stderr)
        XCTAssertEqual(fetched("/lib/a.mp4").filter { $0.upperBound > 1 }, [])
        let tooHigh = try preload(["--recursive", h.origin.url("/lib/"), "--pin", "--pin-max", "9M", "--cache-size", "16M"])
        XCTAssertTrue(tooHigh.stderr.contains("more than half the cache cap"), tooHigh.stderr)

        let unpin = try cache(["unpin", h.origin.url("/lib/a.mp4")])
        XCTAssertEqual(unpin.status, 0, unpin.stderr)
        XCTAssertTrue(unpin.stdout.contains("unpinned \(h.origin.url("/lib/a.mp4")) (4.00 MiB)"), unpin.stdout)
        XCTAssertFalse(try cache(["info", h.origin.url("/lib/a.mp4")]).stdout.contains("Pinned:"))
        // `cache rm` releases a file's pins with its bytes.
        XCTAssertEqual(try cache(["rm", h.origin.url("/lib/sub/b.mkv")]).status, 0)
        XCTAssertTrue(try cache(["ls", "--cache-size", "16M"]).stdout.contains("600 KiB pinned"), "only c.mp4 and small.txt stay pinned")
    }

    /// Through a daemon, as without one, each file costs the origin its planned ranges and nothing
    /// more: the daemon's proxy takes no first 256 KiB along when it opens a file for preload.
    func testThroughARunningDaemonOnlyTheHeadsAndTailsAreFetched() throws {
        let m = try h.mount(["--index", h.origin.url("/lib/"), "--proxy-port", "0"], proxy: true)
        XCTAssertEqual(m.status, 0, m.stderr + h.log)
        h.origin.resetLog()
        let (head, tail): (Int64, Int64) = (64 << 10, 64 << 10)
        let r = try preload(["--recursive", h.origin.url("/lib/"), "--head", "64K", "--tail", "64K"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("through the running daemon") && r.stdout.contains("4 of 4 files"), r.stdout)
        for (path, length) in files {
            let wanted = RangeSet([0..<min(head, length), max(0, length - tail)..<length])
            var seen = RangeSet()
            for range in fetched(path) {
                XCTAssertTrue(wanted.contains(range), "\(path): \(range) is outside the head and tail")
                XCTAssertEqual(seen.insert(range), range.upperBound - range.lowerBound, "\(path): \(range) fetched twice")
            }
            XCTAssertEqual(seen, wanted, "\(path): \(h.origin.requests.filter { $0.path == path }.map(\.range))")
        }
    }

    func testThroughARunningDaemonIntoItsCacheWithPins() throws {
        let m = try h.mount(["--index", h.origin.url("/lib/"), "--proxy-port", "0"], proxy: true)
        XCTAssertEqual(m.status, 0, m.stderr + h.log)
        h.origin.resetLog()
        let r = try preload(["--recursive", h.origin.url("/lib/"), "--head", "256K", "--pin"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("through the running daemon") && r.stdout.contains("4 of 4 files"), r.stdout)
        let ls = try cache(["ls"])
        XCTAssertTrue(ls.stdout.contains("PINNED"), ls.stdout)
        // The mount reads the heads from the daemon's cache.
        h.origin.resetLog()
        let fd = try POSIX.open(h.path("sub/b.mkv"))
        defer { close(fd) }
        XCTAssertEqual(try POSIX.pread(fd, offset: 0, count: 1000), OriginServer.generatedBytes(seed: 71, offset: 0, count: 1000))
        XCTAssertEqual(fetched("/lib/sub/b.mkv"), [], "the head was preloaded into the daemon's cache")
        let unpin = try cache(["unpin", h.origin.url("/lib/sub/b.mkv")])
        XCTAssertEqual(unpin.status, 0, unpin.stderr)
        XCTAssertTrue(unpin.stdout.contains("through the daemon holding the cache"), unpin.stdout)
    }
}
