import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// What a listed directory costs: `ls -la` sends the listing request and nothing else, and a
/// listing never keeps `ls` waiting past the read timeout.
final class ListingCostTests: XCTestCase {
    let backend = FakeBackend()

    /// A listing byte for byte as nginx 1.22 autoindex writes it: CRLF line ends, names padded
    /// to 50 columns, the size right-aligned in 20.
    static func nginxAutoindex(_ path: String, _ files: [(String, Int64)]) -> [UInt8] {
        var html = "<html>\r\n<head><title>Index of \(path)</title></head>\r\n<body>\r\n"
            + "<h1>Index of \(path)</h1><hr><pre><a href=\"../\">../</a>\r\n"
        for (name, size) in files {
            let href = name.addingPercentEncoding(withAllowedCharacters: DirectoryListing.pathSegmentAllowed)!
            let pad = String(repeating: " ", count: max(1, 51 - name.count))
            let sizeText = String(size)
            html += "<a href=\"\(href)\">\(name)</a>\(pad)04-Jan-2024 10:00"
                + String(repeating: " ", count: max(1, 20 - sizeText.count)) + sizeText + "\r\n"
        }
        return Array((html + "</pre><hr></body>\r\n</html>\r\n").utf8)
    }

    // MARK: No request per listed file

    func testNginxSizesOnCRLFLinesAreRead() throws {
        let entries = try DirectoryListing.parse(Self.nginxAutoindex("/pub/", [("a b.bin", 1005), ("c.mkv", 7)]),
                                                 url: "http://o/pub/")
        XCTAssertEqual(entries.map(\.name), ["a b.bin", "c.mkv"])
        XCTAssertEqual(entries.map(\.size), [1005, 7])
        XCTAssertEqual(entries.first?.modified, Date(timeIntervalSince1970: 1_704_362_400))
    }

    /// `café` with one é and with e and a combining accent are two names to Linux and to the
    /// origin: both are listed and each is reached by its own bytes (Swift's String equality
    /// made them one key, and the second file could not be reached).
    func testNamesEqualOnlyUnderUnicodeNormalizationAreTwoFiles() throws {
        let composed = "caf\u{E9}.mp4", decomposed = "cafe\u{301}.mp4"
        XCTAssertEqual(composed, decomposed, "canonically equivalent for Swift")
        backend.setFile("http://o/pub/", Self.nginxAutoindex("/pub/", [(composed, 1000), (decomposed, 2000)]))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/pub/")])
        let c = CoreCalls(backend: backend, tree: tree, options: MountOptions(revalidateAfter: 600, listingTTL: 600))
        let names = try c.list().get()
        XCTAssertEqual(names.count, 2)
        XCTAssertEqual(Set(names.map { Array($0.utf8) }), [Array(composed.utf8), Array(decomposed.utf8)])
        XCTAssertEqual(try c.lookup(composed).get().size, 1000)
        XCTAssertEqual(try c.lookup(decomposed).get().size, 2000)
    }

    func testAFreshListingConfirmsSizesSoStatNeedsNoRequestAfterRevalidateAfter() throws {
        backend.setFile("http://o/pub/", Self.nginxAutoindex("/pub/", [("a.bin", 1000)]))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/pub/")])
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingStaleWindow = 0   // the expired listing is fetched before it is shown
        let c = CoreCalls(backend: backend, tree: tree, options: options)
        XCTAssertEqual(try c.list().get(), ["a.bin"])
        let ino = try c.lookup("a.bin").get().ino
        c.clock.advance(700)  // both the listing and the file's check are now older than 600 s
        XCTAssertEqual(try c.list().get(), ["a.bin"])
        XCTAssertEqual(try c.lookup("a.bin").get().size, 1000)
        XCTAssertEqual(try c.getattr(ino).get().size, 1000)
        XCTAssertEqual(backend.opens, ["http://o/pub/", "http://o/pub/"], "the listing twice, the file never")
    }

