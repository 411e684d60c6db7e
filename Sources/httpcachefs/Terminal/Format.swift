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
