import CacheCore
import XCTest

/// The one range-spec grammar, shared by the proxy's `Range` headers and the CLI's `--range`,
/// which differ only in how a position is written.
final class ByteRangeSpecTests: XCTestCase {
    /// Digits only, as HTTP writes positions.
    private func digits(_ text: Substring, _ position: ByteRangeSpec.Position) -> Int64? {
        text.allSatisfy(\.isNumber) ? Int64(text) : nil
    }

    func testParsesTheThreeForms() throws {
        XCTAssertEqual(try ByteRangeSpec.parse("0-499", position: digits), .closed(first: 0, last: 499))
        XCTAssertEqual(try ByteRangeSpec.parse("500-", position: digits), .from(500))
        XCTAssertEqual(try ByteRangeSpec.parse("-500", position: digits), .suffix(500))
        XCTAssertEqual(try ByteRangeSpec.parse("-0", position: digits), .suffix(0), "valid syntax, unsatisfiable")
        XCTAssertEqual(try ByteRangeSpec.parse("7-7", position: digits), .closed(first: 7, last: 7))
    }

    func testRejectsWhatIsNoRange() {
        for text in ["", "-", "5", "abc", "1-2-3", "a-5", "5-b", "-x"] {
            XCTAssertThrowsError(try ByteRangeSpec.parse(text, position: digits), text) { error in
                XCTAssertEqual(error as? ByteRangeSpec.SyntaxError, .malformed, text)
            }
        }
        XCTAssertThrowsError(try ByteRangeSpec.parse("5-2", position: digits)) { error in
            XCTAssertEqual(error as? ByteRangeSpec.SyntaxError, .endsBeforeItStarts)
        }
    }

    func testTellsThePositionParserWhichNumberItReads() throws {
        var seen: [ByteRangeSpec.Position] = []
        _ = try ByteRangeSpec.parse("1-2", position: { text, p in seen.append(p); return Int64(text) })
        _ = try ByteRangeSpec.parse("-3", position: { text, p in seen.append(p); return Int64(text) })
        XCTAssertEqual(seen, [.first, .last, .suffixLength])
    }
}
