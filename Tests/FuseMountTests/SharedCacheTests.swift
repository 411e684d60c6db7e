import Foundation
import Glibc
import TestSupport
import XCTest

/// The mount and its proxy are two doors to one cache: a byte fetched through either is a hit
/// through the other, and readers at both doors share one download.
final class SharedCacheTests: XCTestCase {
    private var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
    }

    override func tearDown() {
        h?.cleanup()
    }

    /// The proxy URL of `url`, from the running daemon (`httpcachefs url`).
    private func proxyURL(_ url: String) throws -> (port: Int, path: String) {
        let out = try h.run(h.binary, ["url", url, "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(out.status, 0, out.stderr)
        let line = out.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let c = try XCTUnwrap(URLComponents(string: line), line)
        return (try XCTUnwrap(c.port), c.percentEncodedPath)
    }

    private func mountWithProxy(_ urls: [String]) throws {
        let m = try h.mount(urls + ["--proxy-port", "0"], proxy: true)
        XCTAssertEqual(m.status, 0, m.stderr + h.log)
    }

    func testBytesReadThroughTheMountAreHitsThroughTheProxy() throws {
        let length = 6 << 20
        h.origin.setGeneratedFile("/film.mp4", length: Int64(length), seed: 61)
        try mountWithProxy([h.origin.url("/film.mp4")])
        let viaMount = try XCTUnwrap(FileManager.default.contents(atPath: h.path("film.mp4")))
        XCTAssertTrue(Array(viaMount) == OriginServer.generatedBytes(seed: 61, offset: 0, count: length), "mount bytes differ")

        let (port, path) = try proxyURL(h.origin.url("/film.mp4"))
        h.origin.resetLog()
        let response = try RawHTTP.request(port: port, path: path, timeout: 30)
        XCTAssertEqual(response.status, 200)
        XCTAssertTrue(response.body == OriginServer.generatedBytes(seed: 61, offset: 0, count: length), "proxy bytes differ")
        XCTAssertEqual(h.origin.requestCount(path: "/film.mp4"), 0,
                       "the proxy went to the origin for bytes the mount had fetched: \(h.origin.requests.map(\.range))")
    }

    func testPreloadAndCatWhileMountedGoThroughTheDaemonIntoItsCache() throws {
        let length = 3 << 20
        h.origin.setGeneratedFile("/later.mp4", length: Int64(length), seed: 63)
        try mountWithProxy([h.origin.url("/later.mp4")])
        let preload = try h.run(h.binary, ["preload", h.origin.url("/later.mp4"), "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(preload.status, 0, preload.stderr)
        XCTAssertTrue(preload.stdout.contains("through the running daemon"), preload.stdout)

        h.origin.resetLog()
        let viaMount = try XCTUnwrap(FileManager.default.contents(atPath: h.path("later.mp4")))
        XCTAssertTrue(Array(viaMount) == OriginServer.generatedBytes(seed: 63, offset: 0, count: length))
        XCTAssertEqual(h.origin.requestCount(path: "/later.mp4"), 0, "the preload did not fill the daemon's cache")

        let cat = try h.run(h.binary, ["cat", h.origin.url("/later.mp4"), "--range", "-100", "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        XCTAssertEqual(cat.stderr, "", "cat while mounted must not fail on the cache lock")
        let ls = try h.run(h.binary, ["cache", "ls", "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(ls.status, 0, ls.stderr)
        XCTAssertTrue(ls.stdout.contains(h.origin.url("/later.mp4")) && ls.stdout.contains("100%"), ls.stdout)
    }

    /// Through the daemon a range is fetched exactly too: its proxy's reader stops at the
    /// response's last byte. The daemon opens a file it does not know with its usual probe,
    /// which brings the first 256 KiB along.
    func testPreloadOfARangeThroughTheDaemonFetchesThatRange() throws {
        h.origin.setGeneratedFile("/big.mp4", length: 64 << 20, seed: 64)
        h.origin.setGeneratedFile("/other.mp4", length: 1000, seed: 65)
        try mountWithProxy([h.origin.url("/other.mp4")])
        h.origin.resetLog()
        let preload = try h.run(h.binary, ["preload", h.origin.url("/big.mp4"), "--range", "20M-30M", "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(preload.status, 0, preload.stderr)
        XCTAssertTrue(preload.stdout.contains("through the running daemon") && preload.stdout.contains(": 10485760 bytes"), preload.stdout)
        XCTAssertEqual(h.origin.bytesServed(path: "/big.mp4"), (10 << 20) + (256 << 10),
                       "origin requests: \(h.origin.requests.map(\.range))")
    }

    func testPreloadOfAnHLSStreamGoesThroughTheDaemon() throws {
        let playlistType = "application/vnd.apple.mpegurl"
        h.origin.setFile("/hls/master.m3u8", data: Array("""
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=800000
            low/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2500000
            high/index.m3u8
            """.utf8), contentType: playlistType)
        for variant in ["low", "high"] {
            h.origin.setFile("/hls/\(variant)/index.m3u8", data: Array("""
                #EXTM3U
                #EXT-X-TARGETDURATION:4
                #EXT-X-MAP:URI="init.mp4"
                #EXTINF:4,
                seg0.m4s
                #EXTINF:4,
                seg1.m4s
                #EXT-X-ENDLIST
                """.utf8), contentType: playlistType)
            h.origin.setGeneratedFile("/hls/\(variant)/init.mp4", length: 1000, seed: 66, contentType: "video/mp4")
            h.origin.setGeneratedFile("/hls/\(variant)/seg0.m4s", length: 300_000, seed: 67, contentType: "video/iso.segment")
            h.origin.setGeneratedFile("/hls/\(variant)/seg1.m4s", length: 200_000, seed: 68, contentType: "video/iso.segment")
        }
        h.origin.setGeneratedFile("/other.mp4", length: 1000, seed: 65)
        try mountWithProxy([h.origin.url("/other.mp4")])

        let preload = try h.run(h.binary, ["preload", h.origin.url("/hls/master.m3u8"), "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(preload.status, 0, preload.stderr)
        XCTAssertTrue(preload.stdout.hasPrefix("preloaded \(h.origin.url("/hls/master.m3u8")) (HLS, variant best) through the running daemon (process "), preload.stdout)
        XCTAssertTrue(preload.stdout.contains("): 2 playlists, 3 segments and keys, 501000 bytes in "), preload.stdout)
        XCTAssertEqual(h.origin.requestCount(path: "/hls/low/seg0.m4s"), 0, "only the best variant is preloaded")

        h.origin.resetLog()
        for (name, seed, length) in [("init.mp4", 66, 1000), ("seg0.m4s", 67, 300_000), ("seg1.m4s", 68, 200_000)] {
            let (port, path) = try proxyURL(h.origin.url("/hls/high/\(name)"))
            let response = try RawHTTP.request(port: port, path: path, timeout: 30)
            XCTAssertEqual(response.status, 200, name)
            XCTAssertTrue(response.body == OriginServer.generatedBytes(seed: UInt64(seed), offset: 0, count: length), name)
        }
        XCTAssertEqual(h.origin.requests.count, 0, "the preload did not fill the daemon's cache: \(h.origin.requests.map(\.path))")
    }

    func testProxyClientsAndAMountReaderOnOneColdFileCauseOneDownload() throws {
        let length = 16 << 20
        h.origin.setGeneratedFile("/cold.mp4", length: Int64(length), seed: 62)
        h.origin.setFaults("/cold.mp4", Faults(bytesPerSecond: 32 << 20))   // slow enough for the readers to meet
        try mountWithProxy([h.origin.url("/cold.mp4")])
        let (port, path) = try proxyURL(h.origin.url("/cold.mp4"))
        h.origin.resetLog()
        let expected = OriginServer.generatedBytes(seed: 62, offset: 0, count: length)

        let group = DispatchGroup()
        let results = Outcomes()
        for client in 0..<2 {
            DispatchQueue.global().async(group: group) {
                let r = try? RawHTTP.request(port: port, path: path, timeout: 60)
                results.set("proxy \(client)", r?.status == 200 && r?.body == expected)
            }
        }
        let file = h.path("cold.mp4")
        DispatchQueue.global().async(group: group) {
            results.set("mount", FileManager.default.contents(atPath: file).map(Array.init) == expected)
        }
        XCTAssertEqual(group.wait(timeout: .now() + 90), .success)
        XCTAssertEqual(results.all, ["proxy 0": true, "proxy 1": true, "mount": true])
        let ratio = Double(h.origin.bytesServed(path: "/cold.mp4")) / Double(length)
        print("origin bytes / file size, 2 proxy clients + 1 mount reader on a cold file: \(ratio)")
        XCTAssertLessThanOrEqual(ratio, 1.05)
    }
}

/// Which reader got the right bytes, filled in from several threads.
private final class Outcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: Bool] = [:]
    func set(_ key: String, _ ok: Bool) { lock.lock(); values[key] = ok; lock.unlock() }
    var all: [String: Bool] { lock.lock(); defer { lock.unlock() }; return values }
}
