import Foundation
@testable import Proxy
import TestSupport
import XCTest

/// DNS rebinding: a web page on a name its owner points at 127.0.0.1 sends its own name in the
/// Host header. Without a token, only a Host that is exactly one of this machine's names or
/// addresses, with the proxy's port, is served.
final class HostHeaderTests: XCTestCase {
    private let port = 8718
    private let original = "http://cdn.example.com/v.mp4"

    private func route(_ host: String, _ configuration: ProxyConfiguration = ProxyConfiguration(),
                       target: String? = nil) -> ProxyRoute {
        ProxyRouter(configuration: configuration)
            .route(method: "GET", target: target ?? ProxyURL.make(original: original, base: "", token: nil, key: configuration.signingKey),
                   headerBytes: 0, host: host, port: port)
    }

    private func assertRefused(_ host: String, _ configuration: ProxyConfiguration = ProxyConfiguration(),
                               file: StaticString = #filePath, line: UInt = #line) {
        guard case .reject(403, _) = route(host, configuration) else {
            return XCTFail("Host '\(host)' must be refused", file: file, line: line)
        }
    }

    private func assertServed(_ host: String, _ configuration: ProxyConfiguration = ProxyConfiguration(),
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(route(host, configuration), .proxy(url: original), "Host '\(host)' must be served", file: file, line: line)
    }

    func testANameThatStartsLikeALoopbackAddressIsNotLoopback() {
        assertRefused("127.0.0.1.attacker.test")
        assertRefused("127.0.0.1.attacker.test:\(port)")
        assertRefused("127.evil.com")
        assertRefused("127.evil.com:\(port)")
        assertRefused("127.0.0.1.")
        XCTAssertFalse(ProxyConfiguration.isLoopback("127.evil.com"))
        XCTAssertFalse(ProxyConfiguration.isLoopback("127.0.0.1.attacker.test"))
    }

    func testNamesThatOnlyMentionLocalhostAreRefused() {
        assertRefused("localhost.evil.com")
        assertRefused("localhost.evil.com:\(port)")
        assertRefused("evil.com")
        assertRefused("evil.com:\(port)")
        assertRefused("evil.localhost.evil.com")
        assertRefused("a/.localhost")
    }

    func testLoopbackAddressesAndLocalhostAreServed() {
        assertServed("127.0.0.1")
        assertServed("127.0.0.1:\(port)")
        assertServed("127.0.1.1:\(port)")
        assertServed("[::1]")
        assertServed("[::1]:\(port)")
        assertServed("localhost:\(port)")
        assertServed("LOCALHOST")
        assertServed("LocalHost:\(port)")
        assertServed("localhost.:\(port)")
        // RFC 6761: every name under .localhost is loopback, and browsers resolve it so themselves.
        assertServed("app.localhost:\(port)")
    }

    func testAHostWithAnotherPortIsRefused() {
        assertRefused("127.0.0.1:\(port + 1)")
        assertRefused("localhost:80")
        assertRefused("[::1]:1")
    }

    func testMalformedHostsAreRefused() {
        assertRefused("::1")
        assertRefused("[::1")
        assertRefused("[::1]x")
        assertRefused("[127.0.0.1]")
        assertRefused("127.0.0.1:99999")
        assertRefused("127.0.0.1:80:80")
        assertRefused(":\(port)")
        assertRefused("127.1")
        assertRefused("0x7f.0.0.1")
    }

    func testANameTheUserGaveIsServedAndOnlyThatName() {
        let named = ProxyConfiguration(proxyNames: ["Media.Box"])
        assertServed("media.box:\(port)", named)
        assertServed("MEDIA.BOX", named)
        assertRefused("media.box.evil.com", named)
        assertRefused("evil.media.box", named)
        assertRefused("media.box", ProxyConfiguration())
    }

