import Foundation
import TestSupport
import XCTest
@testable import Proxy

/// The proxy serves its owner: it fetches only URLs its owner signed (or that carry the token or
/// the control key), and shows its status and metrics only to a request with the control key or
/// the token.
final class ProxyOwnerTests: XCTestCase {
    /// A page on any web site embeds `<img src="http://127.0.0.1:8718/?url=...">`: the browser
    /// sends it with a foreign Origin and no signature. Refused, and the named origin (a canary
    /// that records every request) never hears of it, in every URL form.
    func testABrowserPageCannotMakeTheProxyFetch() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        let canary = try OriginServer()
        defer { canary.stop() }
        canary.setFile("/steal", data: testBytes(100))
        let target = canary.url("/steal")
        let browser = [("Origin", "https://evil.example"), ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors")]
        let forms = [
            ProxyURL.make(original: target, base: "", token: nil, key: nil),
            "/?url=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!,
            "/?url=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&sig=AAAAAAAAAAAAAAAAAAAAAA",
            ProxyURL.make(original: target, base: "", token: nil, key: .generate()),
        ]
        for form in forms {
            let answer = try h.get(form, browser)
            XCTAssertEqual(answer.status, 403, form)
            XCTAssertTrue(String(decoding: answer.body, as: UTF8.self).contains("httpcachefs url"), "says where to get a URL")
        }
        XCTAssertTrue(canary.requests.isEmpty, "the canary origin saw \(canary.requests.count) requests")

        // The owner's URL for it works, from anywhere it is used.
        let signed = try h.get(h.signed(target), browser)
        XCTAssertEqual(signed.status, 200)
        XCTAssertEqual(signed.body, testBytes(100))
    }

