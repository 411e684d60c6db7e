import CacheCore
import Foundation
@testable import HLS
@testable import Proxy
import TestSupport
import XCTest

/// Playlists through the proxy: every URI the player will fetch comes back through it.
final class ProxyHLSTests: XCTestCase {
    var h: ProxyHarness!
    let hlsType = "application/vnd.apple.mpegurl"

    override func setUpWithError() throws { h = try ProxyHarness() }
    override func tearDown() { h.shutdown() }

    func setPlaylist(_ path: String, _ text: String, type: String? = nil) {
        h.origin.setResponse(path, status: 200, headers: [("Content-Type", type ?? hlsType)], body: Array(text.utf8))
    }

    /// The URIs of a rewritten playlist, decoded back to the originals they stand for.
    func decodedURIs(_ body: [UInt8]) throws -> [String] {
        var out: [String] = []
        for line in String(decoding: body, as: UTF8.self).split(separator: "\n") {
            if line.hasPrefix("#") {
                guard let r = line.range(of: "URI=\"") else { continue }
                let rest = line[r.upperBound...]
                let target = try ProxyURL.decode(path: String(rest.prefix { $0 != "\"" }))
                XCTAssertTrue(target.isSigned(by: h.configuration.signingKey), "signed: \(line)")
                out.append(target.url)
            } else {
                XCTAssertTrue(line.hasPrefix("/s/"), "root-relative signed proxy URL: \(line)")
                let target = try ProxyURL.decode(path: String(line))
                XCTAssertTrue(target.isSigned(by: h.configuration.signingKey), "signed by this proxy: \(line)")
                out.append(target.url)
            }
        }
        return out
    }

    func testRedirectedMasterAndItsMediaPlaylistAreRewritten() throws {
        let o = h.origin.url("")
        h.origin.setFaults("/hls/master.m3u8", Faults(redirectTo: "/cdn/hls/master.m3u8"))
        setPlaylist("/cdn/hls/master.m3u8", """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="en",URI="audio/en.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=800000,AUDIO="a"
        v1/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=1600000,AUDIO="a"
        /abs/v2.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=3200000,AUDIO="a"
        \(o)/elsewhere/v3.m3u8?sig=1

        """)
        let master = try h.get(h.path("/hls/master.m3u8"))
        XCTAssertEqual(master.status, 200)
        XCTAssertEqual(master.header("Content-Type"), hlsType)
        XCTAssertEqual(master.header("Content-Length"), String(master.body.count))
        XCTAssertNil(master.header("ETag"), "the rewritten body is not the origin's")
        XCTAssertEqual(try decodedURIs(master.body), [
            "\(o)/cdn/hls/audio/en.m3u8", "\(o)/cdn/hls/v1/index.m3u8", "\(o)/abs/v2.m3u8", "\(o)/elsewhere/v3.m3u8?sig=1",
        ], "resolved against the final URL after the redirect")

        setPlaylist("/cdn/hls/v1/index.m3u8", """
        #EXTM3U
        #EXT-X-TARGETDURATION:2
        #EXT-X-MAP:URI="init.mp4"
        #EXT-X-KEY:METHOD=AES-128,URI="/keys/k1.key"
        #EXTINF:2,
        seg0.m4s
        #EXT-X-ENDLIST

        """)
        let segment = testBytes(5000, seed: 42)
        h.origin.setFile("/cdn/hls/v1/seg0.m4s", data: segment)
        let variantLine = String(decoding: master.body, as: UTF8.self).split(separator: "\n").first { $0.contains("/u/") && !$0.hasPrefix("#") }!
        let media = try h.get(String(variantLine))
        XCTAssertEqual(media.status, 200)
        XCTAssertEqual(try decodedURIs(media.body), ["\(o)/cdn/hls/v1/init.mp4", "\(o)/keys/k1.key", "\(o)/cdn/hls/v1/seg0.m4s"])
        XCTAssertNil(media.header("Cache-Control"), "VOD: an ordinary cached file")

        let segLine = String(decoding: media.body, as: UTF8.self).split(separator: "\n").last { !$0.hasPrefix("#") }!
        let seg = try h.get(String(segLine))
        XCTAssertEqual(seg.status, 200)
        XCTAssertEqual(seg.body, segment)
        XCTAssertTrue(segLine.hasSuffix("/seg0.m4s"), "the proxy URL keeps the segment's name")
    }

