import CacheCore
import Fetcher
import Foundation
import Logging
import Proxy
import TestSupport
import XCTest

/// Never an open proxy; tokens beyond loopback; limits on what a client may send.
final class ProxySecurityTests: XCTestCase {
    func testLoopbackOnlyByDefaultAndATokenBeyondIt() throws {
        XCTAssertEqual(ProxyConfiguration().bindAddress, "127.0.0.1")
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: dir.path, engineClock: .realTime), source: NoSource())
        defer { engine.shutdown() }
        let open = ProxyServer(engine: engine, configuration: ProxyConfiguration(bindAddress: "0.0.0.0", port: 0),
                               logger: .init(label: "t"))
        XCTAssertThrowsError(try open.start()) { error in
            guard case ProxyServerError.tokenRequired = error else { return XCTFail("\(error)") }
        }
    }

    func testTokenIsRequiredWhenSet() throws {
        let h = try ProxyHarness(configuration: ProxyConfiguration(bindAddress: "127.0.0.1", port: 0, token: "tok3n"))
        defer { h.shutdown() }
        h.origin.setFile("/a.mp4", data: testBytes(1000))
        XCTAssertEqual(try h.get(h.path("/a.mp4", token: "")).status, 403)
        XCTAssertEqual(try h.get(h.path("/a.mp4", token: "wrong")).status, 403)
        XCTAssertEqual(try h.get(h.path("/a.mp4")).status, 200)
        XCTAssertEqual(h.server.proxyURL(for: h.origin.url("/a.mp4"))?.contains("/t/tok3n/s/"), true)
    }

    func testRejections() throws {
        let h = try ProxyHarness(configuration: ProxyConfiguration(port: 0, allowedHosts: ["127.0.0.1"],
                                                                   maxRequestTargetBytes: 2048, maxHeaderBytes: 4096))
        defer { h.shutdown() }
        h.origin.setFile("/a.mp4", data: testBytes(1000))
        XCTAssertEqual(try h.get(h.path("/a.mp4")).status, 200)
        // Absolute-form: the classic open-proxy request.
        XCTAssertEqual(try h.get(h.origin.url("/a.mp4")).status, 400)
        // Only http(s); no line breaks smuggled in the encoded URL.
        XCTAssertEqual(try h.get(h.signed("file:///etc/passwd")).status, 400)
        XCTAssertEqual(try h.get(h.signed(h.origin.url("/a.mp4") + "\r\nX: y")).status, 400)
        // A host outside --allow-host.
        XCTAssertEqual(try h.get(h.signed("http://localhost:\(h.origin.port)/a.mp4")).status, 403)
        // Oversized request target and header fields.
        XCTAssertEqual(try h.get("/u/" + String(repeating: "A", count: 3000)).status, 414)
        XCTAssertEqual(try h.get(h.path("/a.mp4"), [("X-Big", String(repeating: "b", count: 5000))]).status, 431)
        XCTAssertEqual(try h.get(h.path("/a.mp4"), [("X-Huge", String(repeating: "b", count: 200_000))]).status, 431)
        // Methods.
        XCTAssertEqual(try h.get(h.path("/a.mp4"), method: "POST").status, 405)
        XCTAssertEqual(try h.get(h.path("/a.mp4"), method: "DELETE").status, 405)
        // Garbage.
        let garbage = try RawHTTP.exchange(port: h.port, send: Array("\u{1}\u{2} nonsense\r\n\r\n".utf8))
        XCTAssertEqual(try RawHTTP.parse(garbage).status, 400)
    }

    /// An origin's HTML (or SVG) opened in a browser through the proxy shares the proxy's origin
    /// with the status page: sandboxed (no script; its origin kept, so a video opened on its own
    /// still loads), its script cannot run there and read `status.json`.
    func testOriginContentIsSandboxedAwayFromTheStatusPagesOrigin() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        let page = Array("<script>fetch('/.httpcachefs/status.json')</script>".utf8)
        h.origin.setFile("/evil.html", data: page, contentType: "text/html")
        h.origin.setFile("/a.mp4", data: testBytes(1000), contentType: "video/mp4")
        h.origin.setFile("/v.m3u8", data: Array("#EXTM3U\n#EXTINF:4,\na.mp4\n#EXT-X-ENDLIST\n".utf8),
                         contentType: "application/vnd.apple.mpegurl")
        for (path, headers) in [("/evil.html", []), ("/evil.html", [("Range", "bytes=0-3")]),
                                ("/a.mp4", []), ("/v.m3u8", [])] as [(String, [(String, String)])] {
            let response = try h.get(h.path(path), headers)
            XCTAssertTrue([200, 206].contains(response.status), "\(path): \(response.status)")
            XCTAssertEqual(response.header("Content-Security-Policy"), "sandbox allow-same-origin", path)
        }
        XCTAssertEqual(try h.get(h.path("/evil.html"), method: "HEAD").header("Content-Security-Policy"), "sandbox allow-same-origin")
        // The status page keeps its own policy, which lets its script run.
        let status = try h.owner("/.httpcachefs/")
        XCTAssertEqual(status.status, 200)
        XCTAssertTrue(status.header("Content-Security-Policy")?.contains("script-src 'unsafe-inline'") == true)
    }

    /// RFC 9112 §3.2: an HTTP/1.1 request needs exactly one Host line; the rebinding check cannot
    /// judge a request without one, or read two.
    func testAnHTTP11RequestWithoutOneHostLineIsRefused() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        h.origin.setFile("/a.mp4", data: testBytes(1000))
        func status(_ request: String) throws -> Int {
            try RawHTTP.parse(RawHTTP.exchange(port: h.port, send: Array(request.utf8))).status
        }
        let path = h.path("/a.mp4")
        XCTAssertEqual(try status("GET \(path) HTTP/1.1\r\nConnection: close\r\n\r\n"), 400)
        XCTAssertEqual(try status("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"), 400)
        XCTAssertEqual(try status("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n"), 400)
        // HTTP/1.0 may leave Host out; one Host line is served.
        XCTAssertEqual(try status("GET \(path) HTTP/1.0\r\n\r\n"), 200)
        XCTAssertEqual(try status("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"), 200)
        XCTAssertEqual(ProxyRouter.hostFieldRefusal(lines: [], http11: false), nil)
        XCTAssertEqual(ProxyRouter.hostFieldRefusal(lines: ["a"], http11: true), nil)
    }

    /// Only a pattern naming one host exactly may open a refused address: `*` never does.
    func testOnlyAnExactAllowHostPatternNamesOneHost() {
        XCTAssertEqual(HostPattern("169.254.169.254").exactHost, "169.254.169.254")
        XCTAssertEqual(HostPattern("Metadata.Google.Internal:80").exactHost, "metadata.google.internal")
        XCTAssertEqual(HostPattern("[fd00:ec2::254]:80").exactHost, "fd00:ec2::254")
        XCTAssertEqual(HostPattern("fd00:ec2::254").exactHost, "fd00:ec2::254")
        XCTAssertNil(HostPattern("*").exactHost)
        XCTAssertNil(HostPattern("169.254.*").exactHost)
        XCTAssertNil(HostPattern("metadata.goo?").exactHost)
        XCTAssertTrue(HostPattern("media.local:8080").matches(host: "MEDIA.local", port: 8080))
        XCTAssertFalse(HostPattern("media.local:8080").matches(host: "media.local", port: 80))
    }

    // MARK: The token

    /// Any local user or program reaches loopback: no answer may hold the token unless the
    /// request carried it, and no log line ever does.
    func testNoResponseOrLogLineCarriesTheTokenUnlessTheRequestDid() throws {
        let token = "Zq9-s3cret_T0ken"
        let log = RecordedLog()
        let h = try ProxyHarness(configuration: ProxyConfiguration(bindAddress: "127.0.0.1", port: 0, token: token),
                                 logger: log.logger)
        defer { h.shutdown() }
        h.origin.setFile("/a.mp4", data: testBytes(1000))
        h.origin.setResponse("/hls/index.m3u8", status: 200, headers: [("Content-Type", "application/vnd.apple.mpegurl")],
                             body: Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg0.ts\n#EXT-X-ENDLIST\n".utf8))
        let carrier = h.path("/a.mp4")
        let bare = h.path("/a.mp4", token: "")

        /// The whole answer, head and body, to a raw request.
        func answer(_ request: String) throws -> String {
            String(decoding: try RawHTTP.exchange(port: h.port, send: Array(request.utf8), timeout: 20), as: UTF8.self)
        }
        func get(_ target: String, method: String = "GET", host: String = "127.0.0.1") -> String {
            "\(method) \(target) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n"
        }
        let withoutToken = [
            get("/.httpcachefs/status"), get("/.httpcachefs/status", method: "HEAD"),
            get("/.httpcachefs/status", host: "evil.example"), get("/ping"),
            get(bare), get(bare, method: "HEAD"), get(h.path("/a.mp4", token: "wrong")),
            get("/t/wrong/.httpcachefs/status"), get("/t/" + token.dropLast() + "/.httpcachefs/status"),
            get("/favicon.ico"), get(bare, method: "POST"), get(h.origin.url("/a.mp4")),
            get("/u/" + String(repeating: "A", count: 20_000)), "\u{1}\u{2} nonsense\r\n\r\n",
        ]
        for request in withoutToken {
            let text = try answer(request)
            XCTAssertFalse(text.isEmpty, request)
            XCTAssertFalse(text.contains(token), "leaked to \(request.prefix(80)): \(text)")
        }

        // A request that carries the token may see it: the status document (how 'httpcachefs url'
        // learns it) and rewritten playlists, whose URIs need it.
        let status = try answer(get("/t/\(token)/.httpcachefs/status"))
        XCTAssertTrue(status.hasPrefix("HTTP/1.1 200"), status)
        XCTAssertTrue(status.contains("\"token\":\"\(token)\""), status)
        XCTAssertTrue(try answer(get(carrier)).hasPrefix("HTTP/1.1 200"))
        XCTAssertTrue(try answer(get(h.path("/missing.mp4"))).hasPrefix("HTTP/1.1 404"))
        XCTAssertTrue(try answer(get(h.path("/hls/index.m3u8"))).contains("/t/\(token)/s/"))

        XCTAssertFalse(log.lines.isEmpty, "the proxy logged at trace level")
        for line in log.lines { XCTAssertFalse(line.contains(token), "log line: \(line)") }
    }

    // MARK: Cloud metadata and link-local origins

    /// 127.0.0.2 stands in for the metadata address (the policy is injected); no packet leaves
    /// loopback. Every way to name it gets 403, nothing is cached, and the origin behind it sees
    /// no request; 127.0.0.1 keeps working.
    func testRefusedAddressesGet403InEveryDisguise() throws {
        let forbidden = try OriginServer(host: "127.0.0.2")
        defer { forbidden.stop() }
        forbidden.setFile("/key.bin", data: testBytes(16))
        forbidden.setFile("/a.mp4", data: testBytes(1000))
        let policy = AddressPolicy(forbiddenRanges: [AddressRange("127.0.0.2/32")!], forbiddenNames: [])
        let h = try ProxyHarness(fetcher: FetcherConfiguration(clock: .realTime, lowSpeedTime: 2, maxRetries: 3, retryBaseDelay: 0.01,
                                                               addressPolicy: policy,
                                                               pinnedAddresses: ["nas.test:\(forbidden.port):127.0.0.2"]))
        defer { h.shutdown() }
        h.origin.setFile("/a.mp4", data: testBytes(1000))
        h.origin.setFaults("/go.mp4", Faults(redirectTo: forbidden.url("/a.mp4")))
        h.origin.setResponse("/hls/index.m3u8", status: 200, headers: [("Content-Type", "application/vnd.apple.mpegurl")], body: Array("""
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-KEY:METHOD=AES-128,URI="\(forbidden.url("/key.bin"))"
            #EXTINF:2,
            seg0.ts
            #EXT-X-ENDLIST

            """.utf8))

        XCTAssertEqual(try h.get(h.path("/a.mp4")).status, 200)
        let direct = try h.get(h.signed(forbidden.url("/a.mp4")))
        XCTAssertEqual(direct.status, 403)
        XCTAssertTrue(String(decoding: direct.body, as: UTF8.self).contains("refused to fetch"),
                      String(decoding: direct.body, as: UTF8.self))
        XCTAssertEqual(try h.get(h.path("/go.mp4")).status, 403, "after a redirect")
        XCTAssertEqual(h.origin.requestCount(path: "/go.mp4"), 1, "never retried")
        XCTAssertEqual(try h.get(h.signed("http://nas.test:\(forbidden.port)/a.mp4")).status,
                       403, "a name that resolves there")

        let playlist = try h.get(h.path("/hls/index.m3u8"))
        XCTAssertEqual(playlist.status, 200)
        let keyLine = try XCTUnwrap(String(decoding: playlist.body, as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix("#EXT-X-KEY") })
        let keyURI = String(keyLine[keyLine.range(of: "URI=\"")!.upperBound...].prefix { $0 != "\"" })
        XCTAssertEqual(try ProxyURL.decode(path: keyURI).url, forbidden.url("/key.bin"))
        XCTAssertEqual(try h.get(keyURI).status, 403, "an HLS key URI")

        XCTAssertEqual(forbidden.requests.count, 0, "no request reached the forbidden address")
        let cached = Set(h.engine.list().map(\.info.url))
        XCTAssertEqual(cached, [h.origin.url("/a.mp4"), h.origin.url("/hls/index.m3u8")], "refusals cache nothing")
        // Asked again, refused again: nothing was remembered as success.
        XCTAssertEqual(try h.get(h.path("/go.mp4")).status, 403)
    }

}

/// A source that is never reached (the tests using it fail before any fetch).
struct NoSource: RangeSource {
    struct Handle: FetchHandle { func cancel() {} }
    func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        sink.fetchDidFinish(.network(url: request.url, message: "no source in this test"))
        return Handle()
    }
}
