@testable import HLS
import XCTest

/// The one playlist rule the proxy and `preload` share, as a table.
final class PlaylistRecognitionTests: XCTestCase {
    func testCandidacyTable() {
        let mib: Int64 = 1 << 20
        let rows: [(type: String?, url: String, length: Int64?, expected: HLSPlaylist.Candidacy)] = [
            ("application/vnd.apple.mpegurl", "http://a/x", nil, .byContentType),
            ("Audio/X-MPEGURL; charset=utf-8", "http://a/big.bin", 100 * mib, .byContentType),
            (nil, "http://a/list.m3u8", nil, .byFirstBytes),
            ("application/octet-stream", "http://a/list.M3U", 100 * mib, .byFirstBytes),
            ("text/plain", "http://a/x", mib, .byFirstBytes),
            ("text/plain", "http://a/x", mib + 1, .no),
            ("binary/octet-stream", "http://a/x", nil, .no),
            ("application/octet-stream", "http://a/x", 10, .byFirstBytes),
            ("video/mp2t", "http://a/list.m3u8", 10, .no),
            ("application/json", "http://a/x", 10, .no),
            ("image/png", "http://a/x", 10, .no),
        ]
        for row in rows {
            XCTAssertEqual(HLSPlaylist.candidacy(contentType: row.type, url: row.url, finalURL: row.url, length: row.length),
                           row.expected, "\(row)")
        }
        // The name after redirects counts too.
        XCTAssertEqual(HLSPlaylist.candidacy(contentType: nil, url: "http://a/get?id=1", finalURL: "http://cdn/v/index.m3u8",
                                             length: nil), .byFirstBytes)
    }

    /// The extension of the path's last segment: never of the host, a query or a fragment.
    func testPathExtensionIsThePathsOwn() {
        let rows: [(String, String?)] = [
            ("http://a/v/index.M3U8", "m3u8"), ("http://a/v/index.m3u8?token=x.mp4", "m3u8"),
            ("https://a:8080/v/film.mp4#t=10.5", "mp4"), ("http://a/get?id=1.m3u8", nil),
            ("http://cdn.example.com", nil), ("http://cdn.example.com/", nil), ("http://a/v/.hidden", nil),
            ("http://a/v/name.", nil), ("http://a/%E2%82%AC.ts", "ts"),
            ("http://a?b=c.m3u8", nil), ("/relative/seg.ts?x", "ts"),
        ]
        for (url, ext) in rows { XCTAssertEqual(MediaTypeHints.pathExtension(of: url), ext, url) }
    }
}
