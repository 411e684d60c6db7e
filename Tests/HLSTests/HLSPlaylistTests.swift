import XCTest
@testable import HLS

/// Rewriting sends every fetchable URI of a playlist back through the proxy.
final class HLSPlaylistTests: XCTestCase {
    /// Marks rewritten URLs so expectations read plainly.
    func proxied(_ url: String) -> String { "P(\(url))" }

    func rewrite(_ text: String, at url: String) -> String {
        HLSPlaylist.rewrite(text, playlistURL: url, transform: proxied)
    }

    func testMasterPlaylist() {
        let master = """
        #EXTM3U
        #EXT-X-VERSION:6
        #EXT-X-SESSION-KEY:METHOD=AES-128,URI="keys/session.key"
        #EXT-X-SESSION-DATA:DATA-ID="com.example.title",URI="/meta/title.json"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English, US",DEFAULT=YES,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",INSTREAM-ID="CC1"
        #EXT-X-STREAM-INF:BANDWIDTH=1280000,CODECS="avc1.4d401f,mp4a.40.2",AUDIO="aud"
        low/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,AUDIO="aud"
        https://other.example.net/high/index.m3u8?token=abc
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI="low/iframe.m3u8"

        """
        let expected = """
        #EXTM3U
        #EXT-X-VERSION:6
        #EXT-X-SESSION-KEY:METHOD=AES-128,URI="P(http://cdn.test/show/keys/session.key)"
        #EXT-X-SESSION-DATA:DATA-ID="com.example.title",URI="P(http://cdn.test/meta/title.json)"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English, US",DEFAULT=YES,URI="P(http://cdn.test/show/audio/en.m3u8)"
        #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",INSTREAM-ID="CC1"
        #EXT-X-STREAM-INF:BANDWIDTH=1280000,CODECS="avc1.4d401f,mp4a.40.2",AUDIO="aud"
        P(http://cdn.test/show/low/index.m3u8)
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,AUDIO="aud"
        P(https://other.example.net/high/index.m3u8?token=abc)
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI="P(http://cdn.test/show/low/iframe.m3u8)"

        """
        XCTAssertEqual(rewrite(master, at: "http://cdn.test/show/master.m3u8"), expected)
    }

    func testMediaPlaylistWithKeysMapsAndLowLatencyTags() {
        let media = """
        #EXTM3U
        #EXT-X-TARGETDURATION:4
        #EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"
        #EXT-X-KEY:METHOD=AES-128,URI="https://keys.test/k1",IV=0x1234
        #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://fairplay-id",KEYFORMAT="com.apple.streamingkeydelivery"
        #EXTINF:4.0,
        seg1.m4s
        #EXT-X-PART:DURATION=1.0,URI="seg2.part1.m4s"
        #EXT-X-PRELOAD-HINT:TYPE=PART,URI="seg2.part2.m4s"
        #EXT-X-RENDITION-REPORT:URI="../alt/index.m3u8",LAST-MSN=2
        #EXTINF:4.0,
        /abs/seg2.m4s
        """
        let expected = """
        #EXTM3U
        #EXT-X-TARGETDURATION:4
        #EXT-X-MAP:URI="P(http://cdn.test/a/b/init.mp4)",BYTERANGE="720@0"
        #EXT-X-KEY:METHOD=AES-128,URI="P(https://keys.test/k1)",IV=0x1234
        #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://fairplay-id",KEYFORMAT="com.apple.streamingkeydelivery"
        #EXTINF:4.0,
        P(http://cdn.test/a/b/seg1.m4s)
        #EXT-X-PART:DURATION=1.0,URI="P(http://cdn.test/a/b/seg2.part1.m4s)"
        #EXT-X-PRELOAD-HINT:TYPE=PART,URI="P(http://cdn.test/a/b/seg2.part2.m4s)"
        #EXT-X-RENDITION-REPORT:URI="P(http://cdn.test/a/alt/index.m3u8)",LAST-MSN=2
        #EXTINF:4.0,
        P(http://cdn.test/abs/seg2.m4s)
        """
        XCTAssertEqual(rewrite(media, at: "http://cdn.test/a/b/index.m3u8"), expected)
    }

    /// References resolve against where the playlist really came from, not the URL asked for.
    func testRedirectedPlaylistResolvesAgainstItsFinalURL() {
        let out = rewrite("#EXTM3U\n#EXTINF:2,\nseg.ts\n", at: "https://edge7.cdn.test/live/abc/index.m3u8")
        XCTAssertEqual(out, "#EXTM3U\n#EXTINF:2,\nP(https://edge7.cdn.test/live/abc/seg.ts)\n")
    }

