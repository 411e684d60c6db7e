import Settings
import XCTest

/// `--scan-share` values: a percentage of the cap or a size, 0 for none; a bad one is one line
/// naming the option and the value.
final class ScanShareValueTests: XCTestCase {
    private let cap: Int64 = 10 << 30

    func testPercentagesAndSizes() throws {
        let rows: [(String, Int64)] = [
            ("2%", cap / 50),
            ("0.5%", cap / 200),
            (" 100% ", cap),
            ("0", 0),
            ("0%", 0),
            ("100M", 100 << 20),
            ("1.5G", 3 << 29),
            ("10G", cap),
        ]
        for (text, bytes) in rows { XCTAssertEqual(try ScanShareValue.parse(text, capacity: cap, option: "--scan-share"), bytes, text) }
    }

    func testBadValuesAreOneLineNamingThem() {
        let rows: [(String, String)] = [
            ("-2%", "scan share '-2%' for --scan-share is negative"),
            ("-1G", "scan share '-1G' for --scan-share is negative"),
            ("101%", "scan share '101%' for --scan-share is more than the whole cache: at most 100%"),
            ("11G", "scan share '11G' for --scan-share is larger than the cache size"),
            ("lots", "invalid scan share 'lots' for --scan-share: expected a percentage of the cache size (e.g. 2%), a size (e.g. 100M), or 0 for no share"),
            ("%", "invalid scan share '%'"),
            ("2%%", "invalid scan share '2%%'"),
            ("", "invalid scan share ''"),
        ]
        for (text, message) in rows {
            XCTAssertThrowsError(try ScanShareValue.parse(text, capacity: cap, option: "--scan-share"), text) { error in
                let line = "\(error)"
                XCTAssertTrue(line.hasPrefix(message), "\(text): \(line)")
                XCTAssertFalse(line.contains("\n"), "one line")
            }
        }
    }
}
