import Foundation
import XCTest

/// A URL's password never reaches the log, `cache ls`, `cache info` or an error line, and the
/// cache and its log are the user's alone.
extension CLITests {
    private func withPassword(_ path: String) -> String {
        origin.url(path).replacingOccurrences(of: "http://", with: "http://alice:Zq9s3cretpw@")
    }

    private func mode(_ path: String) -> mode_t {
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0, path)
        return st.st_mode & 0o777
    }

    func testAURLPasswordIsMaskedInLogsListingsAndErrors() throws {
        origin.setGeneratedFile("/private.mp4", length: 100_000, seed: 4)
        let log = temp.appending("cat.log")
        let cat = try run(["cat", withPassword("/private.mp4"), "--log-level", "debug", "--log-file", log])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertFalse(logText.contains("Zq9s3cretpw"), logText)
        XCTAssertEqual(mode(log), 0o600)
        XCTAssertEqual(mode(cacheDir), 0o700)

        let ls = try run(["cache", "ls"])
        let listing = String(decoding: ls.stdout, as: UTF8.self)
        XCTAssertTrue(listing.contains("alice:***@127.0.0.1"), listing)
        XCTAssertFalse(listing.contains("Zq9s3cretpw"), listing)

        let info = try run(["cache", "info", withPassword("/private.mp4")])
        let details = String(decoding: info.stdout, as: UTF8.self)
        XCTAssertTrue(details.contains("alice:***@127.0.0.1"), details)
        XCTAssertFalse(details.contains("Zq9s3cretpw"), details)

        let missing = try run(["cat", withPassword("/missing.mp4")])
        XCTAssertNotEqual(missing.status, 0)
        let error = missing.stderr
        XCTAssertFalse(error.contains("Zq9s3cretpw"), error)
    }
}