    func testCRLFAndOddLinesPassThrough() {
        let odd = "#EXTM3U\r\n#EXT-X-KEY:METHOD=NONE\r\n#EXT-X-WEIRD:URI=\"x\r\n# a comment\r\n\r\n#EXT-X-MAP:URI=\"unterminated\r\nhttp://[broken/x.ts\r\n  seg.ts  \r\n"
        let out = rewrite(odd, at: "http://o.test/p/list.m3u8")
        XCTAssertEqual(out, "#EXTM3U\r\n#EXT-X-KEY:METHOD=NONE\r\n#EXT-X-WEIRD:URI=\"x\r\n# a comment\r\n\r\n#EXT-X-MAP:URI=\"unterminated\r\nhttp://[broken/x.ts\r\nP(http://o.test/p/seg.ts)\r\n")
        // Garbage must not crash.
        _ = rewrite(String(decoding: (0..<2000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }, as: UTF8.self), at: "http://o.test/x.m3u8")
        _ = HLSPlaylistInfo(parsing: "#EXT-X-STREAM-INF:\n#EXT-X-STREAM-INF:BANDWIDTH=x\n\n#EXT-X-TARGETDURATION:abc", playlistURL: "http://o.test/")
    }

    func testAByteOrderMarkBeforeTheHeaderKeepsItAHeader() {
        let text = "\u{FEFF}#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.key\"\n#EXTINF:2,\nseg.ts\n#EXT-X-ENDLIST\n"
        XCTAssertEqual(rewrite(text, at: "http://o.test/p/list.m3u8"),
                       "\u{FEFF}#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"P(http://o.test/p/k.key)\"\n#EXTINF:2,\nP(http://o.test/p/seg.ts)\n#EXT-X-ENDLIST\n")
        let info = HLSPlaylistInfo(parsing: text, playlistURL: "http://o.test/p/list.m3u8")
        XCTAssertEqual(info.resources, ["http://o.test/p/k.key", "http://o.test/p/seg.ts"], "the header is not a segment to preload")
        XCTAssertTrue(info.hasEndList)
    }

    func testLinesEndOnlyAtLineFeedsForTheParserAsForTheRewrite() {
        // RFC 8216 4.1: lines end with LF or CRLF. A lone CR or a Unicode line separator inside a
        // line is not a line break for players, so it is not one for the preloader either.
        let text = "#EXTM3U\r\n#EXTINF:2,\r\na.ts\u{2028}b.ts\r\n#EXTINF:2,\rc.ts\r\n"
        let info = HLSPlaylistInfo(parsing: text, playlistURL: "http://o.test/p/list.m3u8")
        let rewritten = rewrite(text, at: "http://o.test/p/list.m3u8")
        XCTAssertEqual(info.resources.count, rewritten.components(separatedBy: "P(").count - 1)
    }

    func testABareURIAttributeIsRewrittenAndPreloadedAlike() {
        // Found by Fuzz/FuzzHLSPlaylist: the preloader read URI=init.mp4 (no quotes), the rewrite
        // left it alone, so the player fetched it past the proxy.
        let text = "#EXTM3U\n#EXT-X-MAP:URI=init.mp4,BYTERANGE=\"720@0\"\n#EXT-X-KEY:METHOD=AES-128,URI=\n#EXTINF:2,\nseg.ts\n"
        XCTAssertEqual(rewrite(text, at: "http://o.test/p/list.m3u8"),
                       "#EXTM3U\n#EXT-X-MAP:URI=\"P(http://o.test/p/init.mp4)\",BYTERANGE=\"720@0\"\n#EXT-X-KEY:METHOD=AES-128,URI=\n#EXTINF:2,\nP(http://o.test/p/seg.ts)\n")
        XCTAssertEqual(HLSPlaylistInfo(parsing: text, playlistURL: "http://o.test/p/list.m3u8").resources,
                       ["http://o.test/p/init.mp4", "http://o.test/p/seg.ts"], "an empty URI names nothing")
    }

    func testRecognition() {
        XCTAssertTrue(HLSPlaylist.isPlaylist(contentType: "application/vnd.apple.mpegurl", firstBytes: []))
        XCTAssertTrue(HLSPlaylist.isPlaylist(contentType: "application/x-mpegURL; charset=utf-8", firstBytes: []))
        XCTAssertTrue(HLSPlaylist.isPlaylist(contentType: "audio/mpegurl", firstBytes: []))
        XCTAssertTrue(HLSPlaylist.isPlaylist(contentType: "text/plain", firstBytes: Array("#EXTM3U\n#EXT".utf8)))
        XCTAssertTrue(HLSPlaylist.isPlaylist(contentType: nil, firstBytes: [0xEF, 0xBB, 0xBF] + Array("#EXTM3U".utf8)))
        XCTAssertFalse(HLSPlaylist.isPlaylist(contentType: "video/mp4", firstBytes: [0, 0, 0, 0x20, 0x66, 0x74]))
        XCTAssertFalse(HLSPlaylist.isPlaylist(contentType: nil, firstBytes: Array("#EXTM".utf8)))
    }

    func testLiveAndVODAreToldApart() {
        let live = HLSPlaylistInfo(parsing: "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6,\na.ts\n", playlistURL: "http://o/x.m3u8")
        XCTAssertTrue(live.isLive)
        XCTAssertEqual(live.targetDuration, 6)
        XCTAssertEqual(PlaylistLoader.refreshAge(live), 3)
        let vod = HLSPlaylistInfo(parsing: "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6,\na.ts\n#EXT-X-ENDLIST\n", playlistURL: "http://o/x.m3u8")
        XCTAssertFalse(vod.isLive)
        let typed = HLSPlaylistInfo(parsing: "#EXTM3U\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:6,\na.ts\n", playlistURL: "http://o/x.m3u8")
        XCTAssertFalse(typed.isLive)
        let master = HLSPlaylistInfo(parsing: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n", playlistURL: "http://o/x.m3u8")
        XCTAssertFalse(master.isLive, "a master playlist is not refreshed like a live media playlist")
    }

    func testParsesWhatThePreloaderNeeds() {
        let media = HLSPlaylistInfo(parsing: """
        #EXTM3U
        #EXT-X-MAP:URI="init.mp4"
        #EXT-X-KEY:METHOD=AES-128,URI="k.key"
        #EXTINF:4,
        #EXT-X-BYTERANGE:1000@0
        s.m4s
        #EXT-X-BYTERANGE:1000@1000
        s.m4s
        #EXTINF:4,
        t.m4s
        #EXT-X-ENDLIST
        """, playlistURL: "http://o/v/p.m3u8")
        XCTAssertEqual(media.resources, ["http://o/v/init.mp4", "http://o/v/k.key", "http://o/v/s.m4s", "http://o/v/t.m4s"])
        XCTAssertTrue(media.hasEndList)
    }

    func testVariantChoice() {
        let master = HLSPlaylistInfo(parsing: """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="lo",NAME="a",URI="a-lo.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="hi",NAME="a",URI="a-hi.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="en",URI="subs.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=500000,AUDIO="lo"
        v500.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=3000000,AUDIO="hi",SUBTITLES="subs"
        v3000.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=1000000,AUDIO="lo"
        v1000.m3u8
        """, playlistURL: "http://o/m.m3u8")
        XCTAssertEqual(HLSPreloader.mediaPlaylists(of: master, choice: .best),
                       ["http://o/v3000.m3u8", "http://o/a-hi.m3u8", "http://o/subs.m3u8"])
        XCTAssertEqual(HLSPreloader.mediaPlaylists(of: master, choice: .bandwidth(1000000)), ["http://o/v1000.m3u8", "http://o/a-lo.m3u8"])
        XCTAssertEqual(HLSPreloader.mediaPlaylists(of: master, choice: .bandwidth(2000000)), ["http://o/v1000.m3u8", "http://o/a-lo.m3u8"])
        XCTAssertEqual(HLSPreloader.mediaPlaylists(of: master, choice: .bandwidth(1)), ["http://o/v500.m3u8", "http://o/a-lo.m3u8"])
        XCTAssertEqual(HLSPreloader.mediaPlaylists(of: master, choice: .all).count, 6)
        XCTAssertEqual(HLSPreloader.VariantChoice(argument: "BEST"), .best)
        XCTAssertEqual(HLSPreloader.VariantChoice(argument: "800000"), .bandwidth(800000))
        XCTAssertNil(HLSPreloader.VariantChoice(argument: "fast"))
    }
}
