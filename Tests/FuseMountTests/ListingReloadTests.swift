import CacheCore
import Foundation
import Glibc
import XCTest
@testable import FuseMount
import TestSupport

/// A listing's fetch outlives what it was for: a reload gives its directory another listing URL
/// while the fetch is held at the origin. The callers that waited are still answered, and the
/// old listing's names never land under the new URL.
final class ListingReloadTests: XCTestCase {
    let backend = FakeBackend()
    let old = "http://o/old/"
    let new = "http://o/new/"

    func tree(_ url: String) throws -> MountTreeSpec {
        try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(url)])
    }

    func testAReloadDuringAListingFetchAnswersItsWaitersAndKeepsItsNamesOutOfTheNewListing() throws {
        backend.setFile(old, ListingCostTests.nginxAutoindex("/old/", [("a.bin", 3)]))
        backend.setFile(new, ListingCostTests.nginxAutoindex("/new/", [("z.bin", 3)]))
        backend.setHeld(old)
        let c = CoreCalls(backend: backend, tree: try tree(old))

        // Never listed: this lookup waits for the old listing, which the origin holds.
        let answered = DispatchSemaphore(value: 0)
        c.core.lookup(parent: InodeTable.rootIno, name: "a.bin") { _ in answered.signal() }
        backend.wait { backend.heldCount > 0 }
        XCTAssertEqual(backend.heldCount, 1, "the old listing's fetch is under way")

        c.core.reload(spec: try tree(new))
        backend.releaseHeld()
        XCTAssertEqual(answered.wait(timeout: .now() + 20), .success, "the lookup that waited for the old listing is answered")
        XCTAssertEqual(try c.list().get(), ["z.bin"], "the new listing, without the old one's names")
    }
}
