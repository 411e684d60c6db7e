import CacheCore
import Foundation
import Proxy
import TestSupport
import XCTest

/// An origin that claims lengths no file can have: that file fails with 502, the proxy and
/// every other file keep working.
final class ProxyHostileOriginTests: XCTestCase {
    var h: ProxyHarness!

    override func setUpWithError() throws {
        h = try ProxyHarness()
        h.origin.setFile("/ok.bin", data: testBytes(5000))
        h.origin.setLengthClaim("/huge206.bin", .contentRangeTotal("9223372036854775807"))
        h.origin.setLengthClaim("/past-int64.bin", .contentRangeTotal("99999999999999999999999"))
        h.origin.setLengthClaim("/huge200.bin", .contentLength("9223372036854775807"))
    }

    override func tearDown() { h.shutdown() }

    func testASuffixRangeOfAFileClaimingInt64MaxBytesIs502AndTheProxyStaysUp() throws {
        for path in ["/huge206.bin", "/past-int64.bin", "/huge200.bin"] {
            for range in ["bytes=-1", "bytes=9223372036854775806-", "bytes=0-"] {
                let r = try h.get(h.path(path), [("Range", range)])
                XCTAssertEqual(r.status, 502, "\(path) \(range)")
                XCTAssertTrue(String(decoding: r.body, as: UTF8.self).contains("2^62"),
                              "the body says why: \(String(decoding: r.body, as: UTF8.self))")
            }
        }
        XCTAssertEqual(try h.get("/ping").status, 200)
        let last = try h.get(h.path("/ok.bin"), [("Range", "bytes=-1")])
        XCTAssertEqual(last.status, 206)
        XCTAssertEqual(last.body, Array(testBytes(5000)[4999...]))
        let far = try h.get(h.path("/ok.bin"), [("Range", "bytes=9223372036854775806-")])
        XCTAssertEqual(far.status, 416)
        XCTAssertEqual(far.header("Content-Range"), "bytes */5000")
        XCTAssertEqual(try h.get(h.path("/ok.bin")).body, testBytes(5000))
    }

    /// An origin whose ETag, Last-Modified or Content-Type holds a control character (DEL, SOH,
    /// ESC): the proxy used to pass them on, NIO's encoder refused the head and closed the
    /// connection, and every request for that file got no answer at all. Now such values are
    /// left out and the bytes are served.
    func testHeaderValuesWithControlCharactersAreLeftOutAndTheFileIsServed() throws {
        let data = testBytes(5000)
        h.origin.setFile("/del-type.mp4", data: data, contentType: "video/mp4\u{7F}")
        h.origin.setFile("/esc-etag.bin", data: data, etag: "\"v\u{1B}]0;x\u{07}\"")
        h.origin.setResponse("/soh-date.bin", status: 200, headers: [("Last-Modified", "Mon, 01 Jan 2024\u{01}"),
                                                                   ("ETag", "\"ok\"")], body: data)
        for path in ["/del-type.mp4", "/esc-etag.bin", "/soh-date.bin"] {
            let whole = try h.get(h.path(path))
            XCTAssertEqual(whole.status, 200, path)
            XCTAssertEqual(whole.body, data, path)
            XCTAssertTrue(whole.headers.allSatisfy { $0.1.isSendableFieldValue }, "\(path): \(whole.headers)")
            let range = try h.get(h.path(path), [("Range", "bytes=10-19")])
            XCTAssertEqual(range.status, 206, path)
            XCTAssertEqual(range.body, Array(data[10..<20]), path)
        }
        XCTAssertEqual(try h.get(h.path("/del-type.mp4")).header("Content-Type"), "video/mp4", "the type from the extension")
        XCTAssertNil(try h.get(h.path("/esc-etag.bin")).header("ETag"))
        XCTAssertNil(try h.get(h.path("/soh-date.bin")).header("Last-Modified"))
        XCTAssertEqual(try h.get(h.path("/soh-date.bin")).header("ETag"), "\"ok\"")
    }
}
