import CacheCore
import Foundation
import Glibc
import Logging
import TestSupport
import XCTest
@testable import FuseMount

/// Listings built to hurt: a link longer than any URL, links never closed, megabytes between
/// tags. The parser serves what can be served and skips the rest in one pass; each fetched
/// listing is parsed once; what a listing keeps is what the budget counts.
final class DirectoryListingHostileTests: XCTestCase {
    let base = "http://o/pub/"

    private func page(_ body: String) -> [UInt8] { Array("<html><body><pre>\(body)</pre></body></html>".utf8) }

    // MARK: Huge links

    func testAHrefOf16MiBIsSkippedWithAWarningAndTheOtherEntriesStay() throws {
        var bytes = Array("<html><body><pre><a href=\"before.mkv\">before.mkv</a>  04-Jan-2024 10:00  1000\n<a href=\"".utf8)
        bytes += [UInt8](repeating: UInt8(ascii: "x"), count: 16 << 20)
        bytes += Array("\">huge</a>  04-Jan-2024 10:00  7\n<a href=\"after.mkv\">after.mkv</a>  05-Jan-2024 10:00  2000\n</pre></body></html>".utf8)
        let log = RecordedLog()
        let entries = try DirectoryListing.parse(bytes, url: base, logger: log.logger)
        XCTAssertEqual(entries.map(\.name), ["before.mkv", "after.mkv"])
        XCTAssertEqual(entries.map(\.size), [1000, 2000])
        let line = try XCTUnwrap(log.lines.first { $0.contains("skipped 1 link longer than 8192 bytes") }, "\(log.lines)")
        XCTAssertTrue(line.contains("\(16 << 20) bytes") && line.contains("http://o/pub/"), line)
    }

    func testAHrefUpToTheLimitIsStillReadAndOneByteMoreIsNot() throws {
        func href(_ length: Int) -> String { String(repeating: "a", count: length) }
        let links = DirectoryListing.maxHrefBytes
        var found: [DirectoryListing.Link.Href] = []
        DirectoryListing.extractLinks(page("<a href=\"\(href(links))\">x</a><a href='\(href(links + 1))'>y</a><a href=\(href(links + 2))>z</a>")) {
            found.append($0.href)
            return true
        }
        XCTAssertEqual(found, [.text(href(links)), .tooLong(links + 1), .tooLong(links + 2)])
    }

    func testAHugeAttributeBeforeTheHrefDoesNotHideIt() throws {
        let title = String(repeating: "t", count: 1 << 20)
        let entries = try DirectoryListing.parse(page("<a title=\"\(title)\" data-x=\(title) HREF=\"f.mkv\">f</a> 04-Jan-2024 10:00 5\n"), url: base)
        XCTAssertEqual(entries.map(\.name), ["f.mkv"])
        XCTAssertEqual(entries.first?.size, 5)
    }

    func testAWebDAVHrefLongerThanAnyURLIsSkipped() throws {
        let xml = """
        <?xml version="1.0" encoding="utf-8"?>
        <D:multistatus xmlns:D="DAV:">
        <D:response><D:href>/pub/\(String(repeating: "x", count: 1 << 20))</D:href><D:propstat><D:prop><D:resourcetype/></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
        <D:response><D:href>/pub/ok.mkv</D:href><D:propstat><D:prop><D:resourcetype/></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
        </D:multistatus>
        """
        XCTAssertEqual(try WebDAVListing.parse(Array(xml.utf8), url: base).map(\.name), ["ok.mkv"])
    }

    // MARK: One pass, bounded text

    /// Each unclosed link used to send the scan for its `</a>` to the end of the page (quadratic);
    /// now it stops at the next link, which is found too.
    func testLinksNeverClosedAreEachFound() throws {
        let n = 20_000
        let body = (0..<n).map { "<a href=\"f\($0).mkv\">f\($0)" }.joined(separator: " ")
        let entries = try DirectoryListing.parse(page(body), url: base)
        XCTAssertEqual(entries.count, n)
        XCTAssertEqual(entries.last?.name, "f\(n - 1).mkv")
    }

