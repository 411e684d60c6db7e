@testable import Fetcher
import XCTest

/// Header lines as curl hands them over, byte by byte: the parser trims and splits the bytes
/// itself (no Foundation on the curl loop), so what it keeps is pinned here as a table.
final class ResponseHeaderParserTests: XCTestCase {
    private func parse(_ lines: [String]) -> ResponseHeaderBlock? {
        var parser = ResponseHeaderParser()
        var result: ResponseHeaderBlock?
        for line in lines {
            var raw = line
            result = raw.withUTF8 { parser.feed(UnsafeRawBufferPointer($0)) } ?? result
        }
        return result
    }

    func testNamesAreLowercasedAndOptionalWhitespaceIsTrimmed() throws {
        let block = try XCTUnwrap(parse(["HTTP/1.1 206 Partial Content\r\n", "Content-Range:  bytes 0-9/100 \t\r\n",
                                         "ETag:\"v1\"\r\n", "X-Empty:\r\n", "X-Spaced \t: x\r\n", "\r\n"]))
        XCTAssertEqual(block.status, 206)
        XCTAssertEqual(block.field("content-range"), "bytes 0-9/100")
        XCTAssertEqual(block.field("etag"), "\"v1\"")
        XCTAssertEqual(block.field("x-empty"), "")
        XCTAssertEqual(block.field("x-spaced"), "x")
        XCTAssertTrue(block.complete)
    }

    func testFoldedLinesContinueThePreviousField() throws {
        let block = try XCTUnwrap(parse(["HTTP/1.1 200 OK\r\n", "X-Long: first\r\n", "  second \r\n", "\r\n"]))
        XCTAssertEqual(block.field("x-long"), "first second")
    }

    func testStatusLinesOfEveryShape() {
        XCTAssertEqual(parse(["HTTP/2 200\r\n", "\r\n"])?.status, 200)
        XCTAssertEqual(parse(["HTTP/1.0 404 Not Found\n", "\n"])?.status, 404, "bare LF line ends")
        XCTAssertEqual(parse(["HTTP/1.1  301  Moved\r\n", "\r\n"])?.status, 301, "repeated spaces")
        XCTAssertNil(parse(["HTTP/1.1 abc\r\n", "\r\n"]), "no status: no block")
        XCTAssertNil(parse(["HTTP/1.1\r\n", "\r\n"]))
    }

    func testLinesWithoutAColonAndBeforeAStatusAreIgnored() throws {
        XCTAssertNil(parse(["Content-Length: 5\r\n", "\r\n"]), "no status line yet")
        let block = try XCTUnwrap(parse(["HTTP/1.1 200 OK\r\n", "garbage line\r\n", "Content-Length: 5\r\n", "\r\n"]))
        XCTAssertEqual(block.fields.map(\.0), ["content-length"])
        XCTAssertEqual(block.contentLength, 5)
    }

    func testBytesThatAreNotUTF8AreRepairedNotTrusted() throws {
        var parser = ResponseHeaderParser()
        _ = parser.feed("HTTP/1.1 200 OK\r\n")
        let raw: [UInt8] = Array("X-Bin: a".utf8) + [0xFF, 0xFE] + Array("b\r\n".utf8)
        _ = raw.withUnsafeBytes { parser.feed($0) }
        let block = try XCTUnwrap(parser.feed("\r\n"))
        XCTAssertEqual(block.field("x-bin"), "a\u{FFFD}\u{FFFD}b")
    }
}