    /// Issue 46, item 4: a signed playlist URL opens what the rewriter signed for it, one
    /// signature per URI (renditions, I-frame and variant playlists, then their keys, maps and
    /// segments, nested playlists rewritten in turn), and nothing else: a name next to the
    /// playlist that no playlist wrote gets 403 and the origin never hears of it.
    func testEveryURIARewrittenPlaylistNamesOpensAndNothingElse() throws {
        setPlaylist("/vod/master.m3u8", """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="en",URI="audio/en.m3u8"
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,URI="iframes.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=800000,AUDIO="a"
        v1/index.m3u8

        """)
        let media = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"/keys/k1.key\"\n#EXTINF:2,\nseg0.m4s\n#EXT-X-ENDLIST\n"
        for playlist in ["/vod/audio/en.m3u8", "/vod/iframes.m3u8", "/vod/v1/index.m3u8"] { setPlaylist(playlist, media) }
        let files = ["/vod/audio/init.mp4", "/vod/audio/seg0.m4s", "/vod/init.mp4", "/vod/seg0.m4s",
                     "/vod/v1/init.mp4", "/vod/v1/seg0.m4s", "/keys/k1.key"]
        for (i, file) in files.enumerated() { h.origin.setFile(file, data: testBytes(300, seed: UInt64(i + 10))) }
        h.origin.setFile("/vod/secret.bin", data: testBytes(100))

        // Breadth first through every URI the rewritten playlists name, as a player would.
        var queue = [h.path("/vod/master.m3u8")], seen: Set<String> = [], opened: Set<String> = []
        while let next = queue.popLast() {
            guard seen.insert(next).inserted else { continue }
            let answer = try h.get(next)
            XCTAssertEqual(answer.status, 200, next)
            let target = try ProxyURL.decode(path: next)
            XCTAssertNil(target.reference, "the rewriter writes each URI's own signed URL: \(next)")
            opened.insert(String(target.url.dropFirst(h.origin.url("").count)))
            guard target.url.hasSuffix(".m3u8") else { continue }
            for line in String(decoding: answer.body, as: UTF8.self).split(separator: "\n") {
                if let r = line.range(of: "URI=\"") {
                    queue.append(String(line[r.upperBound...].prefix { $0 != "\"" }))
                } else if !line.hasPrefix("#") {
                    queue.append(String(line))
                }
            }
        }
        XCTAssertEqual(opened, Set(files + ["/vod/master.m3u8", "/vod/audio/en.m3u8", "/vod/iframes.m3u8", "/vod/v1/index.m3u8"]))

        for playlist in ["/vod/master.m3u8", "/vod/v1/index.m3u8"] {
            let name = String(playlist.split(separator: "/").last!)
            let directory = String(h.path(playlist).dropLast(name.count))
            for reference in ["secret.bin", "../secret.bin", "/vod/secret.bin"] {
                XCTAssertEqual(try h.get(directory + reference).status, 403, "\(playlist): \(reference)")
            }
        }
        XCTAssertEqual(h.origin.requestCount(path: "/vod/secret.bin"), 0)
    }

    func testPlaylistWithAGenericTypeIsRecognisedByItsFirstLine() throws {
        setPlaylist("/x/playlist", "#EXTM3U\n#EXTINF:2,\nchunk-1.ts\n#EXT-X-ENDLIST\n", type: "application/octet-stream")
        let r = try h.get(h.path("/x/playlist"))
        XCTAssertEqual(r.header("Content-Type"), hlsType)
        XCTAssertEqual(try decodedURIs(r.body), [h.origin.url("/x/chunk-1.ts")])
    }

    func testTokenRidesInRewrittenURLs() throws {
        h.shutdown()
        h = try ProxyHarness(configuration: ProxyConfiguration(port: 0, token: "tk"))
        setPlaylist("/p.m3u8", "#EXTM3U\n#EXTINF:2,\ns.ts\n#EXT-X-ENDLIST\n")
        let r = try h.get(h.path("/p.m3u8"))
        XCTAssertEqual(r.status, 200)
        XCTAssertTrue(String(decoding: r.body, as: UTF8.self).contains("\n/t/tk/s/"))
    }

    func testLivePlaylistIsMarkedNoCache() throws {
        setPlaylist("/live.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:1\n#EXTINF:6,\na.ts\n")
        let r = try h.get(h.path("/live.m3u8"))
        XCTAssertEqual(r.header("Cache-Control"), "no-cache")
    }

