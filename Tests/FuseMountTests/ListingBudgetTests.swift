import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// All `--index` listings together stay within a memory budget: a listing that would pass it
/// fails (EIO on its directory, logged with its URL and the budget); the others stay.
final class ListingBudgetTests: XCTestCase {
    let backend = FakeBackend()

    private func files(_ n: Int) -> [(String, Int64)] {
        (0..<n).map { (String(format: "episode %05d.mkv", $0), Int64(1000 + $0)) }
    }

    private func cost(_ dir: String, _ n: Int) throws -> Int64 {
        FileSystemCore.listingCost(try DirectoryListing.parse(ListingCostTests.nginxAutoindex("/\(dir)/", files(n)),
                                                              url: "http://o/\(dir)/"))
    }

    func testAListingThatWouldPassTheBudgetFailsAndTheOthersStay() throws {
        for dir in ["a", "b", "c"] {
            backend.setFile("http://o/\(dir)/", ListingCostTests.nginxAutoindex("/\(dir)/", files(2000)))
        }
        let tree = try MountTreeSpec.build(indexes: ["a", "b", "c"].map { try MountTreeSpec.parseIndex("\($0) = http://o/\($0)/") })
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingStaleWindow = 0   // an expired listing is fetched before it is shown
        let one = try cost("a", 2000)
        options.listingBudget = 2 * one + one / 2   // room for two listings, not three
        let log = RecordedLog()
        let c = CoreCalls(backend: backend, tree: tree, options: options, logger: log.logger)
        let a = try c.lookup("a").get().ino, b = try c.lookup("b").get().ino, cc = try c.lookup("c").get().ino
        XCTAssertEqual(try c.list(a).get().count, 2000)
        XCTAssertEqual(try c.list(b).get().count, 2000)
        XCTAssertEqual(c.core.state.withLock { $0.table.listingBytes }, 2 * one)
        XCTAssertEqual(try c.list(cc).map(\.count), .failure(FSErrno(EIO)), "the third listing does not fit")
        XCTAssertEqual(try c.lookup("episode 00001.mkv", in: cc).map(\.size), .failure(FSErrno(EIO)))
        XCTAssertEqual(c.core.state.withLock { $0.table.listingBytes }, 2 * one, "nothing of it was kept")
        let line = try XCTUnwrap(log.lines.first { $0.contains("directory listing failed") }, "\(log.lines)")
        XCTAssertTrue(line.contains("http://o/c/") && line.contains("listing memory budget of"), line)

        // The listings that fit stay usable, and one refreshed replaces its own cost.
        XCTAssertEqual(try c.lookup("episode 00001.mkv", in: a).get().size, 1001)
        c.clock.advance(700)
        XCTAssertEqual(try c.list(b).get().count, 2000)
        XCTAssertEqual(c.core.state.withLock { $0.table.listingBytes }, 2 * one)
    }

    /// A refused listing is not fetched and parsed again on every look (a hostile page would cost
    /// its parse per `ls`): looks within the retry delay get the same answer.
    func testARefusedListingIsAskedAgainOnlyAfterTheRetryDelay() throws {
        backend.setFile("http://o/a/", ListingCostTests.nginxAutoindex("/a/", files(100)))
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingBudget = try cost("a", 100) - 1
        let c = CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/a/")]),
                          options: options)
        XCTAssertEqual(try c.list().map(\.count), .failure(FSErrno(EIO)))
        XCTAssertEqual(try c.list().map(\.count), .failure(FSErrno(EIO)))
        XCTAssertEqual(try c.lookup("episode 00001.mkv").map(\.size), .failure(FSErrno(EIO)))
        XCTAssertEqual(backend.opens, ["http://o/a/"], "one fetch for three looks")
        c.clock.advance(FileSystemCore.listingRetryDelay + 1)
        XCTAssertEqual(try c.list().map(\.count), .failure(FSErrno(EIO)))
        XCTAssertEqual(backend.opens, ["http://o/a/", "http://o/a/"])
    }

    func testAListingLeavingTheTreeGivesItsShareBack() throws {
        backend.setFile("http://o/a/", ListingCostTests.nginxAutoindex("/a/", files(2000)))
        backend.setFile("http://o/b/", ListingCostTests.nginxAutoindex("/b/", files(2000)))
        // "a" lists a subdirectory "sub/" with its own listing.
        let top = Array("<html><body><pre><a href=\"sub/\">sub/</a>  04-Jan-2024 10:00  -\n</pre></body></html>".utf8)
        backend.setFile("http://o/top/", top)
        backend.setFile("http://o/top/sub/", ListingCostTests.nginxAutoindex("/top/sub/", files(2000)))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("top = http://o/top/"),
                                                     try MountTreeSpec.parseIndex("b = http://o/b/")])
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingStaleWindow = 0   // an expired listing is fetched before it is shown
        let one = try cost("a", 2000)
        options.listingBudget = one + one / 2
        let c = CoreCalls(backend: backend, tree: tree, options: options)
        let top_ = try c.lookup("top").get().ino
        XCTAssertEqual(try c.list(top_).get(), ["sub"])
        let sub = try c.lookup("sub", in: top_).get().ino
        XCTAssertEqual(try c.list(sub).get().count, 2000)
        let b = try c.lookup("b").get().ino
        XCTAssertEqual(try c.list(b).map(\.count), .failure(FSErrno(EIO)))
        // "sub" leaves the top listing: its share comes back, and "b" fits.
        backend.setFile("http://o/top/", Array("<html><body><pre></pre></body></html>".utf8))
        c.clock.advance(700)
        XCTAssertEqual(try c.list(top_).get(), [])
        c.clock.advance(700)
        XCTAssertEqual(try c.list(b).get().count, 2000)
    }
}