    func testLsLaOfALargeNginxListingSendsExactlyOneRequest() throws {
        let files = (0..<3000).map { (String(format: "episode %04d.mkv", $0), Int64(1_000_000 + $0)) }
        let m = try EngineMount(tree: { try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("tv = \($0.url("/tv/"))")]) },
                                setup: { o in
                                    o.setResponse("/tv/", status: 200, headers: [("Content-Type", "text/html")],
                                                  body: Self.nginxAutoindex("/tv/", files))
                                    for (name, size) in files.prefix(3) {
                                        o.setGeneratedFile("/tv/" + name.replacingOccurrences(of: " ", with: "%20"), length: size, seed: 1)
                                    }
                                })
        defer { m.stop() }
        m.origin.resetLog()
        try withinBound(120, "ls -la") {
            let names = try POSIX.list(m.path("tv"))  // readdir, then lstat of every entry: ls -la
            XCTAssertEqual(names.count, files.count)
            for (name, size) in files {
                let st = try POSIX.stat(m.path("tv/" + name))
                XCTAssertEqual(st.st_size, Int(size), name)
                XCTAssertEqual(st.st_mtim.tv_sec, 1_704_362_400, name)
            }
        }
        XCTAssertEqual(m.origin.requests.map(\.path), ["/tv/"], "the listing and nothing else")
        // The first read is what asks for the file.
        XCTAssertEqual(try POSIX.readAll(m.path("tv/episode 0001.mkv")).count, 1_000_001)
        XCTAssertGreaterThan(m.origin.requestCount(path: "/tv/episode%200001.mkv"), 0)
    }

    func testAStatOfAFileTheListingGivesNoSizeProbesOneByte() throws {
        let m = try EngineMount(tree: { try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("p = \($0.url("/p/"))")]) },
                                setup: { o in
                                    o.setResponse("/p/", status: 200, headers: [("Content-Type", "text/html")],
                                                  body: Array(#"<pre><a href="big.mkv">big.mkv</a>  04-Jan-2024 10:00  1.2G</pre>"#.utf8))
                                    o.setGeneratedFile("/p/big.mkv", length: 50 << 20, seed: 9)
                                })
        defer { m.stop() }
        XCTAssertEqual(try POSIX.stat(m.path("p/big.mkv")).st_size, 50 << 20)
        XCTAssertEqual(m.origin.requests.filter { $0.path == "/p/big.mkv" }.map(\.range), ["bytes=0-0"],
                       "stat needs the length, not the first 256 KiB")
    }

    // MARK: Listings obey the read timeout

    func testAListingThatNeverArrivesFailsWithEIOAfterTheReadTimeout() throws {
        backend.readTimeout = 0.2
        backend.setSilent("http://o/pub/")
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("pub = http://o/pub/")])
        let mount = try InProcessMount(backend: backend, tree: tree)
        defer { mount.stop() }
        try withinBound(20, "ls of a stalled listing") {
            XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.list(mount.path("pub")) }, EIO)
            XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("pub/a.bin")) }, EIO)
        }
    }

    func testAStalledRefreshKeepsServingTheLastGoodListing() throws {
        backend.readTimeout = 0.2
        backend.setFile("http://o/pub/", Self.nginxAutoindex("/pub/", [("a.bin", 3)]))
        backend.setFile("http://o/pub/a.bin", [1, 2, 3])
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/pub/")])
        let c = CoreCalls(backend: backend, tree: tree, options: MountOptions(listingTTL: 60))
        XCTAssertEqual(try c.list().get(), ["a.bin"])
        backend.setSilent("http://o/pub/")
        c.clock.advance(61)
        XCTAssertEqual(try c.list().get(), ["a.bin"], "the previous listing, once the refresh timed out")
        XCTAssertEqual(try c.lookup("a.bin").get().size, 3)
        XCTAssertEqual(try c.lookup("b.bin"), .failure(FSErrno(ENOENT)), "no second wait: the stale listing answers")
        XCTAssertEqual(backend.opens, ["http://o/pub/", "http://o/pub/"])
    }

    func testAListingTrickledOneBytePerSecondFailsAfterTheReadTimeout() throws {
        let m = try EngineMount(tree: { o in
            try MountTreeSpec.build(urlList: try URLListParser.parse("ok.bin = \(o.url("/ok.bin"))"),
                                    indexes: [try MountTreeSpec.parseIndex("slow = \(o.url("/slow/"))")])
        }, cache: { $0.readTimeout = 1 }, setup: { o in
            // nginx sends listings chunked, so the length is unknown until the last byte.
            o.setResponse("/slow/", status: 200, headers: [("Content-Type", "text/html")],
                          body: Self.nginxAutoindex("/slow/", [("a.bin", 1)]))
            o.setFaults("/slow/", Faults(noContentLength: true, bytesPerSecond: 1))
            o.setGeneratedFile("/ok.bin", length: 1000, seed: 5)
        })
        defer { m.stop() }
        try withinBound(30, "ls of a trickled listing") {
            XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.list(m.path("slow")) }, EIO)
            XCTAssertEqual(try POSIX.readAll(m.path("ok.bin")).count, 1000, "the rest of the mount is unaffected")
        }
    }
}