    func testTheBindAddressIsServed() {
        assertServed("10.1.2.3:\(port)", ProxyConfiguration(bindAddress: "10.1.2.3", token: nil))
        assertRefused("10.1.2.4:\(port)", ProxyConfiguration(bindAddress: "10.1.2.3", token: nil))
        assertServed("[fd00::5]:\(port)", ProxyConfiguration(bindAddress: "fd00::5"))
    }

    /// Before the proxy is bound with port 0 the port is unknown: then any port is accepted.
    func testAnUnknownPortAcceptsAnyPort() {
        let router = ProxyRouter(configuration: ProxyConfiguration(port: 0))
        let target = ProxyURL.make(original: original, base: "", token: nil, key: router.configuration.signingKey)
        XCTAssertEqual(router.route(method: "GET", target: target, headerBytes: 0, host: "127.0.0.1:4242"), .proxy(url: original))
        XCTAssertEqual(router.route(method: "GET", target: target, headerBytes: 0, host: "127.0.0.1:4242", port: 0), .proxy(url: original),
                       "a handler asked before the bound port was recorded")
        guard case .reject(403, _) = router.route(method: "GET", target: target, headerBytes: 0, host: "127.0.0.1:4242", port: 4243) else {
            return XCTFail("once the port is known, another one is refused")
        }
    }

    func testAnAddressLiteralIsASCIIHexDigitsDotsAndColonsOnly() {
        XCTAssertEqual(IPLiteral("127.0.0.1")?.bytes, [127, 0, 0, 1])
        XCTAssertEqual(IPLiteral("[::1]")?.isLoopback, true)
        XCTAssertEqual(IPLiteral("::ffff:127.0.0.1")?.isLoopback, true)
        XCTAssertEqual(IPLiteral("FE80::1")?.bytes.count, 16)
        for text in ["", "[", "[]", "127.1", "0x7f.0.0.1", "127.0.0.1.", "\u{FF11}27.0.0.1", "::1%lo",
                     "[::1", "::1]", "127.0.0.1\u{301}", String(repeating: "1", count: 46), "1.2.3.4 "] {
            XCTAssertNil(IPLiteral(text), text.debugDescription)
        }
    }

    func testPeerAddressesAreParsedNotMatchedByPrefix() {
        for loopback in ["127.0.0.1", "127.255.0.9", "::1", "[::1]", "::ffff:127.0.0.1", "::ffff:127.0.0.2", "localhost"] {
            XCTAssertTrue(ProxyConfiguration.isLoopback(loopback), loopback)
        }
        for other in ["127.evil.com", "127.0.0.1.attacker.test", "1.2.3.4", "::2", "::ffff:10.0.0.1", "", "127", "localhost.evil.com"] {
            XCTAssertFalse(ProxyConfiguration.isLoopback(other), other)
        }
    }

    /// Over a socket: the status document (the cache directory, every URL) is not given to a
    /// rebinding name, and is to 127.0.0.1 with the proxy's port.
    func testTheStatusDocumentIsRefusedToARebindingName() throws {
        let h = try ProxyHarness(configuration: ProxyConfiguration(bindAddress: "127.0.0.1", port: 0))
        defer { h.shutdown() }
        func status(host: String) throws -> Int {
            let request = "GET /.httpcachefs/status.json HTTP/1.1\r\nHost: \(host)\r\n\(ControlRequest.keyHeader): \(h.configuration.controlKey)\r\nConnection: close\r\n\r\n"
            return try RawHTTP.parse(RawHTTP.exchange(port: h.port, send: Array(request.utf8))).status
        }
        XCTAssertEqual(try status(host: "127.0.0.1.attacker.test:\(h.port)"), 403)
        XCTAssertEqual(try status(host: "127.evil.com:\(h.port)"), 403)
        XCTAssertEqual(try status(host: "127.0.0.1:\(h.port + 1)"), 403)
        XCTAssertEqual(try status(host: "127.0.0.1:\(h.port)"), 200)
        XCTAssertEqual(try status(host: "localhost:\(h.port)"), 200)
    }
}
