import XCTest
@testable import Settings

/// The config file, parsed in-process (the end-to-end tests run it through the binary).
final class ConfigFileTests: XCTestCase {
    func testKeyValueLinesCommentsQuotesAndRepeatableKeys() throws {
        let file = try ConfigFile.parse("""
        # comment
        cache-size = 10G
        --revalidate-after=1h
        header = "X-A: 1"
        header = X-B: 2
        cache-size = 12G
        """, path: "cfg")
        XCTAssertEqual(file["cache-size"], "12G", "the last line wins")
        XCTAssertEqual(file["revalidate-after"], "1h")
        XCTAssertEqual(file.list("header"), ["X-A: 1", "X-B: 2"])
    }

    func testKeysTakeUnderscoresAsWellAsDashesAsInFstab() throws {
        let file = try ConfigFile.parse("""
        cache_size = 20G
        Revalidate_After = 1h
        --read_timeout = 30s
        ignore_query = token
        ignore-query = sig
        """, path: "cfg")
        XCTAssertEqual(file["cache-size"], "20G")
        XCTAssertEqual(file["revalidate-after"], "1h")
        XCTAssertEqual(file["read-timeout"], "30s")
        XCTAssertEqual(file.list("ignore-query"), ["token", "sig"], "both spellings are one key")
        XCTAssertThrowsError(try ConfigFile.parse("cache_szie = 1G\n", path: "cfg")) { error in
            XCTAssertEqual("\(error)", "unknown setting 'cache_szie' at cfg:1; did you mean 'cache_size'?", "named as written")
        }
    }

    func testAnUnknownKeyOrALineWithoutEqualsNamesTheLine() {
        XCTAssertThrowsError(try ConfigFile.parse("cache-size = 1G\ncache-szie = 2G\n", path: "cfg")) { error in
            XCTAssertEqual("\(error)", "unknown setting 'cache-szie' at cfg:2; did you mean 'cache-size'?")
        }
        XCTAssertThrowsError(try ConfigFile.parse("\n\njust words\n", path: "cfg")) { error in
            XCTAssertTrue("\(error)".hasPrefix("expected 'key = value' at cfg:3"), "\(error)")
        }
    }

    func testADurationTooLargeForADoubleIsAnErrorNotInfinity() {
        let huge = "1" + String(repeating: "0", count: 400)
        for text in [huge, huge + "s", "1h" + huge + "m"] {
            XCTAssertThrowsError(try DurationValue.parse(text, option: "read-timeout")) { error in
                XCTAssertEqual("\(error)", "duration '\(text)' for read-timeout is too large")
            }
        }
        XCTAssertEqual(try DurationValue.parse("1h30m", option: "x"), 5400)
    }

    func testMicrosecondsAreADurationToo() throws {
        XCTAssertEqual(try DurationValue.parse("50us", option: "fuse-spin"), 0.000_05, accuracy: 1e-12)
        XCTAssertEqual(try DurationValue.parse("50µs", option: "fuse-spin"), 0.000_05, accuracy: 1e-12)
        XCTAssertEqual(try DurationValue.parse("1ms500us", option: "fuse-spin"), 0.0015, accuracy: 1e-12)
    }
}
