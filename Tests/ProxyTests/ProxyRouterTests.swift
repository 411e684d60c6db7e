import XCTest
@testable import Proxy

/// The security rules, one request head at a time.
final class ProxyRouterTests: XCTestCase {
    let video = "http://cdn.example.com/v/movie.mp4"

    func testOpenProxyFormsAreRejected() {
        let router = ProxyRouter(configuration: ProxyConfiguration())
        XCTAssertEqual(router.route(method: "GET", target: "http://cdn.example.com/v/movie.mp4", headerBytes: 0),
                       .reject(status: 400, message: "not an open proxy: request targets must be proxy URLs (/u/...)"))
        XCTAssertEqual(statusOf(router.route(method: "CONNECT", target: "cdn.example.com:443", headerBytes: 0)), 405)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "*", headerBytes: 0)), 400)
        XCTAssertEqual(statusOf(router.route(method: "POST", target: ProxyURL.make(original: video, base: "", token: nil, key: router.configuration.signingKey), headerBytes: 0)), 405)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/favicon.ico", headerBytes: 0)), 404)
    }

    func testProxiesEncodedURLs() {
        let router = ProxyRouter(configuration: ProxyConfiguration())
        XCTAssertEqual(router.route(method: "GET", target: ProxyURL.make(original: video, base: "", token: nil, key: router.configuration.signingKey), headerBytes: 10),
                       .proxy(url: video))
        let signature = router.configuration.signingKey.signature(for: video)
        XCTAssertEqual(router.route(method: "HEAD", target: "/?url=" + video.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&sig=" + signature,
                                    headerBytes: 10),
                       .proxy(url: video))
        XCTAssertEqual(router.route(method: "GET", target: "/ping", headerBytes: 0), .ping)
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/status", headerBytes: 0), .status(tokenPresented: false))
    }

    /// `/?key=KEY`: the page's address with its path left out (as people shorten it) opens the
    /// page, with the key only; `/?url=` stays a proxy URL.
    func testTheRootWithTheKeyGoesToThePageAndWithoutItToNoPage() {
        let router = ProxyRouter(configuration: ProxyConfiguration())
        let key = router.configuration.controlKey
        XCTAssertEqual(router.route(method: "GET", target: "/?key=\(key)", headerBytes: 0),
                       .redirect(location: "/.httpcachefs/?key=\(key)"))
        XCTAssertEqual(router.route(method: "GET", target: "/?filter=film&key=\(key)", headerBytes: 0),
                       .redirect(location: "/.httpcachefs/?filter=film&key=\(key)"), "the rest of the query goes along")
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/?key=wrong", headerBytes: 0)), 403, "never without the key")
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/?key=", headerBytes: 0)), 403)
        XCTAssertEqual(router.route(method: "GET", target: "/", headerBytes: 0), .redirect(location: "/.httpcachefs/"))
        let token = ProxyRouter(configuration: ProxyConfiguration(bindAddress: "0.0.0.0", token: "s3cret"))
        XCTAssertEqual(token.route(method: "GET", target: "/t/s3cret/?key=x", headerBytes: 0),
                       .redirect(location: "/t/s3cret/.httpcachefs/?key=x"), "under the token, the token is the proof")
    }

    func testRejectedSchemesAndLineBreaks() {
        let router = ProxyRouter(configuration: ProxyConfiguration())
        for bad in ["file:///etc/passwd", "ftp://a/b", "http://a/b\r\nSet-Cookie: x", "gopher://x"] {
            XCTAssertEqual(statusOf(router.route(method: "GET", target: ProxyURL.make(original: bad, base: "", token: nil, key: router.configuration.signingKey), headerBytes: 0)), 400, bad)
        }
    }

    func testTokenIsRequiredWhenConfigured() {
        let router = ProxyRouter(configuration: ProxyConfiguration(bindAddress: "0.0.0.0", token: "s3cret"))
        XCTAssertEqual(statusOf(router.route(method: "GET", target: ProxyURL.make(original: video, base: "", token: nil, key: router.configuration.signingKey), headerBytes: 0)), 403)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: ProxyURL.make(original: video, base: "", token: "wrong", key: router.configuration.signingKey), headerBytes: 0)), 403)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/?url=http%3A%2F%2Fa%2Fb", headerBytes: 0)), 403)
        XCTAssertEqual(router.route(method: "GET", target: ProxyURL.make(original: video, base: "", token: "s3cret", key: router.configuration.signingKey), headerBytes: 0),
                       .proxy(url: video))
        // Liveness and the status document need no token; only a request that carries it may
        // learn it from the document.
        XCTAssertEqual(router.route(method: "GET", target: "/ping", headerBytes: 0), .ping)
        XCTAssertEqual(router.route(method: "GET", target: "/.httpcachefs/status", headerBytes: 0), .status(tokenPresented: false))
        XCTAssertEqual(router.route(method: "GET", target: "/t/s3cret/.httpcachefs/status", headerBytes: 0), .status(tokenPresented: true))
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/t/wrong/.httpcachefs/status", headerBytes: 0)), 403)
    }

    func testAllowedHosts() {
        let router = ProxyRouter(configuration: ProxyConfiguration(allowedHosts: ["*.example.com", "media.local:8080"]))
        XCTAssertEqual(router.route(method: "GET", target: ProxyURL.make(original: video, base: "", token: nil, key: router.configuration.signingKey), headerBytes: 0), .proxy(url: video))
        XCTAssertEqual(statusOf(router.route(method: "GET", target: ProxyURL.make(original: "http://evil.test/x.mp4", base: "", token: nil, key: router.configuration.signingKey), headerBytes: 0)), 403)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: ProxyURL.make(original: "http://media.local:8080/x.mp4", base: "", token: nil, key: router.configuration.signingKey), headerBytes: 0)), nil)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: ProxyURL.make(original: "http://media.local/x.mp4", base: "", token: nil, key: router.configuration.signingKey), headerBytes: 0)), 403)
    }

    func testSizeLimits() {
        let router = ProxyRouter(configuration: ProxyConfiguration(maxRequestTargetBytes: 100, maxHeaderBytes: 200))
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/" + String(repeating: "a", count: 100), headerBytes: 0)), 414)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/ping", headerBytes: 201)), 431)
    }

    func testLoopbackAddresses() {
        XCTAssertTrue(ProxyConfiguration(bindAddress: "127.0.0.1").isLoopbackOnly)
        XCTAssertTrue(ProxyConfiguration(bindAddress: "::1").isLoopbackOnly)
        XCTAssertTrue(ProxyConfiguration(bindAddress: "localhost").isLoopbackOnly)
        XCTAssertFalse(ProxyConfiguration(bindAddress: "0.0.0.0").isLoopbackOnly)
        XCTAssertFalse(ProxyConfiguration(bindAddress: "192.168.1.5").isLoopbackOnly)
        XCTAssertEqual(ProxyConfiguration().bindAddress, "127.0.0.1")
        XCTAssertEqual(ProxyConfiguration().port, 8718)
        let token = ProxyConfiguration.generateToken()
        XCTAssertEqual(token.count, 22)
        XCTAssertNotEqual(token, ProxyConfiguration.generateToken())
    }

    func testControlRequestsNeedPOSTTheKeyAndTheToken() {
        var config = ProxyConfiguration()
        config.controlKey = "k3y"
        let router = ProxyRouter(configuration: config)
        let refresh = "/.httpcachefs/control/refresh?path=/tv/Some%20Show"
        XCTAssertEqual(router.route(method: "POST", target: refresh, headerBytes: 0, controlKey: "k3y"),
                       .control(.refresh(path: "/tv/Some Show")))
        XCTAssertEqual(router.route(method: "POST", target: "/.httpcachefs/control/refresh", headerBytes: 0, controlKey: "k3y"),
                       .control(.refresh(path: nil)))
        XCTAssertEqual(router.route(method: "POST", target: "/.httpcachefs/control/rm?url=http%3A%2F%2Fa%2Fb&url=http://c/d", headerBytes: 0, controlKey: "k3y"),
                       .control(.remove(urls: ["http://a/b", "http://c/d"])))
        XCTAssertEqual(router.route(method: "POST", target: "/.httpcachefs/control/clear", headerBytes: 0, controlKey: "k3y"), .control(.clear))
        XCTAssertEqual(statusOf(router.route(method: "POST", target: "/.httpcachefs/control/clear", headerBytes: 0)), 403)
        XCTAssertEqual(statusOf(router.route(method: "POST", target: "/.httpcachefs/control/clear", headerBytes: 0, controlKey: "k3")), 403)
        XCTAssertEqual(statusOf(router.route(method: "GET", target: "/.httpcachefs/control/clear", headerBytes: 0, controlKey: "k3y")), 404)
        XCTAssertEqual(statusOf(router.route(method: "POST", target: "/.httpcachefs/control/rm", headerBytes: 0, controlKey: "k3y")), 400)
        XCTAssertEqual(statusOf(router.route(method: "POST", target: "/.httpcachefs/control/shutdown", headerBytes: 0, controlKey: "k3y")), 405)

        // The daemon's mountpoints: `mount` and `unmount`, and a `refresh` that names its mount.
        XCTAssertEqual(router.route(method: "POST", target: "/.httpcachefs/control/mount?path=/home/me/tv&arg=--index&arg=http%3A%2F%2Fnas%2FTV%2F",
                                    headerBytes: 0, controlKey: "k3y"),
                       .control(.mounts(action: "mount", query: [URLQueryItem(name: "path", value: "/home/me/tv"),
                                                                 URLQueryItem(name: "arg", value: "--index"),
                                                                 URLQueryItem(name: "arg", value: "http://nas/TV/")])))
        XCTAssertEqual(router.route(method: "POST", target: "/.httpcachefs/control/unmount?path=/home/me/tv", headerBytes: 0, controlKey: "k3y"),
                       .control(.mounts(action: "unmount", query: [URLQueryItem(name: "path", value: "/home/me/tv")])))
        XCTAssertEqual(router.route(method: "POST", target: "/.httpcachefs/control/refresh?mount=/home/me/tv&path=/Show", headerBytes: 0, controlKey: "k3y"),
                       .control(.mounts(action: "refresh", query: [URLQueryItem(name: "mount", value: "/home/me/tv"),
                                                                   URLQueryItem(name: "path", value: "/Show")])))
        XCTAssertEqual(statusOf(router.route(method: "POST", target: "/.httpcachefs/control/mount?path=/x", headerBytes: 0, controlKey: "k3")), 403,
                       "adding a mountpoint needs the control key like every control request")

        config.token = "tok"
        let tokened = ProxyRouter(configuration: config)
        XCTAssertEqual(statusOf(tokened.route(method: "POST", target: "/.httpcachefs/control/clear", headerBytes: 0, controlKey: "k3y")), 403)
        XCTAssertEqual(tokened.route(method: "POST", target: "/t/tok/.httpcachefs/control/clear", headerBytes: 0, controlKey: "k3y"), .control(.clear))
    }

    private func statusOf(_ route: ProxyRoute) -> Int? {
        if case let .reject(status, _) = route { return status }
        return nil
    }
}

