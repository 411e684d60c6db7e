/// One entry of a `--bwlimit` timetable (`"08:00,512K"`): from which minute a limit holds. What
/// the option's parser (Settings' `BandwidthLimitValue`) gives and the fetcher's
/// `BandwidthTimetable` follows, one type for both.
public struct BandwidthTimetableEntry: Equatable, Sendable {
    /// Minutes after midnight (daily tables), or after Monday midnight (weekly ones).
    public var minute: Int
    /// Bytes per second; 0: no limit.
    public var bytesPerSecond: Int64

    public init(minute: Int, bytesPerSecond: Int64) {
        self.minute = minute
        self.bytesPerSecond = bytesPerSecond
    }
}