    /// One URL's signature does not open another, even on the same origin under another name.
    func testASignatureForAnotherURLFails() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        h.origin.setFile("/a.mp4", data: testBytes(1000))
        h.origin.setFile("/b.mp4", data: testBytes(1000, seed: 2))
        let signedA = h.path("/a.mp4")
        let b64A = Base64URL.encode(Array(h.origin.url("/a.mp4").utf8)), b64B = Base64URL.encode(Array(h.origin.url("/b.mp4").utf8))
        let forged = signedA.replacingOccurrences(of: b64A, with: b64B).replacingOccurrences(of: "/a.mp4", with: "/b.mp4")
        XCTAssertEqual(try h.get(forged).status, 403)
        XCTAssertEqual(h.origin.requestCount(path: "/b.mp4"), 0)
        XCTAssertEqual(try h.get(signedA).status, 200)
    }

    /// Issue 46, item 4: a signed URL for a public file opened every path of its origin, with
    /// the owner's credentials (a Bearer-protected `/auth/payroll` was served to whoever held the
    /// public file's URL). A relative reference under a signed URL is refused with 403, and the
    /// origin never hears of it; the signed file itself is served.
    func testARelativeReferenceUnderASignedURLIsRefused() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        h.origin.setFile("/public/trailer.mp4", data: testBytes(500))
        h.origin.setFile("/auth/payroll", data: Array("salaries".utf8))
        h.origin.setFile("/public/video/seg-1.m4s", data: testBytes(500, seed: 3))
        let signed = h.path("/public/trailer.mp4")
        XCTAssertEqual(try h.get(signed).status, 200)
        let directory = String(signed.dropLast("trailer.mp4".count))
        for reference in ["../auth/payroll", "/auth/payroll", "video/seg-1.m4s", "trailer.mp4/../../auth/payroll", "..%2Fauth%2Fpayroll"] {
            let answer = try h.get(directory + reference)
            XCTAssertEqual(answer.status, 403, reference)
            XCTAssertTrue(String(decoding: answer.body, as: UTF8.self).contains("opens its own file only"), "\(reference): says why")
        }
        XCTAssertEqual(h.origin.requestCount(path: "/auth/payroll"), 0, "the origin never heard of it")
        XCTAssertEqual(h.origin.requestCount(path: "/public/video/seg-1.m4s"), 0)
        let unsigned = ProxyURL.make(original: h.origin.url("/public/trailer.mp4"), base: "", token: nil, key: nil)
        XCTAssertEqual(try h.get(String(unsigned.dropLast("trailer.mp4".count)) + "video/seg-1.m4s").status, 403)
    }

    /// Under the token (the LAN proxy's secret of the owner's devices, proof for any URL) a
    /// relative reference still resolves: a DASH segment next to its manifest.
    func testRelativeReferencesUnderTheTokenWork() throws {
        var config = ProxyConfiguration(port: 0)
        config.token = "lan-token"
        let h = try ProxyHarness(configuration: config)
        defer { h.shutdown() }
        h.origin.setFile("/show/manifest.mpd", data: Array("<MPD/>".utf8))
        h.origin.setFile("/show/video/seg-1.m4s", data: testBytes(500))
        let manifest = h.path("/show/manifest.mpd")
        XCTAssertTrue(manifest.hasPrefix("/t/lan-token/"), manifest)
        let segment = try h.get(String(manifest.dropLast("manifest.mpd".count)) + "video/seg-1.m4s")
        XCTAssertEqual(segment.status, 200)
        XCTAssertEqual(segment.body, testBytes(500))
    }

    /// The control key (which only the owner can read) is proof too: `preload` through a daemon
    /// may send it.
    func testTheControlKeyLetsAFetchIn() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        h.origin.setFile("/a.mp4", data: testBytes(100))
        let unsigned = ProxyURL.make(original: h.origin.url("/a.mp4"), base: "", token: nil, key: nil)
        XCTAssertEqual(try h.get(unsigned, [(ControlRequest.keyHeader, h.configuration.controlKey)]).status, 200)
        XCTAssertEqual(try h.get(unsigned, [(ControlRequest.keyHeader, "wrong")]).status, 403)
    }

    /// Status page, status.json and /metrics need the control key (header or `?key=`, the page's
    /// address) or the token: the daemon's own user without it is refused like anyone else, since
    /// another daemon of that user may be asking on someone else's behalf.
    func testOwnerPagesNeedTheKeyNotTheOwnersUID() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        let key = h.configuration.controlKey
        for path in ["/.httpcachefs/", "/.httpcachefs/status.json", "/metrics"] {
            let refused = try h.get(path)
            XCTAssertEqual(refused.status, 403, path)
            XCTAssertTrue(String(decoding: refused.body, as: UTF8.self).contains("owner only"), path)
            XCTAssertEqual(try h.get(path, [(ControlRequest.keyHeader, "wrong")]).status, 403, path)
            XCTAssertEqual(try h.get(path + "?key=wrong").status, 403, path)
            XCTAssertEqual(try h.get(path, [(ControlRequest.keyHeader, key)]).status, 200, path)
            XCTAssertEqual(try h.get(path + "?key=" + key).status, 200, path)
        }
        XCTAssertEqual(try h.get("/ping").status, 200, "liveness stays open")
        // The proxy's own status names the cache directory to the key only.
        XCTAssertNil(ProxyStatus.decode(try h.get(ProxyRouter.statusPath).body)?.cacheDirectory)
        XCTAssertEqual(ProxyStatus.decode(try h.get(ProxyRouter.statusPath, h.ownerHeaders).body)?.cacheDirectory, h.directory.path)
    }

    /// Issue 46 item 2: daemon A, asked (by anyone who can reach it: an `allow_other` mount's
    /// `--by-url`, a segment of a hostile playlist A signed) to fetch daemon B's owner pages, gets
    /// them refused: B's owner check used to see A's socket, which is the owner's user.
    func testADaemonFetchingAnotherDaemonsOwnerPagesIsRefused() throws {
        let a = try ProxyHarness()
        defer { a.shutdown() }
        let b = try ProxyHarness()
        defer { b.shutdown() }
        b.origin.setFile("/secret.mp4", data: testBytes(100))
        XCTAssertEqual(try b.get(b.path("/secret.mp4")).status, 200, "B has cached a URL")
        XCTAssertEqual(try a.get(a.signed("http://127.0.0.1:\(b.port)" + b.path("/secret.mp4"))).status, 200,
                       "A reaches B (so what follows is B's refusal)")
        for path in ["/.httpcachefs/status.json", "/.httpcachefs/status.json?view=summary", "/metrics", "/.httpcachefs/"] {
            let through = try a.get(a.signed("http://127.0.0.1:\(b.port)\(path)"))
            XCTAssertNotEqual(through.status, 200, path)
            XCTAssertFalse(String(decoding: through.body, as: UTF8.self).contains("secret.mp4"), path)
        }
        // A hostile playlist naming B's document as a segment: A signs the segment's URL when it
        // rewrites the playlist, and the segment is still refused by B.
        a.origin.setResponse("/evil.m3u8", status: 200, headers: [("Content-Type", "application/vnd.apple.mpegurl")],
                             body: Array("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nhttp://127.0.0.1:\(b.port)/.httpcachefs/status.json\n#EXT-X-ENDLIST\n".utf8))
        let playlist = try a.get(a.path("/evil.m3u8"))
        XCTAssertEqual(playlist.status, 200)
        let segment = try XCTUnwrap(String(decoding: playlist.body, as: UTF8.self).split(separator: "\n").first { !$0.hasPrefix("#") && !$0.isEmpty })
        let resolved = try XCTUnwrap(URL(string: String(segment), relativeTo: URL(string: "http://127.0.0.1:\(a.port)" + a.path("/evil.m3u8"))))
        let components = try XCTUnwrap(URLComponents(url: resolved.absoluteURL, resolvingAgainstBaseURL: false))
        XCTAssertEqual(components.port, a.port, "the segment goes through A")
        let fetched = try a.get(components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? ""))
        XCTAssertNotEqual(fetched.status, 200, "the signed segment \(segment)")
        XCTAssertFalse(String(decoding: fetched.body, as: UTF8.self).contains("secret.mp4"))
    }

    /// A real second local user (nobody, uid 65534, through `setpriv`; root only): refused the
    /// status document, the page and the metrics, and cannot fetch an unsigned URL; this test's
    /// user gets them with the key only.
    func testAnotherLocalUserIsRefused() throws {
        guard geteuid() == 0, let setpriv = ExternalTool.find("setpriv"), let curl = ExternalTool.find("curl") else {
            throw XCTSkip("needs root, setpriv (util-linux) and curl to act as another user")
        }
        let h = try ProxyHarness()
        defer { h.shutdown() }
        h.origin.setFile("/private.mp4", data: testBytes(1000))
        XCTAssertEqual(try h.get(h.path("/private.mp4")).status, 200)
        func status(_ path: String, asNobody: Bool) throws -> String {
            let request = [curl, "--noproxy", "*", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(h.port)\(path)"]
            let command = asNobody ? [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] + request : request
            return try ExternalTool.run(command[0], Array(command.dropFirst()), timeout: 30).stdout
        }
        for path in ["/.httpcachefs/status.json", "/.httpcachefs/", "/metrics"] {
            XCTAssertEqual(try status(path, asNobody: true), "403", path)
            XCTAssertEqual(try status(path, asNobody: false), "403", "the owner's user too, without the key: \(path)")
            XCTAssertEqual(try status(path + "?key=" + h.configuration.controlKey, asNobody: false), "200", path)
        }
        let unsigned = ProxyURL.make(original: h.origin.url("/private.mp4"), base: "", token: nil, key: nil)
        XCTAssertEqual(try status(unsigned, asNobody: true), "403")
    }

    /// The runtime file (control key, token) is owner-only, and was never anything else.
    func testTheRuntimeFileIsOwnerOnly() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        let path = ProxyStatus.runtimeFilePath(cacheDirectory: h.directory.path)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int, 0o600)
        XCTAssertEqual(ProxyStatus.readRuntimeFile(cacheDirectory: h.directory.path)?.controlKey, h.configuration.controlKey)
    }

    /// Control requests check Host like every other request (a rebinding page cannot even try).
    func testControlRequestsWithAForeignHostAreRefused() throws {
        var config = ProxyConfiguration()
        config.controlKey = "k3y"
        let router = ProxyRouter(configuration: config)
        for host in ["evil.example", "127.0.0.1.evil.example:8718", "127.0.0.1:9999"] {
            guard case .reject(403, _) = router.route(method: "POST", target: "/.httpcachefs/control/clear", headerBytes: 0,
                                                      host: host, port: 8718, controlKey: "k3y") else {
                return XCTFail("control request for Host \(host) accepted")
            }
        }
        XCTAssertEqual(router.route(method: "POST", target: "/.httpcachefs/control/clear", headerBytes: 0,
                                    host: "127.0.0.1:8718", port: 8718, controlKey: "k3y"), .control(.clear))

        let h = try ProxyHarness()
        defer { h.shutdown() }
        let request = "POST /.httpcachefs/control/clear HTTP/1.1\r\nHost: evil.example:\(h.port)\r\n\(ControlRequest.keyHeader): \(h.configuration.controlKey)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        XCTAssertEqual(try RawHTTP.parse(RawHTTP.exchange(port: h.port, send: Array(request.utf8))).status, 403)
    }

    /// What the owner-only pages proved by themselves, as the router sees it.
    func testTheRouterNamesTheProofOfOwnerPages() {
        var config = ProxyConfiguration()
        config.controlKey = "k3y"
        let router = ProxyRouter(configuration: config)
        let refused = ProxyRouter.ownerOnly
        XCTAssertEqual(router.route(method: "GET", target: "/metrics", headerBytes: 0), refused)
        XCTAssertEqual(router.route(method: "GET", target: "/metrics", headerBytes: 0, controlKey: "k3y"), .metrics(proof: .controlKey))
        XCTAssertEqual(router.route(method: "GET", target: "/metrics?key=k3y", headerBytes: 0), .metrics(proof: .controlKey))
        XCTAssertEqual(router.route(method: "GET", target: "/metrics", headerBytes: 0, controlKey: "k3"), refused)
        XCTAssertEqual(router.route(method: "GET", target: "/metrics?key=k3", headerBytes: 0), refused)
        XCTAssertEqual(router.route(method: "GET", target: "/metrics?key=k3yy", headerBytes: 0), refused)
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/status.json", headerBytes: 0), refused)
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/status.json?view=summary&key=k3y", headerBytes: 0),
                       .statusDocument(proof: .controlKey))
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/", headerBytes: 0), refused)
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/?key=k3y&filter=x", headerBytes: 0), .statusPage(proof: .controlKey))
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/status", headerBytes: 0), .status(tokenPresented: false, keyPresented: false))
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/status", headerBytes: 0, controlKey: "k3y"),
                       .status(tokenPresented: false, keyPresented: true))
    }
}

