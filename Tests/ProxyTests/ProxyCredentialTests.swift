import CacheCore
import Fetcher
import Foundation
import Proxy
import TestSupport
import XCTest

/// Credentials are part of who may read: bytes fetched with them go to requests with the same.
final class ProxyCredentialTests: XCTestCase {
    /// The issue's case: bytes fetched for `user:pw@` were served to a request without them.
    func testBytesFetchedWithCredentialsAreNotServedToARequestWithout() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        h.origin.setFile("/private.mp4", data: testBytes(5000))
        let withCredentials = h.origin.url("/private.mp4").replacingOccurrences(of: "http://", with: "http://u:pw@")
        XCTAssertEqual(try h.get(h.signed(withCredentials)).status, 200)
        XCTAssertEqual(try h.get(h.signed(withCredentials)).status, 200)
        XCTAssertEqual(h.origin.requestCount(path: "/private.mp4"), 1, "the same credentials: a hit")
        XCTAssertEqual(try h.get(h.path("/private.mp4")).status, 200)
        XCTAssertEqual(h.origin.requestCount(path: "/private.mp4"), 2, "without them: the origin decides")
        let wrong = withCredentials.replacingOccurrences(of: "u:pw@", with: "u:wrong@")
        XCTAssertEqual(try h.get(h.signed(wrong)).status, 200)
        XCTAssertEqual(h.origin.requestCount(path: "/private.mp4"), 3, "other ones: the origin decides")
    }
}
