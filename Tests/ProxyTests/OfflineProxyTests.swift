import CacheCore
import Foundation
import TestSupport
import XCTest

/// The proxy with its origin stopped: cached bytes are answered, a file never cached gets a 502
/// whose body says why (at once, once the origin is known to be down), and the status document,
/// the page and `/metrics` show the origin down.
final class OfflineProxyTests: XCTestCase {
    func testWithTheOriginStoppedCachedFilesAreServedAndOthersGet502SayingWhy() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        let film = testBytes(1 << 20, seed: 31)
        h.origin.setFile("/film.mp4", data: film, contentType: "video/mp4")
        h.origin.setFile("/never.mp4", data: testBytes(1000, seed: 32), contentType: "video/mp4")
        XCTAssertEqual(try h.get(h.path("/film.mp4")).body, film)
        h.origin.stop()

        let first = try h.get(h.path("/never.mp4"))
        XCTAssertEqual(first.status, 502)
        XCTAssertTrue(String(decoding: first.body, as: UTF8.self).contains("cannot reach origin"),
                      String(decoding: first.body, as: UTF8.self))
        let again = try h.get(h.path("/never.mp4"))
        XCTAssertEqual(again.status, 502)
        XCTAssertTrue(String(decoding: again.body, as: UTF8.self).contains("is down"), String(decoding: again.body, as: UTF8.self))

        let cached = try h.get(h.path("/film.mp4"), [("Range", "bytes=1000-1999")])
        XCTAssertEqual(cached.status, 206)
        XCTAssertEqual(cached.body, Array(film[1000..<2000]))

        let doc = try StatusDocument.decode(try h.owner("/.httpcachefs/status.json").body)
        XCTAssertEqual(doc.originsDown?.map(\.origin), [h.origin.url("")])
        let metrics = String(decoding: try h.owner("/metrics").body, as: UTF8.self)
        XCTAssertTrue(metrics.contains("httpcachefs_origins_down 1"), metrics)
        let page = String(decoding: try h.owner("/.httpcachefs/").body, as: UTF8.self)
        XCTAssertTrue(page.contains("id=\"offline\""), "the page has the banner the document fills")
    }
}
