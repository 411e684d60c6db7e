import CacheCore
import Foundation
import Glibc
import XCTest
@testable import FuseMount
import TestSupport

/// Stale-while-revalidate listings, with a clock the test moves and a backend that answers when
/// the test says: a listing past `--index-ttl` is served at once and refreshed in the background,
/// one refresh at a time, and an origin that is down gets no storm of refreshes.
final class StaleListingTests: XCTestCase {
    let backend = FakeBackend()
    let pub = "http://o/pub/"
    /// The core's log: it logs each listing fetch it applies ("listed", "directory listing
    /// failed"), which is the event the waits below wake on.
    let log = RecordedLog()

    func listing(_ names: [String]) -> [UInt8] {
        ListingCostTests.nginxAutoindex("/pub/", names.map { ($0, 3) })
    }

    func calls(ttl: TimeInterval = 60) throws -> CoreCalls {
        backend.setFile(pub, listing(["a.bin"]))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(pub)])
        let c = CoreCalls(backend: backend, tree: tree, options: MountOptions(listingTTL: ttl), logger: log.logger)
        XCTAssertEqual(try c.list().get(), ["a.bin"])
        return c
    }

    /// Listing fetches the core has applied, as it logs them ("listed …" or "… listing failed").
    var listingsApplied: Int { log.lines.filter { $0.contains(" listed \(pub)") || $0.contains("directory listing failed") }.count }

    /// Looks (each `ls` is answered at once; a stale one starts the refresh) until `names` show,
    /// looking again only once the core has applied another listing fetch (it logs each).
    func waitForListing(_ c: CoreCalls, _ names: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        var applied = listingsApplied
        while try c.list().get() != names {
            guard log.wait(timeout: 20, until: { listingsApplied > applied }) else {
                return XCTFail("the listing never became \(names)", file: file, line: line)
            }
            applied = listingsApplied
        }
    }

    func testAStaleListingIsServedAtOnceThenTheRefreshedOne() throws {
        let c = try calls()
        backend.setFile(pub, listing(["a.bin", "b.bin"]))
        backend.setHeld(pub)
        c.clock.advance(61)
        // The refresh is held at the origin: these answers cannot have waited for it.
        XCTAssertEqual(try c.list().get(), ["a.bin"], "the old listing, at once")
        XCTAssertEqual(try c.list().get(), ["a.bin"])
        XCTAssertEqual(try c.lookup("b.bin"), .failure(FSErrno(ENOENT)), "a name the old listing lacks is answered at once too")
        XCTAssertEqual(backend.opens, [pub, pub], "one refresh in flight for the listing, however many looks")
        XCTAssertEqual(backend.heldCount, 1)
        backend.releaseHeld()
        try waitForListing(c, ["a.bin", "b.bin"])
        XCTAssertEqual(try c.lookup("b.bin").get().size, 3)
        XCTAssertEqual(backend.opens, [pub, pub], "fresh again: no further refresh")
    }

    func testAListingPastTheStaleWindowIsRefreshedBeforeItIsShown() throws {
        let c = try calls()
        backend.setFile(pub, listing(["a.bin", "b.bin"]))
        c.clock.advance(60 + MountOptions(listingTTL: 60).listingStaleWindow + 1)
        XCTAssertEqual(try c.list().get(), ["a.bin", "b.bin"], "a directory nobody looked at for long waits for its listing")
    }

    func testAnOriginThatIsDownGetsOneRefreshPerRetryDelayNotOnePerLook() throws {
        let c = try calls()
        backend.setError(pub, .unreachable(url: pub, message: "the origin http://o is down"))
        c.clock.advance(61)
        for _ in 0..<20 {
            XCTAssertEqual(try c.list().get(), ["a.bin"])
            XCTAssertEqual(try c.lookup("a.bin").get().size, 3)
        }
        try waitForOpens(2)
        try waitUntilNoRefreshRuns(c)
        // A look that found the listing stale just before the failure landed (the age is judged
        // before the refresh is asked for) asks for its refresh only now: it gets none.
        c.core.refreshInBackground(dirIno: InodeTable.rootIno)
        for _ in 0..<20 { XCTAssertEqual(try c.list().get(), ["a.bin"]) }
        XCTAssertEqual(backend.opens.count, 2, "the failed refresh holds the next one back")
        c.clock.advance(FileSystemCore.listingRetryDelay + 1)
        XCTAssertEqual(try c.list().get(), ["a.bin"])
        try waitForOpens(3)
    }

    /// The flaky `testSIGHUPReadsEveryListingAgain`: under load one request failed to connect,
    /// which marks the origin down; SIGHUP's re-read then got the cache's copy of the listing
    /// (the engine asks no origin that is down, whatever the max age) and applied it as freshly
    /// read, so the file added at the origin stayed hidden for the whole --index-ttl (1 h there).
    /// A listing served for an origin that is down is reported as not re-read, and stays in use
    /// past its TTL: the next look, once the origin is back, refreshes it.
    func testARefreshWhileTheOriginIsDownIsNoReReadAndTheNextLookAsksAgain() throws {
        let c = try calls(ttl: 3600)
        backend.setOriginDown(true)
        let refreshed = try refresh(c)
        XCTAssertEqual(refreshed.listings, 0)
        XCTAssertEqual(refreshed.failures, ["\(pub): the origin is down; the cached listing stays in use and is asked again on the next look"])
        XCTAssertEqual(try c.list().get(), ["a.bin"], "the cached listing stays in use")
        // That look started a refresh (answered from the cache again): let it end first.
        try waitUntilNoRefreshRuns(c)

        backend.setOriginDown(false)
        backend.setFile(pub, listing(["a.bin", "b.bin"]))
        try waitForListing(c, ["a.bin", "b.bin"])
        let opens = backend.openCount
        XCTAssertEqual(try c.list().get(), ["a.bin", "b.bin"])
        XCTAssertEqual(backend.openCount, opens, "read from the origin again: fresh for its TTL")
    }

    /// A refresh that fails (a timeout under load) keeps the listing in use, past its TTL: the
    /// next look asks again rather than showing the old listing for the whole --index-ttl.
    func testAFailedRefreshLeavesTheListingForTheNextLookToAskAgain() throws {
        let c = try calls(ttl: 3600)
        backend.setError(pub, .timeout(url: pub))
        XCTAssertEqual(try refresh(c).failures, ["\(pub): \(CacheError.timeout(url: pub))"])
        backend.setError(pub, nil)
        backend.setFile(pub, listing(["a.bin", "b.bin"]))
        try waitForListing(c, ["a.bin", "b.bin"])
    }

    /// A refresh the origin answered counts as re-read, and its listing is fresh for its TTL.
    func testARefreshTheOriginAnswersIsFreshForItsTTL() throws {
        let c = try calls(ttl: 3600)
        backend.setFile(pub, listing(["a.bin", "b.bin"]))
        XCTAssertEqual(try refresh(c), ListingRefresh(listings: 1, failures: []))
        let opens = backend.openCount
        XCTAssertEqual(try c.list().get(), ["a.bin", "b.bin"])
        XCTAssertEqual(backend.openCount, opens)
    }

    private func refresh(_ c: CoreCalls) throws -> ListingRefresh {
        let done = DispatchSemaphore(value: 0)
        let box = RefreshBox()
        c.core.refreshListings(under: []) { box.value = $0; done.signal() }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        return try XCTUnwrap(box.value ?? nil)
    }

    func testTheDefaultTTLIsAMinuteWhateverRevalidateAfterSays() {
        XCTAssertEqual(MountOptions().listingTTL, 60)
        XCTAssertEqual(MountOptions(revalidateAfter: 0).listingTTL, 60)
        XCTAssertEqual(MountOptions(revalidateAfter: 0, listingTTL: 5).listingTTL, 5)
    }

    /// The root listing's refresh has ended (its failure applied).
    private func waitUntilNoRefreshRuns(_ c: CoreCalls, file: StaticString = #filePath, line: UInt = #line) throws {
        // Looked at again after each line the core logs: a refresh ends with one.
        if !log.wait(timeout: 20, until: { !c.core.state.withLock({ $0.table.root.directory?.index?.fetching ?? false }) }) {
            XCTFail("the refresh never ended", file: file, line: line)
        }
    }

    private func waitForOpens(_ n: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        if !backend.wait(until: { backend.opens.count >= n }) {
            XCTFail("never \(n) opens: \(backend.opens)", file: file, line: line)
        }
    }
}

private final class RefreshBox: @unchecked Sendable {
    var value: ListingRefresh??
}
