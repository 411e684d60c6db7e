import XCTest
@testable import CacheCore

final class HTTPDateTests: XCTestCase {
    /// RFC 9110's example instant, 1994-11-06 08:49:37 GMT.
    private let example = Date(timeIntervalSince1970: 784_111_777)

    func testTheThreeFormsOfRFC9110AreTheSameInstant() {
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), example)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), example)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), example)
    }

    func testFormatWritesIMFFixdateAndParsesBack() {
        XCTAssertEqual(HTTPDate.format(example), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 0)), "Thu, 01 Jan 1970 00:00:00 GMT")
        for t in [0, 951_782_400, 1_709_164_800, 4_102_444_799, -86_401] as [TimeInterval] {   // leap days, 2099, 1969
            let d = Date(timeIntervalSince1970: t)
            XCTAssertEqual(HTTPDate.parse(HTTPDate.format(d)), d, HTTPDate.format(d))
        }
    }

    func testZonesOtherThanGMTAreHonouredOrRefused() {
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC"), example)
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 09:49:37 +0100"), example)
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 XYZ"))
    }

    func testTwoDigitYearsFallInTheCenturyRFC9110Says() {
        XCTAssertEqual(HTTPDate.parse("Friday, 01-Mar-24 00:00:00 GMT"), Date(timeIntervalSince1970: 1_709_251_200))
        XCTAssertEqual(HTTPDate.parse("Monday, 01-Mar-99 00:00:00 GMT"), Date(timeIntervalSince1970: 920_246_400))
    }

    func testMalformedDatesAreRefused() {
        for bad in ["", "yesterday", "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                    "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, +6 Nov 1994 08:49:37 GMT",
                    "Sun, 06 Nov 19945 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37", "1994-11-06T08:49:37Z",
                    "Sun, 06 Nov 1994 08:49:37 GMT extra"] {
            XCTAssertNil(HTTPDate.parse(bad), bad)
        }
    }
}
