import Foundation
@testable import FuseMount
import XCTest

/// rclone's `--attr-timeout`: the longest the kernel keeps an entry's attributes; never longer
/// than the cache trusts them (`revalidateAfter`, a listing's TTL).
final class AttrTimeoutTests: XCTestCase {
    func testTheKernelKeepsAttributesAtMostTheAttrTimeout() throws {
        let url = "http://o/attr/"
        let cases: [(attrTimeout: TimeInterval?, revalidate: TimeInterval, listing: TimeInterval, ttl: TimeInterval)] = [
            (nil, 600, 300, 300),    // as long as the listing is trusted
            (1, 600, 300, 1),        // rclone's default
            (0, 600, 300, 0),        // every stat asks the daemon
            (3600, 600, 300, 300),   // never longer than the cache trusts it
        ]
        for c in cases {
            let backend = FakeBackend()
            backend.setFile(url, ListingCostTests.nginxAutoindex("/attr/", [("a.mkv", 1)]))
            var options = MountOptions(revalidateAfter: c.revalidate, listingTTL: c.listing)
            options.attrTimeout = c.attrTimeout
            let calls = CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(url)]), options: options)
            XCTAssertEqual(try calls.lookup("a.mkv").get().ttl, c.ttl, "\(c)")
        }
    }
}