    func testColumnsAreReadFromTheStartOfAHugeTailAndTheNextLinkStillCounts() throws {
        let filler = String(repeating: "<b>x</b> ", count: 1 << 17)   // 1.1 MiB of tags and text
        let entries = try DirectoryListing.parse(page("<a href=\"a.mkv\">a</a> 04-Jan-2024 10:00 42 \(filler)\n<a href=\"b.mkv\">b</a> \(filler) 05-Jan-2024 10:00 43\n"), url: base)
        XCTAssertEqual(entries.map(\.name), ["a.mkv", "b.mkv"])
        XCTAssertEqual(entries[0].size, 42)
        XCTAssertNil(entries[1].size, "columns past the first \(DirectoryListing.maxTailBytes) bytes after a link are not looked for")
    }

    func testDeeplyNestedTagsAroundLinksAreNoObstacle() throws {
        let open = String(repeating: "<div><span>", count: 50_000), close = String(repeating: "</span></div>", count: 50_000)
        let entries = try DirectoryListing.parse(page("\(open)<a href=\"deep.mkv\">deep</a> 04-Jan-2024 10:00 9\(close)"), url: base)
        XCTAssertEqual(entries.map(\.name), ["deep.mkv"])
        XCTAssertEqual(entries.first?.size, 9)
    }

    /// Plain segments skip Foundation's resolution: they must resolve exactly as it would.
    func testPlainSegmentsResolveAsFoundationWould() throws {
        let resolver = try XCTUnwrap(DirectoryListing.ChildResolver(base: try XCTUnwrap(URL(string: "https://h.example:8443/a%20b/c/"))))
        let hrefs = ["f.mkv", "dir/", "My%20Movie.mp4", "a%26b.txt", "a%2Fb", "caf%C3%A9.mp4", "%FF.bin", "x;y=1", "a+b(1)!.mkv",
                     "~user", "..", "../", ".", "./", "...", "..a", "$'*,@", "%e2%80%ae.exe", "a%2", "a%zz", "%", "-", "_/"]
        for href in hrefs where DirectoryListing.ChildResolver.plainSegment(href) != nil {
            let fast = resolver.child(href), slow = resolver.resolved(href)
            XCTAssertEqual(fast?.0, slow?.0, href)
            XCTAssertEqual(fast?.1, slow?.1, href)
            XCTAssertEqual(fast?.2, slow?.2, href)
        }
        for href in ["..", "../", ".", "./", "a%2", "a%zz", "%", "a:b", "a b", "a&amp;b", "a?b", "a#b", "a/b", "a/b/", "é"] {
            XCTAssertNil(DirectoryListing.ChildResolver.plainSegment(href), href)
        }
        // The same with a folder whose URL is not in its one spelling (upper-case host, `%7E`).
        let unusual = try XCTUnwrap(DirectoryListing.ChildResolver(base: try XCTUnwrap(URL(string: "HTTP://H.example/%7Euser/a%2fb/"))))
        for href in hrefs where DirectoryListing.ChildResolver.plainSegment(href) != nil {
            XCTAssertEqual(unusual.child(href)?.2, unusual.resolved(href)?.2, href)
        }
        // Against a folder URL without its trailing slash, a relative link is no child.
        let noSlash = try XCTUnwrap(DirectoryListing.ChildResolver(base: try XCTUnwrap(URL(string: "http://h/pub"))))
        XCTAssertNil(noSlash.child("f.mkv")?.0)
    }

