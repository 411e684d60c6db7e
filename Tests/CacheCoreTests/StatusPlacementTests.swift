@testable import CacheCore
import Foundation
import XCTest

/// The status views split every cached URL at each request (`FileStatus.placement`,
/// `CacheEngine.displayName`); `PlainURL` does it by hand for the URLs the cache keeps, and must
/// give what `URLComponents` gave, which still reads everything else.
final class StatusPlacementTests: XCTestCase {
    func testPlainURLsSplitAsURLComponentsDid() {
        let rows: [(url: String, origin: String, folder: String, kind: String, name: String)] = [
            ("http://h.example/films/a.mkv", "http://h.example", "/films/", "file", "a.mkv"),
            ("https://h.example:8443/a/b/c.mp4?token=1/2", "https://h.example:8443", "/a/b/", "file", "c.mp4"),
            ("http://u:pw@h.example/x/y.mkv", "http://h.example", "/x/", "file", "y.mkv"),
            ("http://[::1]:8080/tv/", "http://[::1]:8080", "/tv/", "listing", "tv"),
            ("http://127.0.0.1:18890/Show%2001/Episode%20001.mkv", "http://127.0.0.1:18890", "/Show 01/", "file", "Episode 001.mkv"),
            ("http://h.example", "http://h.example", "/", "listing", "http://h.example"),
            ("http://h.example?q=1", "http://h.example", "/", "listing", "http://h.example?q=1"),
            ("http://h.example/Zero%20Hour%20(1995).mkv", "http://h.example", "/", "file", "Zero Hour (1995).mkv"),
        ]
        for row in rows {
            XCTAssertNotNil(PlainURL(row.url), row.url)
            let place = FileStatus.placement(url: row.url, contentType: nil)
            XCTAssertEqual(place.origin, row.origin, row.url)
            XCTAssertEqual(place.folder, row.folder, row.url)
            XCTAssertEqual(place.kind, row.kind, row.url)
            XCTAssertEqual(CacheEngine.displayName(row.url), row.name, row.url)
        }
    }

    func testAnythingElseGoesThroughURLComponents() {
        for url in ["http://h.example/a b.mkv", "http://h.example/a.mkv#t=10", "http://[::1/a", "http://h.example:x/a", "no-scheme/a.mkv",
                    "http://h.example/é.mkv"] {
            XCTAssertNil(PlainURL(url), url)
        }
        XCTAssertEqual(FileStatus.placement(url: "no-scheme/a.mkv", contentType: nil).origin, "no-scheme/a.mkv")
        XCTAssertEqual(FileStatus.placement(url: "http://h.example/page", contentType: "text/html; charset=utf-8").kind, "listing")
    }
}