/// `/proc` files report no size; they are read to their end, not one read's worth (4 KiB).
final class ProcFileTests: XCTestCase {
    func testProcFilesAreReadToTheirEnd() throws {
        XCTAssertGreaterThan(ProcFile.read("/proc/self/maps")?.utf8.count ?? 0, 4096, "a test process maps more than a page of text")
        let path = NSTemporaryDirectory() + "procfile-\(UUID().uuidString)"
        let text = String(repeating: "0123456789abcdef\n", count: 20_000)
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        XCTAssertEqual(ProcFile.read(path), text)
        XCTAssertNil(ProcFile.read("/nonexistent/proc/file"))
    }
}

/// What the logs show of a request target: no token, no signature, no URL password.
final class ProxyLogLineTests: XCTestCase {
    func testTargetsAreLoggedWithoutSecrets() {
        let cases: [(String, String)] = [
            ("/t/s3cret/u/aHR0cA/v.mp4", "/t/-/u/aHR0cA/v.mp4"),
            ("/s/AbCdEfGhIjKlMnOpQrStUv/u/aHR0cA/v.mp4", "/s/-/u/aHR0cA/v.mp4"),
            ("/t/s3cret/s/AbCd/u/aHR0cA/v.mp4", "/t/-/s/-/u/aHR0cA/v.mp4"),
            ("/?url=http%3A%2F%2Falice%3AZq9pw%40h.test%2Fa.mp4&sig=AbCd", "/?url=http://alice:***@h.test/a.mp4&sig=-"),
            ("/?url=http%3A%2F%2Fh.test%2Fa.mp4%3Fk%3D1%26sig%3Dorigin", "/?url=http://h.test/a.mp4?k=1&sig=origin"),
            ("/.httpcachefs/status.json", "/.httpcachefs/status.json"),
            ("/.httpcachefs/?key=K3ysecret&filter=a", "/.httpcachefs/?key=-&filter=a"),
            ("/metrics?key=K3ysecret", "/metrics?key=-"),
        ]
        for (target, logged) in cases {
            XCTAssertEqual(ProxyHTTPHandler.displayTarget(target), logged, target)
        }
    }
}