    /// A live playlist older than half its target duration is fetched again; a VOD one is not.
    func testLiveFreshness() async throws {
        let clock = MovableClock(start: Date())
        let loader = PlaylistLoader(engine: h.engine, now: { clock.now })
        let live = h.origin.url("/tv/live.m3u8"), vod = h.origin.url("/tv/vod.m3u8")
        setPlaylist("/tv/live.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\na.ts\n")
        setPlaylist("/tv/vod.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\na.ts\n#EXT-X-ENDLIST\n")
        _ = try await loader.load(url: live)
        _ = try await loader.load(url: vod)

        setPlaylist("/tv/live.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\na.ts\n#EXTINF:10,\nb.ts\n")
        setPlaylist("/tv/vod.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nchanged.ts\n#EXT-X-ENDLIST\n")

        clock.advance(2)  // younger than 5 s: the cached copy still counts
        let early = try await loader.load(url: live)
        XCTAssertEqual(early?.refreshed, false)
        XCTAssertEqual(early?.info?.resources.count, 1)

        clock.advance(4)  // now older than half the target duration
        let later = try await loader.load(url: live)
        XCTAssertEqual(later?.refreshed, true)
        XCTAssertEqual(later?.info?.resources.count, 2, "the new segment is visible")

        clock.advance(3600)
        let stillVOD = try await loader.load(url: vod)
        XCTAssertEqual(stillVOD?.refreshed, false)
        XCTAssertEqual(stillVOD?.info?.resources, [h.origin.url("/tv/a.ts")], "VOD is a cached file (engine revalidation rules)")
    }

    func testPreloaderFillsTheCacheForTheChosenVariant() async throws {
        setPlaylist("/s/master.m3u8", """
        #EXTM3U
        #EXT-X-STREAM-INF:BANDWIDTH=100000
        low.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=900000
        high.m3u8
        """)
        setPlaylist("/s/low.m3u8", "#EXTM3U\n#EXTINF:2,\nlow0.ts\n#EXT-X-ENDLIST\n")
        setPlaylist("/s/high.m3u8", "#EXTM3U\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:2,\nhigh0.ts\n#EXTINF:2,\nhigh1.ts\n#EXT-X-ENDLIST\n")
        for (i, name) in ["low0.ts", "high0.ts", "high1.ts", "init.mp4"].enumerated() {
            h.origin.setFile("/s/" + name, data: testBytes(300_000 + i, seed: UInt64(i)))
        }
        let progress = ProgressLog()
        let report = try await HLSPreloader(engine: h.engine, variant: .best)
            .run(playlistURL: h.origin.url("/s/master.m3u8")) { done, total, url in progress.add(done, total, url) }
        XCTAssertEqual(report.playlists, 2)
        XCTAssertEqual(report.resources, 3)
        XCTAssertEqual(report.failures, [])
        XCTAssertEqual(report.bytes, 300_001 + 300_002 + 300_003)
        XCTAssertEqual(h.origin.requestCount(path: "/s/low0.ts"), 0, "other variants are left alone")
        XCTAssertEqual(progress.last?.0, report.bytes)
        XCTAssertEqual(progress.last?.1, report.bytes)

        // Everything is now a hit through the proxy.
        h.origin.resetLog()
        let seg = try h.get(h.path("/s/high1.ts"))
        XCTAssertEqual(seg.body, testBytes(300_002, seed: 2))
        XCTAssertEqual(h.origin.bytesServed(path: "/s/high1.ts"), 0)
        let master = try await h.engine.open(url: h.origin.url("/s/master.m3u8"))
        let isPlaylist = try await HLSPlaylist.isPlaylist(engine: h.engine, entry: master)
        XCTAssertTrue(isPlaylist)
        let segment = try await h.engine.open(url: h.origin.url("/s/high1.ts"))
        let isNotPlaylist = try await HLSPlaylist.isPlaylist(engine: h.engine, entry: segment)
        XCTAssertFalse(isNotPlaylist)
    }
}

final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [(Int64, Int64, String)] = []
    func add(_ d: Int64, _ t: Int64, _ u: String) { lock.lock(); entries.append((d, t, u)); lock.unlock() }
    var last: (Int64, Int64, String)? { lock.lock(); defer { lock.unlock() }; return entries.last }
}
