import TerminalText
import XCTest

/// `cache ls`'s table as a terminal shows it: columns counted in cells (a Japanese or Greek name,
/// an emoji, a combining accent), long names cut in the middle to fit the window, percent-encoded
/// names decoded and made safe.
final class TextTableTests: XCTestCase {
    func testCellWidthsAreWhatATerminalDraws() {
        let rows: [(String, Int, UInt)] = [
            ("film.mkv", 8, #line),
            ("Ελληνικά.mkv", 12, #line),              // Greek: one cell each
            ("千と千尋の神隠し.mkv", 20, #line),       // Japanese: two cells each
            ("ｆｕｌｌ", 8, #line),                   // fullwidth Latin
            ("Cafe\u{301}.mkv", 8, #line),            // e + combining acute: one cell
            ("🎬 x", 4, #line),                       // an emoji: two
            ("a\u{200B}b", 2, #line),                 // a zero-width space: none
            ("", 0, #line),
        ]
        for (text, cells, line) in rows { XCTAssertEqual(TextTable.cellWidth(text), cells, text, line: line) }
    }

    func testColumnsLineUpByCellsWhateverTheScript() {
        let table = TextTable.table([["URL", "SIZE"], ["http://h/千と千尋.mkv", "1.2 GiB"], ["http://h/a.mkv", "700 MiB"]],
                                    rightAligned: [1])
        let lines = table.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, [
            "URL                       SIZE",
            "http://h/千と千尋.mkv  1.2 GiB",
            "http://h/a.mkv         700 MiB",
        ].map { $0 })
        XCTAssertEqual(Set(lines.map(TextTable.cellWidth)).count, 1, "every line as wide: \(lines)")
    }

    func testTheLastColumnIsNotPaddedAndRightAlignedColumnsAre() {
        XCTAssertEqual(TextTable.table([["a", "bb"], ["ccc", "d"]]), "a    bb\nccc  d")
        XCTAssertEqual(TextTable.table([["a", "bb"], ["ccc", "d"]], rightAligned: [1]), "a    bb\nccc   d")
        XCTAssertEqual(TextTable.table([]), "")
    }

    func testLongNamesAreCutInTheMiddleToFitTheTerminal() {
        let long = "http://media.example/library/a-very-long-series-name/season-01/episode-01.mkv"
        let rows = [["URL", "SIZE", "CACHED", "LAST ACCESS"], [long, "1.50 GiB", "100%", "2026-11-21 12:00:00Z"]]
        for (width, line) in [(80, #line), (60, #line), (120, #line)] as [(Int, UInt)] {
            let fitted = TextTable.fitted(rows, width: width, shrinking: 0)
            let out = TextTable.table(fitted, rightAligned: [1, 2])
            for l in out.split(separator: "\n") {
                XCTAssertLessThanOrEqual(TextTable.cellWidth(String(l)), width, "\(width): \(l)", line: line)
            }
            let cell = fitted[1][0]
            if TextTable.cellWidth(long) + 2 + 8 + 2 + 6 + 2 + 20 > width {
                XCTAssertTrue(cell.hasPrefix("http://med") && cell.hasSuffix(".mkv") && cell.contains("…"),
                              "\(width): the start and the name's end stay: \(cell)", line: line)
                if width >= 80 { XCTAssertTrue(cell.hasSuffix("/episode-01.mkv"), cell, line: line) }
            } else {
                XCTAssertEqual(cell, long, "room enough: whole", line: line)
            }
        }
        XCTAssertEqual(TextTable.fitted(rows, width: nil, shrinking: 0), rows, "not a terminal: as it is, for scripts")
        let narrow = TextTable.fitted(rows, width: 20, shrinking: 0)
        XCTAssertEqual(TextTable.cellWidth(narrow[1][0]), 16, "never below the minimum: the terminal wraps")
    }

    func testWideNamesAreCutByCellsNeverInsideACharacter() {
        let name = "http://h/千と千尋の神隠し.mkv"
        for width in 2...TextTable.cellWidth(name) {
            let cut = TextTable.middleTruncated(name, to: width)
            XCTAssertLessThanOrEqual(TextTable.cellWidth(cut), width, cut)
            XCTAssertGreaterThanOrEqual(TextTable.cellWidth(cut), width - 2, "at most a cell lost each side of the mark: \(cut)")
        }
        XCTAssertEqual(TextTable.middleTruncated("abc", to: 3), "abc")
        XCTAssertEqual(TextTable.middleTruncated("abcdef", to: 1), "…")
        XCTAssertEqual(TextTable.middleTruncated("abcdef", to: 0), "")
    }

    func testNamesAreShownDecodedAndSafe() {
        let rows: [(String, String, UInt)] = [
            ("http://h/My%20Film%20(2001).mkv", "http://h/My Film (2001).mkv", #line),
            ("http://h/%E5%8D%83%E3%81%A8.mkv", "http://h/千と.mkv", #line),
            ("http://h/%CE%95%CE%BB.mkv", "http://h/Ελ.mkv", #line),
            ("http://h/a%1B%5B2Jb", "http://h/a\\u{1B}[2Jb", #line),       // an escape sequence, shown inert
            ("http://h/a%09b%0Ac", "http://h/a\\u{9}b\\u{A}c", #line),      // a cell is one line
            ("http://h/bad%FF.mkv", "http://h/bad%FF.mkv", #line),          // not UTF-8: as it is
            ("http://h/cut%2", "http://h/cut%2", #line),
        ]
        for (url, shown, line) in rows { XCTAssertEqual(TextTable.displayName(url), shown, url, line: line) }
    }
}
