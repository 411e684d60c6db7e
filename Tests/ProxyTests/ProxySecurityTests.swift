import CacheCore
import Foundation
import Proxy
import TestSupport
import XCTest

/// Never an open proxy; tokens beyond loopback; limits on what a client may send.
final class ProxySecurityTests: XCTestCase {
    func testLoopbackOnlyByDefaultAndATokenBeyondIt() throws {
        XCTAssertEqual(ProxyConfiguration().bindAddress, "127.0.0.1")
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: dir.path), source: NoSource())
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
        XCTAssertEqual(h.server.proxyURL(for: h.origin.url("/a.mp4"))?.contains("/t/tok3n/u/"), true)
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
        XCTAssertEqual(try h.get(ProxyURL.make(original: "file:///etc/passwd", base: "", token: nil)).status, 400)
        XCTAssertEqual(try h.get(ProxyURL.make(original: h.origin.url("/a.mp4") + "\r\nX: y", base: "", token: nil)).status, 400)
        // A host outside --allow-host.
        XCTAssertEqual(try h.get(ProxyURL.make(original: "http://localhost:\(h.origin.port)/a.mp4", base: "", token: nil)).status, 403)
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
}

/// A source that is never reached (the tests using it fail before any fetch).
struct NoSource: RangeSource {
    struct Handle: FetchHandle { func cancel() {} }
    func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        sink.fetchDidFinish(.network(url: request.url, message: "no source in this test"))
        return Handle()
    }
}
