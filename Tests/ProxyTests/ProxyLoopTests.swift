import CacheCore
import Fetcher
import Foundation
import Proxy
import TestSupport
import XCTest

/// A request that comes back to the proxy that sent it (an origin redirecting into the proxy)
/// ends at once with 508, instead of hopping until it takes every connection.
final class ProxyLoopTests: XCTestCase {
    func testAnOriginThatRedirectsIntoTheProxyEndsInOneHop() throws {
        var configuration = ProxyConfiguration(port: 0)
        configuration.loopMarker = "httpcachefs-looptest"
        var fetcher = FetcherConfiguration(clock: .realTime, lowSpeedTime: 2, maxRetries: 3, retryBaseDelay: 0.01)
        fetcher.via = "1.1 httpcachefs-looptest"
        let h = try ProxyHarness(configuration: configuration, fetcher: fetcher)
        defer { h.shutdown() }
        h.origin.setFile("/film.mp4", data: testBytes(1000))
        // Each hop asks the proxy for a new URL, so no cache entry can stop it.
        h.origin.setFaults("/loop.mp4", Faults(redirectTo: h.url("/loop.mp4") + "?hop"))

        let looped = try h.get(h.path("/loop.mp4"))
        XCTAssertGreaterThanOrEqual(looped.status, 500, "the loop is an error for the client")
        XCTAssertEqual(h.origin.requestCount(path: "/loop.mp4"), 1, "one hop, not retried")
        XCTAssertEqual(try h.get(h.path("/film.mp4")).status, 200, "other requests are served")

        let direct = try h.get(h.path("/film.mp4"), [("Via", "1.1 other, 1.1 httpcachefs-looptest")])
        XCTAssertEqual(direct.status, 508)
        XCTAssertEqual(try h.get(h.path("/film.mp4"), [("Via", "1.1 httpcachefs-another-daemon")]).status, 200,
                       "another daemon's requests are served")
    }
}
