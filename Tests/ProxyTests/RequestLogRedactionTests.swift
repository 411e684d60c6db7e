import CacheCore
@testable import Proxy
import XCTest

/// A URL's password never reaches a proxy log line ("served", "control request"...), whichever
/// way the proxy URL encodes it.
final class RequestLogRedactionTests: XCTestCase {
    func testAProxyURLIsLoggedAsTheURLItNamesWithItsPasswordMasked() {
        let original = "http://alice:s3cr%40t@media.test/film.mkv"
        let made = ProxyURL.make(original: original, base: "", token: "tok-secret", key: .generate())
        let table: [(String, String)] = [
            (made, "http://alice:***@media.test/film.mkv"),
            ("/?url=http%3A%2F%2Falice%3As3cr%2540t%40media.test%2Ffilm.mkv", "http://alice:***@media.test/film.mkv"),
            ("/t/tok-secret/.httpcachefs/status.json", "/t/-/.httpcachefs/status.json"),
            ("/nothing%20here", "/nothing here"),
        ]
        for (target, shown) in table {
            let line = ProxyHTTPHandler.loggable(target)
            XCTAssertEqual(line, shown, target)
            XCTAssertFalse(line.contains("s3cr"), line)
            XCTAssertFalse(line.contains("tok-secret"), line)
        }
    }
}
