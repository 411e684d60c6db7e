import Foundation

/// Human-readable numbers for tables, progress bars and summaries.
enum Format {
    /// `512 B`, `64.0 KiB`, `1.50 GiB`: binary units, like `--cache-size` reads them.
    static func bytes(_ n: Int64) -> String {
        if n < 1024 { return "\(n) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(n) / 1024
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return String(format: value < 10 ? "%.2f %@" : value < 100 ? "%.1f %@" : "%.0f %@", value, units[unit])
    }

    /// `112 MiB/s`, `4.20 MiB/s`, `512 KiB/s`: the binary units of `bytes(_:)`, so a size and a
    /// rate printed side by side are in one unit family.
    static func rate(bytes: Int64, seconds: TimeInterval) -> String {
        guard seconds > 0 else { return "- MiB/s" }
        let perSecond = Double(bytes) / seconds
        guard perSecond.isFinite, perSecond < 9e18 else { return "- MiB/s" }
        return self.bytes(Int64(perSecond)) + "/s"
    }

    /// A time left, in whole units as people say it: `4s`, `59s`, `1m05s`, `2h03m` (rounded up,
    /// so it never says 0s while work is left).
    static func eta(_ seconds: TimeInterval) -> String {
        if !seconds.isFinite || seconds < 0 || seconds > 99 * 3600 { return "-" }
        let s = Int(seconds.rounded(.up))
        if s < 60 { return "\(s)s" }
        if s < 3600 { return String(format: "%dm%02ds", s / 60, s % 60) }
        return String(format: "%dh%02dm", s / 3600, (s % 3600) / 60)
    }

    /// `0.42s`, `12.3s`, `4m05s`, `2h03m`.
    static func duration(_ seconds: TimeInterval) -> String {
        if !seconds.isFinite || seconds < 0 { return "-" }
        if seconds < 10 { return String(format: "%.2fs", seconds) }
        if seconds < 60 { return String(format: "%.1fs", seconds) }
        let s = Int(seconds.rounded())
        if s < 3600 { return String(format: "%dm%02ds", s / 60, s % 60) }
        return String(format: "%dh%02dm", s / 3600, (s % 3600) / 60)
    }

    /// `100%`, `37.5%`, `0%`: never rounds a nearly complete file up to 100%.
    static func percent(_ part: Int64, of whole: Int64?) -> String {
        guard let whole, whole > 0 else { return part > 0 ? "?" : "-" }
        if part >= whole { return "100%" }
        let p = Double(part) * 100 / Double(whole)
        return p < 99.95 ? String(format: p < 10 ? "%.1f%%" : "%.0f%%", p) : "99.9%"
    }

    /// `text` as it may reach a terminal: every control character but tab and newline (C0, DEL
    /// and C1, where ESC and CSI start terminal escape sequences) written as `\u{1B}`. What the
    /// CLI prints quotes outside input (an origin's ETag and Content-Type in `cache info`, its
    /// header values in an error message), and a hostile origin must not be able to retitle,
    /// clear or otherwise drive the user's terminal through them.
    static func terminalSafe(_ text: String) -> String {
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

    /// `2026-11-21 12:00:00Z`: UTC, sortable, unambiguous.
    static func date(_ date: Date) -> String {
        LineLogHandler.timestamp(date).replacingOccurrences(of: "T", with: " ")
    }

    /// A cached URL as a person reads it (`cache ls` on a terminal): percent-encoded names
    /// decoded (`My%20Film.mkv` → `My Film.mkv`), for display only, and every control character
    /// the decoding brings out (tab and newline included: a cell is one line) escaped as
    /// `terminalSafe` writes them. A URL whose escapes are not UTF-8 is shown as it is.
    static func displayName(_ url: String) -> String {
        let decoded = url.removingPercentEncoding ?? url
        return terminalSafe(decoded).replacingOccurrences(of: "\t", with: "\\u{9}")
            .replacingOccurrences(of: "\n", with: "\\u{A}")
    }

    /// `text` cut to `width` characters in the middle (`http://host/lo…/name.mkv`), keeping the
    /// start (the host) and the end (the file's name), where two long URLs differ most.
    static func middleTruncated(_ text: String, to width: Int) -> String {
        guard text.count > width else { return text }
        guard width > 1 else { return String(text.prefix(max(width, 0))) }
        let tail = (width - 1) / 2
        return String(text.prefix(width - 1 - tail)) + "…" + String(text.suffix(tail))
    }

    /// `rows` fitted to `width` columns by shortening the cells of column `shrinking` (never
    /// below `minimum` characters, so a very narrow terminal wraps instead of showing nothing).
    /// Nil `width`: the rows as they are.
    static func fitted(_ rows: [[String]], width: Int?, shrinking column: Int, minimum: Int = 16) -> [[String]] {
        guard let width, let columns = rows.map(\.count).max(), column < columns else { return rows }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        let others = widths.enumerated().filter { $0.offset != column }.map(\.element).reduce(0, +) + 2 * (columns - 1)
        let room = max(width - others, minimum)
        guard widths[column] > room else { return rows }
        return rows.map { row in
            var row = row
            if column < row.count { row[column] = middleTruncated(row[column], to: room) }
            return row
        }
    }

    /// Left-aligned columns (right-aligned where `rightAligned` says), two spaces apart.
    static func table(_ rows: [[String]], rightAligned: Set<Int> = []) -> String {
        guard let columns = rows.map(\.count).max() else { return "" }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: widths[i] - cell.count)
                if i == row.count - 1 && !rightAligned.contains(i) { return cell }
                return rightAligned.contains(i) ? pad + cell : cell + pad
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
