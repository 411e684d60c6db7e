import CacheCore
import Foundation
import Proxy
import TestSupport
import XCTest

/// The status document (and so the status page) never shows a URL's password, nor a proxy path
/// that carries it.
final class StatusPrivacyTests: XCTestCase {
    func testTheStatusDocumentMasksURLPasswords() throws {
        let h = try ProxyHarness(configuration: ProxyConfiguration(port: 0))
        defer { h.shutdown() }
        h.origin.setFile("/private.mp4", data: testBytes(10_000))
        h.origin.setFile("/public.mp4", data: testBytes(10_000, seed: 2))
        let secret = h.origin.url("/private.mp4").replacingOccurrences(of: "http://", with: "http://alice:Zq9s3cretpw@")
        XCTAssertEqual(try h.get(h.signed(secret)).status, 200)
        XCTAssertEqual(try h.get(h.path("/public.mp4")).status, 200)

        let request = "GET /.httpcachefs/status.json HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\n\(ControlRequest.keyHeader): \(h.configuration.controlKey)\r\nConnection: close\r\n\r\n"
        let response = try RawHTTP.parse(try RawHTTP.exchange(port: h.port, send: Array(request.utf8)))
        XCTAssertEqual(response.status, 200)
        let text = String(decoding: response.body, as: UTF8.self)
        XCTAssertFalse(text.contains("Zq9s3cretpw"), text)
        let doc = try StatusDocument.decode(response.body)
        let masked = try XCTUnwrap(doc.files.first { $0.url.hasSuffix("/private.mp4") })
        XCTAssertTrue(masked.url.hasPrefix("http://alice:***@127.0.0.1:"), masked.url)
        XCTAssertNil(masked.proxyPath, "its proxy path would carry the password in base64")
        let plain = try XCTUnwrap(doc.files.first { $0.url.hasSuffix("/public.mp4") })
        XCTAssertNotNil(plain.proxyPath)
    }
}
