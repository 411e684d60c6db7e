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
}