/// Preconditions over a socket: the planner's answers reach the client.
final class ProxyPreconditionTests: XCTestCase {
    func testIfMatchAndIfUnmodifiedSinceFailWith412() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        h.origin.setFile("/v.mp4", data: testBytes(10_000), etag: "\"v1\"", lastModified: Date(timeIntervalSince1970: 1_700_000_000))
        XCTAssertEqual(try h.get(h.path("/v.mp4"), [("If-Match", "\"wrong\""), ("Range", "bytes=0-9")]).status, 412)
        XCTAssertEqual(try h.get(h.path("/v.mp4"), [("If-Unmodified-Since", "Sat, 01 Jan 2000 00:00:00 GMT"), ("Range", "bytes=0-9")]).status, 412)
        let matched = try h.get(h.path("/v.mp4"), [("If-Match", "\"v1\""), ("Range", "bytes=0-9")])
        XCTAssertEqual(matched.status, 206)
        XCTAssertEqual(matched.body, Array(testBytes(10_000)[0..<10]))
        XCTAssertEqual(try h.get(h.path("/v.mp4"), [("If-Match", "*")]).status, 200)
    }
}

/// A URL made with the token carries the signature too: it keeps working if the proxy is
/// restarted without the token, and a proxy with a token still wants the token.
final class TokenAndSignatureTests: XCTestCase {
    func testAURLWithBothProofsWorksWithAndWithoutTheToken() {
        let key = ProxySigningKey.generate()
        let url = "http://cdn.example.com/v.mp4"
        let both = ProxyURL.make(original: url, base: "", token: "tok", key: key)
        var plain = ProxyConfiguration()
        plain.signingKey = key
        XCTAssertEqual(ProxyRouter(configuration: plain).route(method: "GET", target: both, headerBytes: 0), .proxy(url: url))
        var tokened = plain
        tokened.token = "tok"
        XCTAssertEqual(ProxyRouter(configuration: tokened).route(method: "GET", target: both, headerBytes: 0), .proxy(url: url))
        let signedOnly = ProxyURL.make(original: url, base: "", token: nil, key: key)
        guard case .reject(403, _) = ProxyRouter(configuration: tokened).route(method: "GET", target: signedOnly, headerBytes: 0) else {
            return XCTFail("a signature does not stand in for the token")
        }
    }
}
