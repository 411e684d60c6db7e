import CacheCore
import Foundation

/// `--bwlimit "08:00,512K 23:00,off"`: the bandwidth limit changing at times of day (or of the
/// week, `Mon-08:00,512K`), as rclone's `--bwlimit` timetables write it.
///
/// Pure: the limit in force at a time is asked with the time's place in the day or week (local
/// time, as rclone reads its timetable), so tests give any time without waiting. The entry in
/// force is the last one that started at or before that time; before the first one of the day
/// (or week), the last one (from the day or week before) still holds. 0 is no limit (`off`).
public struct BandwidthTimetable: Equatable, Sendable {
    public typealias Entry = BandwidthTimetableEntry

    /// Sorted by `minute`; never empty.
    public let entries: [Entry]
    /// Whether the minutes count from Monday 00:00 (a day named in each entry).
    public let weekly: Bool

    public init(entries: [Entry], weekly: Bool) {
        precondition(!entries.isEmpty, "a timetable has at least one entry")
        self.entries = entries.sorted { $0.minute < $1.minute }
        self.weekly = weekly
    }

    /// The limit at `minute` of the day (or week).
    public func bytesPerSecond(atMinute minute: Int) -> Int64 {
        (entries.last { $0.minute <= minute } ?? entries.last!).bytesPerSecond
    }

    /// The limit at `date`, in `calendar`'s time zone (the machine's by default).
    public func bytesPerSecond(at date: Date, calendar: Calendar = .current) -> Int64 {
        bytesPerSecond(atMinute: minute(of: date, calendar: calendar))
    }

    /// The status document's view (`BandwidthLimitStatus`): the limit at `date`, and when it next
    /// changes (the next entry whose limit differs; nil when none does), to what.
    public func status(at date: Date, calendar: Calendar = .current) -> BandwidthLimitStatus {
        let now = minute(of: date, calendar: calendar), rate = bytesPerSecond(atMinute: now)
        let period = weekly ? 7 * 24 * 60 : 24 * 60
        // The entries from the first after `now`, round the day (or week) once.
        let after = entries.filter { $0.minute > now } + entries.filter { $0.minute <= now }
        guard let next = after.first(where: { $0.bytesPerSecond != rate }) else { return BandwidthLimitStatus(bytesPerSecond: rate) }
        let minutes = (next.minute - now + period - 1) % period + 1
        let start = calendar.dateInterval(of: .minute, for: date)?.start ?? date
        return BandwidthLimitStatus(bytesPerSecond: rate, nextChange: start.addingTimeInterval(Double(minutes) * 60),
                                    nextBytesPerSecond: next.bytesPerSecond)
    }

    /// `date`'s minute of the day (or of the week from Monday 00:00), in `calendar`'s time zone.
    func minute(of date: Date, calendar: Calendar) -> Int {
        let c = calendar.dateComponents([.weekday, .hour, .minute], from: date)
        let ofDay = (c.hour ?? 0) * 60 + (c.minute ?? 0)
        guard weekly else { return ofDay }
        // Calendar's weekday: 1 is Sunday; the table's week starts on Monday.
        let mondayBased = ((c.weekday ?? 2) + 5) % 7
        return mondayBased * 24 * 60 + ofDay
    }
}