    /// The fuzzer's corpus under the fuzzer's invariants (its first byte picks the base URL there;
    /// here every seed goes through both): names the kernel accepts, each once, under the folder.
    func testEverySeedOfTheFuzzCorpusKeepsTheFuzzersInvariants() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzCorpus/FuzzDirectoryListing")
        let seeds = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        XCTAssertFalse(seeds.isEmpty)
        var quiet = Logger(label: "test.fuzz-seeds")
        quiet.logLevel = .critical
        for seed in seeds {
            let bytes = Array(try Data(contentsOf: corpus.appendingPathComponent(seed)).dropFirst())
            for folder in ["http://files.example/pub/", "https://files.example:8443/a%20b/c/"] {
                guard let entries = try? DirectoryListing.parse(bytes, url: folder, logger: quiet) else { continue }
                XCTAssertEqual(Set(entries.map(\.name)).count, entries.count, seed)
                for e in entries {
                    XCTAssertNil(DirectoryListing.rejection(of: e.name), "\(seed): \(e.name.debugDescription)")
                    XCTAssertTrue(e.url.hasPrefix(folder), "\(seed): \(e.url)")
                }
            }
        }
    }

    // MARK: Parsed once

    /// Counts the parses of listings at `url` while `body` runs.
    private func parses(of url: String, during body: () throws -> Void) rethrows -> Int {
        let count = LockedValue(0)
        DirectoryListing.parseObserver.withLock { $0 = { if $0 == url { count.withLock { $0 += 1 } } } }
        defer { DirectoryListing.parseObserver.withLock { $0 = nil } }
        try body()
        return count.withLock { $0 }
    }

    func testAListingFetchedForTheMountIsParsedOnce() throws {
        let backend = FakeBackend()
        let url = "http://o/parsed-once/"
        backend.setFile(url, ListingCostTests.nginxAutoindex("/parsed-once/", [("a.mkv", 1), ("b.mkv", 2)]))
        let c = CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(url)]),
                          options: MountOptions(revalidateAfter: 600, listingTTL: 600))
        let n = try parses(of: url) {
            XCTAssertEqual(try c.list().get(), ["a.mkv", "b.mkv"])
            XCTAssertEqual(try c.lookup("a.mkv").get().size, 1)
            XCTAssertEqual(try c.list().get(), ["a.mkv", "b.mkv"])
        }
        XCTAssertEqual(n, 1)
        XCTAssertEqual(backend.opens, [url])
    }

    /// The mount check's listing becomes the tree's first: `ls` right after mounting neither
    /// fetches nor parses the page again, and the listing counts from when the check fetched it.
    func testASeededListingIsServedWithoutAnotherFetchOrParse() throws {
        let backend = FakeBackend()
        let url = "http://o/seeded/"
        backend.setFile(url, ListingCostTests.nginxAutoindex("/seeded/", [("a.mkv", 1)]))
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingStaleWindow = 0
        let c = CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(url)]), options: options)
        let entries = try DirectoryListing.parse(ListingCostTests.nginxAutoindex("/seeded/", [("a.mkv", 1)]), url: url)
        c.core.seedListings([url: ListingFetch.Listing(entries: entries, kind: .page)], at: c.clock.now.addingTimeInterval(-500))
        let n = try parses(of: url) {
            XCTAssertEqual(try c.list().get(), ["a.mkv"])
            XCTAssertEqual(try c.lookup("a.mkv").get().size, 1)
        }
        XCTAssertEqual(n, 0)
        XCTAssertEqual(backend.opens, [])
        XCTAssertEqual(c.core.state.withLock { $0.table.listingBytes }, FileSystemCore.listingCost(entries))
        c.clock.advance(200)   // 700 s after the check fetched it: past the TTL
        XCTAssertEqual(try c.list().get(), ["a.mkv"])
        XCTAssertEqual(backend.opens, [url])
    }

    /// A listing the check had from the cache while the origin was down is used, and refreshed on
    /// the first look (in the background), as a fetched one would be.
    func testASeededListingServedWhileTheOriginIsDownIsRefreshedOnTheFirstLook() throws {
        let backend = FakeBackend()
        let url = "http://o/seeded-down/"
        backend.setFile(url, ListingCostTests.nginxAutoindex("/seeded-down/", [("a.mkv", 1), ("b.mkv", 2)]))
        backend.setOriginDown(true)
        let c = CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(url)]),
                          options: MountOptions(revalidateAfter: 600, listingTTL: 600))
        let entries = try DirectoryListing.parse(ListingCostTests.nginxAutoindex("/seeded-down/", [("a.mkv", 1)]), url: url)
        c.core.seedListings([url: ListingFetch.Listing(entries: entries, kind: .page)], at: c.clock.now)
        // The refresh may land before or after this look's snapshot: either way a.mkv is there.
        XCTAssertTrue(try c.list().get().contains("a.mkv"))
        XCTAssertEqual(backend.opens, [url], "the first look asked for a refresh")
    }

    // MARK: Memory

    func testAListingWithMoreEntriesThanAllowedFailsAsItIsParsed() throws {
        let html = page((0..<3).map { "<a href=\"f\($0)\">f</a>\n" }.joined())
        XCTAssertEqual(try DirectoryListing.parse(html, url: base, maxEntries: 3).count, 3)
        XCTAssertThrowsError(try DirectoryListing.parse(html, url: base, maxEntries: 2)) {
            XCTAssertEqual($0 as? ListingError, .tooManyEntries(url: base, limit: 2))
        }
        let json = Array(#"[{"name":"a","type":"file"},{"name":"b","type":"file"}]"#.utf8)
        XCTAssertThrowsError(try DirectoryListing.parse(json, url: base, maxEntries: 1)) {
            XCTAssertEqual($0 as? ListingError, .tooManyEntries(url: base, limit: 1))
        }
    }

    func testAWebDAVAnswerWithMoreEntriesThanAllowedFailsAsItIsParsed() throws {
        func answer(_ n: Int) -> [UInt8] {
            let responses = (["/pub/"] + (0..<n).map { "/pub/f\($0)" }).map {
                "<D:response><D:href>\($0)</D:href><D:propstat><D:prop><D:resourcetype/></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
            }
            return Array("<?xml version=\"1.0\" encoding=\"utf-8\"?><D:multistatus xmlns:D=\"DAV:\">\(responses.joined())</D:multistatus>".utf8)
        }
        XCTAssertEqual(try WebDAVListing.parse(answer(3), url: base, maxEntries: 3).count, 3)
        XCTAssertThrowsError(try WebDAVListing.parse(answer(4), url: base, maxEntries: 3)) {
            XCTAssertEqual($0 as? ListingError, .tooManyEntries(url: base, limit: 3))
        }
    }

    /// Each entry costs the budget at least `listingEntryCost`: a page with more entries than the whole budget
    /// could hold fails while it is parsed, its directory answers EIO, and the log says why.
    func testAPageWithMoreEntriesThanTheBudgetCanHoldFailsWithoutBeingBuiltWhole() throws {
        let backend = FakeBackend()
        backend.setFile(base, page((0..<11).map { "<a href=\"f\($0)\">f</a>\n" }.joined()))
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingBudget = 10 * MountOptions.listingEntryCost   // room for 10 entries at most
        let log = RecordedLog()
        let c = CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(base)]),
                          options: options, logger: log.logger)
        XCTAssertEqual(try c.list().map(\.count), .failure(FSErrno(EIO)))
        XCTAssertTrue(log.lines.contains { $0.contains("more than 10 entries") && $0.contains("--listing-memory") }, "\(log.lines)")
        XCTAssertEqual(c.core.state.withLock { $0.table.listingBytes }, 0)
    }

    /// What a listing keeps is its entries (names and URLs, each a bounded copy: no page bytes or
    /// tails ride along), and the budget counts them: a page of many long names costs what it
    /// keeps and is refused when that passes the budget.
    func testTheBudgetCountsWhatAHostileListingKeeps() throws {
        let name = String(repeating: "n", count: 250)
        let body = (0..<1000).map { "<a href=\"\(name)\($0)\">x</a>\n" }.joined()
        let entries = try DirectoryListing.parse(page(body), url: base)
        XCTAssertEqual(entries.count, 1000)
        // Each name is kept once on the heap (its URL's end is that very String).
        let kept = entries.reduce(Int64(0)) { $0 + Int64($1.name.utf8.count) }
        XCTAssertGreaterThanOrEqual(FileSystemCore.listingCost(entries), kept + MountOptions.listingEntryCost * 1000)

        let backend = FakeBackend()
        backend.setFile(base, page(body))
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingBudget = FileSystemCore.listingCost(entries) - 1
        let log = RecordedLog()
        let c = CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(base)]),
                          options: options, logger: log.logger)
        XCTAssertEqual(try c.list().map(\.count), .failure(FSErrno(EIO)))
        XCTAssertEqual(c.core.state.withLock { $0.table.listingBytes }, 0)
        XCTAssertTrue(log.lines.contains { $0.contains("listing memory budget") }, "\(log.lines)")
    }
}
