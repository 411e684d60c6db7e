import CoreTypes
import Foundation

/// `--bwlimit`: one rate (`10M`, `500K/s`, `0` or `off` for none), or a timetable as rclone
/// writes it: `"08:00,512K 12:00,10M 23:00,off"` (daily) or `"Mon-08:00,512K Sat-00:00,off"`
/// (weekly; `Mon`..`Sun` or the full names). rclone's `UP:DOWN` rates take the download side
/// (the second), the only one here. A bare number other than 0 is refused: rclone reads it as
/// KiB/s, this option as bytes, so a unit says which was meant.
public enum BandwidthLimitValue: Equatable, Sendable {
    case constant(Int64)
    /// Entries of (minute of the day, or of the week from Monday 00:00; bytes per second, 0: none).
    case timetable(weekly: Bool, entries: [Entry])

    public typealias Entry = BandwidthTimetableEntry

    static let days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    static let fullDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    public static func parse(_ text: String, option: String) throws -> BandwidthLimitValue {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !words.isEmpty else { throw UsageError("empty bandwidth limit for \(option)") }
        if words.count == 1, !words[0].contains(",") { return .constant(try rate(words[0], option: option)) }
        var entries: [Entry] = []
        var weekly: Bool?
        for word in words {
            let parts = word.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw UsageError("invalid timetable entry '\(word)' for \(option): expected HH:MM,RATE or Mon-HH:MM,RATE, entries separated by spaces, e.g. \"08:00,512K 23:00,off\"")
            }
            var when = Substring(parts[0])
            var day: Int?
            if let dash = when.firstIndex(of: "-") {
                let name = when[..<dash].lowercased()
                guard let d = days.firstIndex(of: name) ?? fullDays.firstIndex(of: name) else {
                    throw UsageError("invalid day '\(when[..<dash])' in '\(word)' for \(option): expected Mon, Tue, Wed, Thu, Fri, Sat or Sun")
                }
                day = d
                when = when[when.index(after: dash)...]
            }
            if let weekly, weekly != (day != nil) {
                throw UsageError("timetable for \(option) mixes entries with and without a day: give every entry a day (Mon-08:00,512K) or none")
            }
            weekly = day != nil
            let hm = when.split(separator: ":")
            guard hm.count == 2, hm.allSatisfy({ !$0.isEmpty && $0.count <= 2 && $0.allSatisfy(\.isNumber) }),
                  let h = Int(hm[0]), let m = Int(hm[1]), h < 24, m < 60 else {
                throw UsageError("invalid time '\(when)' in '\(word)' for \(option): expected HH:MM from 00:00 to 23:59")
            }
            let minute = (day ?? 0) * 24 * 60 + h * 60 + m
            if entries.contains(where: { $0.minute == minute }) {
                throw UsageError("timetable for \(option) gives '\(parts[0])' twice")
            }
            entries.append(Entry(minute: minute, bytesPerSecond: try rate(String(parts[1]), option: option)))
        }
        return .timetable(weekly: weekly ?? false, entries: entries.sorted { $0.minute < $1.minute })
    }

    /// One rate: `off` or `0` (no limit), a size (`10M`, `500K/s`), or rclone's `UP:DOWN`.
    static func rate(_ word: String, option: String) throws -> Int64 {
        var text = word.trimmingCharacters(in: .whitespaces)
        if let colon = text.firstIndex(of: ":") { text = String(text[text.index(after: colon)...]) }
        if text.lowercased() == "off" || text == "0" { return 0 }
        if text.lowercased().hasSuffix("/s") { text.removeLast(2) }
        if !text.isEmpty, text.allSatisfy({ $0.isNumber || $0 == "." }) {
            throw UsageError("bandwidth '\(word)' for \(option) has no unit: write \(text)K for KiB/s (rclone's reading) or \(text)B for bytes/s")
        }
        return try ByteSize.parse(text, option: option)
    }
}
