import XCTest
import Settings

/// Positions of `--range`: byte offsets as HTTP writes them, or sizes.
final class RangePositionTests: XCTestCase {
    func testPlainDigitsAreByteOffsetsAtEitherEnd() {
        XCTAssertEqual(ByteSize.rangePosition("1023", isEnd: false), 1023)
        XCTAssertEqual(ByteSize.rangePosition("1023", isEnd: true), 1023, "an inclusive last offset, as HTTP writes it")
    }

    func testASizeIsWhereTheRangeStartsOrStops() {
        XCTAssertEqual(ByteSize.rangePosition("10M", isEnd: false), 10 << 20)
        XCTAssertEqual(ByteSize.rangePosition("30M", isEnd: true), (30 << 20) - 1, "10M-30M is 20 MiB, not one byte more")
        XCTAssertEqual(ByteSize.rangePosition("1K", isEnd: true), 1023)
        XCTAssertEqual(ByteSize.rangePosition("1.5GiB", isEnd: false), 3 << 29)
        XCTAssertEqual(ByteSize.rangePosition("2MB", isEnd: false), 2_000_000)
        XCTAssertEqual(ByteSize.rangePosition("0K", isEnd: true), -1, "an empty range: the grammar rejects it")
    }

    func testRejectsWhatIsNeither() {
        for text in ["", "1.5", "-5", "M", "5X", "0x10", "inf", "1e3"] {
            XCTAssertNil(ByteSize.rangePosition(Substring(text), isEnd: false), text)
        }
    }
}
