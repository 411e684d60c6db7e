import CacheCore
import Proxy
import TestSupport
import XCTest

/// `preload` through a daemon warms the cache through its proxy: its requests say so
/// (`ProxyURL.warmUpHeader`), and their reader is a background one, counted as warm-up on the
/// status page and in /metrics and fetched with what the link has left, not as a player.
final class ProxyWarmUpTests: XCTestCase {
    func testARequestThatWarmsTheCacheIsReadAsBackgroundNotAsAPlayer() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        let data = testBytes(1 << 20)
        h.origin.setFile("/film.mkv", data: data, contentType: "video/x-matroska")   // no playlist sniff
        let warm = try h.get(h.path("/film.mkv"), [(ProxyURL.warmUpHeader, "1")])
        XCTAssertEqual(warm.status, 200)
        XCTAssertEqual(warm.body, data)
        let readers = try XCTUnwrap(h.engine.metrics.totals.readers)
        XCTAssertGreaterThan(readers["background"]?.reads ?? 0, 0, "preload's reads count as background: \(readers)")
        XCTAssertEqual(readers["player"]?.reads ?? 0, 0, "and none as a player's")
        let play = try h.get(h.path("/film.mkv"), [("Range", "bytes=0-99")])
        XCTAssertEqual(play.status, 206)
        XCTAssertGreaterThan(h.engine.metrics.totals.readers?["player"]?.reads ?? 0, 0, "a request without it is a player's")
    }
}