/// Without a token, a request must be addressed to this machine: a rebinding web page's name is not.
final class DNSRebindingTests: XCTestCase {
    func testHostHeaderMustNameThisMachineWithoutAToken() {
        let router = ProxyRouter(configuration: ProxyConfiguration())
        let target = ProxyURL.make(original: "http://cdn.example.com/v.mp4", base: "", token: nil, key: router.configuration.signingKey)
        for ok in ["127.0.0.1:8718", "127.0.0.1", "localhost:8718", "LOCALHOST", "[::1]:8718", "app.localhost:8718",
                   ProcessInfo.processInfo.hostName + ":8718"] {
            XCTAssertEqual(router.route(method: "GET", target: target, headerBytes: 0, host: ok), .proxy(url: "http://cdn.example.com/v.mp4"), ok)
        }
        for bad in ["evil.example:8718", "evil.example", "192.168.1.20:8718"] {
            guard case .reject(403, _) = router.route(method: "GET", target: target, headerBytes: 0, host: bad) else {
                return XCTFail("\(bad) must be refused")
            }
        }
        // With a token (needed beyond loopback), any Host will do: the token is the guard.
        let lan = ProxyRouter(configuration: ProxyConfiguration(bindAddress: "0.0.0.0", token: "t"))
        let tokened = ProxyURL.make(original: "http://cdn.example.com/v.mp4", base: "", token: "t", key: lan.configuration.signingKey)
        XCTAssertEqual(lan.route(method: "GET", target: tokened, headerBytes: 0, host: "192.168.1.20:8718"), .proxy(url: "http://cdn.example.com/v.mp4"))
        // ...except for the status document, which tells loopback peers the cache directory.
        guard case let .reject(403, message) = lan.route(method: "GET", target: "/.httpcachefs/status", headerBytes: 0, host: "evil.example") else {
            return XCTFail("the status document is for this machine only")
        }
        // The way in is the token it has, not an option it was started with.
        XCTAssertTrue(message.contains("/t/TOKEN/.httpcachefs/status") && !message.contains("--token"), message)
        XCTAssertEqual(lan.route(method: "GET", target: "/.httpcachefs/status", headerBytes: 0, host: "127.0.0.1:8718"), .status(tokenPresented: false))
    }
}
