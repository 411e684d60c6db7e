import Foundation
import TerminalText

/// Human-readable numbers for tables, progress bars and summaries (the tables themselves:
/// `TextTable`, in the TerminalText library).
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

    /// `TextTable.terminalSafe` (outside text made safe for a terminal).
    static func terminalSafe(_ text: String) -> String { TextTable.terminalSafe(text) }

    /// `2026-11-21 12:00:00Z`: UTC, sortable, unambiguous.
    static func date(_ date: Date) -> String {
        LineLogHandler.timestamp(date, separator: UInt8(ascii: " "))
    }
}
