import Foundation

/// `--bwlimit "08:00,512K 23:00,off"`: the bandwidth limit changing at times of day (or of the
/// week, `Mon-08:00,512K`), as rclone's `--bwlimit` timetables write it.
///
/// Pure: the limit in force at a time is asked with the time's place in the day or week (local
/// time, as rclone reads its timetable), so tests give any time without waiting. The entry in
/// force is the last one that started at or before that time; before the first one of the day
/// (or week), the last one (from the day or week before) still holds. 0 is no limit (`off`).
public struct BandwidthTimetable: Equatable, Sendable {
    public struct Entry: Equatable, Sendable {
        /// Minutes after midnight (daily tables), or after Monday midnight (weekly ones).
        public var minute: Int
        /// Bytes per second; 0: no limit.
        public var bytesPerSecond: Int64
        public init(minute: Int, bytesPerSecond: Int64) {
            self.minute = minute
            self.bytesPerSecond = bytesPerSecond
        }
    }

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
        let c = calendar.dateComponents([.weekday, .hour, .minute], from: date)
        let ofDay = (c.hour ?? 0) * 60 + (c.minute ?? 0)
        guard weekly else { return bytesPerSecond(atMinute: ofDay) }
        // Calendar's weekday: 1 is Sunday; the table's week starts on Monday.
        let mondayBased = ((c.weekday ?? 2) + 5) % 7
        return bytesPerSecond(atMinute: mondayBased * 24 * 60 + ofDay)
    }
}
