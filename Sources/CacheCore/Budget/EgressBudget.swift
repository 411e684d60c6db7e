import Foundation

/// `--egress-budget SIZE/PERIOD`: the most bytes one origin may send in a period (a day, a week,
/// a month), which no peer caps: a metered origin (a CDN billed per GiB, a host with a monthly
/// transfer allowance) costs at most this.
///
/// Pure values and arithmetic, with the calendar passed in (local time in the daemon, any time
/// zone in tests): which period an instant falls in, and when it resets.
public struct EgressBudget: Sendable, Equatable, Codable, CustomStringConvertible {
    public var bytes: Int64
    public var period: EgressPeriod

    public init(bytes: Int64, period: EgressPeriod) {
        self.bytes = bytes
        self.period = period
    }

    /// The most of the budget `priority`'s fetches may use (`EgressLedger`): as the budget nears
    /// its end, classes yield in order. Warm-up and background readers stop at 80 %, scanners at
    /// 90 %, and players (a waiting read and read-ahead) get the rest.
    public func share(for priority: FetchPriority) -> Int64 {
        switch priority {
        case .preload: return bytes / 10 * 8
        case .scan, .waitedScan: return bytes / 10 * 9
        case .waiting, .near, .far: return bytes
        }
    }

    /// `10.0 GiB/month@15`, as the user would write it.
    public var description: String { "\(Self.size(bytes))/\(period)" }

    static func size(_ n: Int64) -> String {
        let units: [(Int64, String)] = [(1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]
        for (unit, name) in units where n >= unit && n % unit == 0 { return "\(n / unit)\(name)" }
        return "\(n)"
    }
}

/// How long a budget lasts before it starts again, in local time.
public enum EgressPeriod: Sendable, Equatable, Codable, CustomStringConvertible {
    /// From midnight to midnight.
    case day
    /// From Monday's midnight to the next.
    case week
    /// From midnight of day `resetDay` (1...31) of a month to that of the next; in a month
    /// without that day, its last day.
    case month(resetDay: Int)

    public var description: String {
        switch self {
        case .day: return "day"
        case .week: return "week"
        case let .month(d): return d == 1 ? "month" : "month@\(d)"
        }
    }

    /// The period `date` falls in: its start (inclusive) and end (exclusive, the reset).
    /// Midnights are the calendar's (a day across a daylight-saving change is 23 or 25 hours).
    public func window(containing date: Date, calendar: Calendar) -> (start: Date, end: Date) {
        let midnight = calendar.startOfDay(for: date)
        switch self {
        case .day:
            return (midnight, Self.dayStart(after: midnight, days: 1, calendar))
        case .week:
            // Calendar weekdays: 1 is Sunday; Monday is 2.
            let weekday = calendar.component(.weekday, from: midnight)
            let start = Self.dayStart(after: midnight, days: -((weekday + 5) % 7), calendar)
            return (start, Self.dayStart(after: start, days: 7, calendar))
        case let .month(resetDay):
            let thisMonth = Self.reset(in: midnight, resetDay, calendar)
            if date >= thisMonth {
                return (thisMonth, Self.reset(in: Self.monthsLater(thisMonth, 1, calendar), resetDay, calendar))
            }
            return (Self.reset(in: Self.monthsLater(thisMonth, -1, calendar), resetDay, calendar), thisMonth)
        }
    }

    /// Midnight `days` days after the midnight `midnight` (by calendar days, so across a
    /// daylight-saving change too).
    private static func dayStart(after midnight: Date, days: Int, _ calendar: Calendar) -> Date {
        let noon = calendar.date(byAdding: .hour, value: 12, to: midnight) ?? midnight
        let later = calendar.date(byAdding: .day, value: days, to: noon) ?? noon.addingTimeInterval(Double(days) * 86400)
        return calendar.startOfDay(for: later)
    }

    /// The reset of the month holding `date`: midnight of day `resetDay`, or of its last day.
    private static func reset(in date: Date, _ resetDay: Int, _ calendar: Calendar) -> Date {
        var c = calendar.dateComponents([.year, .month], from: date)
        let days = calendar.range(of: .day, in: .month, for: date)?.count ?? 28
        c.day = min(resetDay, days)
        c.hour = 12   // noon of that day, then its midnight (a day may start at 01:00)
        return calendar.startOfDay(for: calendar.date(from: c) ?? date)
    }

    /// A day in the month `months` months from `date`'s (the 10th: every month has one).
    private static func monthsLater(_ date: Date, _ months: Int, _ calendar: Calendar) -> Date {
        var c = calendar.dateComponents([.year, .month], from: date)
        c.day = 10
        c.hour = 12
        let mid = calendar.date(from: c) ?? date
        return calendar.date(byAdding: .month, value: months, to: mid) ?? mid
    }
}
