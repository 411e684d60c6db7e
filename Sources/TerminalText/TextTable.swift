/// Text for a terminal: the tables `cache ls` and `status` print, fitted to the window, and
/// outside text made safe to show. Pure functions of their arguments (the executable asks the
/// terminal's width, `TerminalWidth`, and passes it in), so they are table-tested
/// (`TerminalTextTests`).
///
/// Widths are terminal cells, not characters: an East Asian wide or fullwidth character and an
/// emoji take two cells, a combining mark or a zero-width joiner none (a grapheme counts as its
/// widest scalar), so a column of Japanese names lines up with one of Latin names.
public enum TextTable {
    /// The cells `text` takes on a terminal.
    public static func cellWidth(_ text: String) -> Int {
        var n = 0
        for character in text {
            if character.isASCII { n += 1; continue }
            n += character.unicodeScalars.map(cellWidth(of:)).max() ?? 0
        }
        return n
    }

    /// The cells one scalar takes: 0 for a combining mark, a zero-width character or a control;
    /// 2 for the East Asian wide and fullwidth ranges and emoji (Unicode's EastAsianWidth W/F, as
    /// glibc's wcwidth takes them, in blocks); 1 for the rest.
    public static func cellWidth(of scalar: Unicode.Scalar) -> Int {
        let v = scalar.value
        if v < 0x20 || (0x7F..<0xA0).contains(v) { return 0 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if v == 0x200B { return 0 }
        let wide: [ClosedRange<UInt32>] = [
            0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0...0x23F0, 0x23F3...0x23F3,
            0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F...0x267F, 0x2693...0x2693, 0x26A1...0x26A1,
            0x26AA...0x26AB, 0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE...0x26CE, 0x26D4...0x26D4, 0x26EA...0x26EA,
            0x26F2...0x26F3, 0x26F5...0x26F5, 0x26FA...0x26FA, 0x26FD...0x26FD, 0x2705...0x2705, 0x270A...0x270B,
            0x2728...0x2728, 0x274C...0x274C, 0x274E...0x274E, 0x2753...0x2755, 0x2757...0x2757, 0x2795...0x2797,
            0x27B0...0x27B0, 0x27BF...0x27BF, 0x2B1B...0x2B1C, 0x2B50...0x2B50, 0x2B55...0x2B55,
            0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF, 0xA960...0xA97F,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F, 0xFF00...0xFF60, 0xFFE0...0xFFE6,
            0x16FE0...0x18AFF, 0x1B000...0x1B2FF, 0x1F004...0x1F004, 0x1F0CF...0x1F0CF, 0x1F18E...0x1F18E,
            0x1F191...0x1F19A, 0x1F200...0x1F251, 0x1F300...0x1F64F, 0x1F680...0x1F6FF, 0x1F7E0...0x1F7EB,
            0x1F90C...0x1F9FF, 0x1FA70...0x1FAFF, 0x20000...0x2FFFD, 0x30000...0x3FFFD,
        ]
        return wide.contains { $0.contains(v) } ? 2 : 1
    }

    /// `text` as it may reach a terminal: every control character but tab and newline (C0, DEL
    /// and C1, where ESC and CSI start terminal escape sequences) written as `\u{1B}`. What the
    /// CLI prints quotes outside input (an origin's ETag and Content-Type in `cache info`, its
    /// header values in an error message), and a hostile origin must not be able to retitle,
    /// clear or otherwise drive the user's terminal through them.
    public static func terminalSafe(_ text: String) -> String {
        func unsafe(_ v: UInt32) -> Bool { (v < 0x20 && v != 0x09 && v != 0x0A) || (v >= 0x7F && v <= 0x9F) }
        guard text.unicodeScalars.contains(where: { unsafe($0.value) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if unsafe(scalar.value) {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    /// A cached URL as a person reads it (`cache ls` on a terminal): percent-encoded names
    /// decoded (`My%20Film.mkv` → `My Film.mkv`), for display only, and every control character
    /// the decoding brings out (tab and newline included: a cell is one line) escaped as
    /// `terminalSafe` writes them. A URL whose escapes are not UTF-8 is shown as it is.
    public static func displayName(_ url: String) -> String {
        let decoded = percentDecoded(url) ?? url
        var out = ""
        for c in terminalSafe(decoded) {
            switch c {
            case "\t": out += "\\u{9}"
            case "\n": out += "\\u{A}"
            default: out.append(c)
            }
        }
        return out
    }

    /// `text` with its `%XX` escapes decoded; nil if they do not make UTF-8 (or one is cut).
    static func percentDecoded(_ text: String) -> String? {
        guard text.contains("%") else { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var it = Array(text.utf8)[...]
        func hex(_ b: UInt8) -> UInt8? {
            switch b {
            case 0x30...0x39: return b - 0x30
            case 0x41...0x46: return b - 0x41 + 10
            case 0x61...0x66: return b - 0x61 + 10
            default: return nil
            }
        }
        while let b = it.popFirst() {
            guard b == 0x25 else { bytes.append(b); continue }
            guard it.count >= 2, let h = hex(it[it.startIndex]), let l = hex(it[it.startIndex + 1]) else { return nil }
            bytes.append(h << 4 | l)
            it = it.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// `text` cut to `width` cells in the middle (`http://host/lo…/name.mkv`), keeping the start
    /// (the host) and the end (the file's name), where two long URLs differ most. Never cuts a
    /// character in two; a wide character that does not fit leaves its cell empty.
    public static func middleTruncated(_ text: String, to width: Int) -> String {
        guard cellWidth(text) > width else { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        let tailCells = (width - 1) / 2, headCells = width - 1 - tailCells
        var head = "", used = 0
        for c in text {
            let w = cellWidth(String(c))
            guard used + w <= headCells else { break }
            head.append(c)
            used += w
        }
        var tail: [Character] = [], tailUsed = 0
        for c in text.reversed() {
            let w = cellWidth(String(c))
            guard tailUsed + w <= tailCells else { break }
            tail.append(c)
            tailUsed += w
        }
        return head + "…" + String(tail.reversed())
    }

    /// `rows` fitted to `width` cells by shortening the cells of column `shrinking` (never below
    /// `minimum` cells, so a very narrow terminal wraps instead of showing nothing). Nil `width`
    /// (not a terminal): the rows as they are.
    public static func fitted(_ rows: [[String]], width: Int?, shrinking column: Int, minimum: Int = 16) -> [[String]] {
        guard let width, let columns = rows.map(\.count).max(), column < columns else { return rows }
        let widths = columnWidths(rows, columns)
        let others = widths.enumerated().filter { $0.offset != column }.map(\.element).reduce(0, +) + 2 * (columns - 1)
        let room = max(width - others, minimum)
        guard widths[column] > room else { return rows }
        return rows.map { row in
            var row = row
            if column < row.count { row[column] = middleTruncated(row[column], to: room) }
            return row
        }
    }

    /// Left-aligned columns (right-aligned where `rightAligned` says), two spaces apart, padded
    /// by cells; the last column, left-aligned, is not padded (no trailing blanks).
    public static func table(_ rows: [[String]], rightAligned: Set<Int> = []) -> String {
        guard let columns = rows.map(\.count).max() else { return "" }
        return table(rows, widths: columnWidths(rows, columns), rightAligned: rightAligned)
    }

    /// `table` with column widths given (a table printed in parts, each part laid out as the
    /// first): a wider cell pushes the rest of its row instead of being cut.
    public static func table(_ rows: [[String]], widths: [Int], rightAligned: Set<Int> = []) -> String {
        rows.map { row in
            row.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: max(0, (i < widths.count ? widths[i] : 0) - cellWidth(cell)))
                if i == row.count - 1 && !rightAligned.contains(i) { return cell }
                return rightAligned.contains(i) ? pad + cell : cell + pad
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    public static func columnWidths(_ rows: [[String]], _ columns: Int) -> [Int] {
        var widths = [Int](repeating: 0, count: columns)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cellWidth(cell)) } }
        return widths
    }
}
