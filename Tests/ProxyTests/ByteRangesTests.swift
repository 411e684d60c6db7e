import CacheCore
import XCTest
@testable import Proxy

/// RFC 9110 section 14 range parsing: the cases players depend on.
final class ByteRangesTests: XCTestCase {
    func testParsesTheSyntaxOfTheRFC() {
        let cases: [(String, [ByteRangeSpec]?)] = [
            ("bytes=0-499", [.closed(first: 0, last: 499)]),
            ("bytes=500-", [.from(500)]),
            ("bytes=-500", [.suffix(500)]),
            ("bytes=0-0,-1", [.closed(first: 0, last: 0), .suffix(1)]),
            ("bytes= 0-1 , 4-5", [.closed(first: 0, last: 1), .closed(first: 4, last: 5)]),
            ("BYTES=1-2", [.closed(first: 1, last: 2)]),
            ("bytes=0-1,,2-3", [.closed(first: 0, last: 1), .closed(first: 2, last: 3)]),
            ("bytes=-0", [.suffix(0)]),
            ("bytes=99999999999999999999999-", [.from(Int64.max)]),
            // Invalid: the whole header is ignored (nil → 200).
            ("bytes=5-2", nil),
            ("bytes=", nil),
            ("bytes=abc", nil),
            ("bytes=1-2-3", nil),
            ("bytes=+1-2", nil),
            ("bytes=1 -2", nil),
            ("items=0-5", nil),
            ("0-5", nil),
            ("bytes=0-1,5-2", nil),
            ("bytes=-", nil),
        ]
        for (header, expected) in cases {
            XCTAssertEqual(ByteRanges.parse(header), expected, header)
        }
    }

    func testResolvesAgainstTheLength() {
        let length: Int64 = 10_000
        let cases: [(String, [Range<Int64>])] = [
            ("bytes=0-499", [0..<500]),
            ("bytes=9500-", [9500..<10_000]),
            ("bytes=-500", [9500..<10_000]),         // suffix: the LAST 500 bytes
            ("bytes=-20000", [0..<10_000]),          // longer suffix than the file: all of it
            ("bytes=9999-99999", [9999..<10_000]),   // last-pos clipped
            ("bytes=10000-", []),                    // first-pos at the end: unsatisfiable
            ("bytes=-0", []),                        // empty suffix: unsatisfiable
            ("bytes=20000-30000,0-0", [0..<1]),      // satisfiable ones survive
            ("bytes=0-0,-1", [0..<1, 9999..<10_000]),
        ]
        for (header, expected) in cases {
            XCTAssertEqual(ByteRanges.resolve(ByteRanges.parse(header)!, length: length), expected, header)
        }
    }

    func testNothingIsSatisfiableInAnEmptyFile() {
        XCTAssertEqual(ByteRanges.resolve([.from(0)], length: 0), [])
        XCTAssertEqual(ByteRanges.resolve([.suffix(5)], length: 0), [])
        XCTAssertEqual(ByteRanges.resolve([.closed(first: 0, last: 0)], length: 0), [])
    }
}
