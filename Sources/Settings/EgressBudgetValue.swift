import Foundation

/// `--egress-budget`: `SIZE/PERIOD` for every origin, or `ORIGIN SIZE/PERIOD` for one
/// (`https://cdn.example.com 10G/month@15`); repeatable, and a config-file list. PERIOD is `day`,
/// `week` (from Monday) or `month`, each from local midnight; `month@N` resets on day N of the
/// month (1 to 31; in a shorter month its last day).
public struct EgressBudgetValue: Equatable, Sendable {
    public enum Period: Equatable, Sendable {
        case day, week
        case month(resetDay: Int)
    }

    /// `scheme://host[:port]` as written, lower case; nil: every origin.
    public var origin: String?
    public var bytes: Int64
    public var period: Period

    public init(origin: String?, bytes: Int64, period: Period) {
        self.origin = origin
        self.bytes = bytes
        self.period = period
    }

    public static func parse(_ text: String, option: String) throws -> EgressBudgetValue {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        let expected = "expected SIZE/PERIOD, e.g. 10G/month, 1M/day, 50G/week or 100G/month@15, optionally after an origin (https://cdn.example.com 10G/month)"
        guard (1...2).contains(words.count) else {
            throw UsageError("invalid egress budget '\(text)' for \(option): \(expected)")
        }
        var origin: String?
        if words.count == 2 {
            let o = words[0].lowercased()
            guard o.hasPrefix("http://") || o.hasPrefix("https://") else {
                throw UsageError("invalid origin '\(words[0])' in the egress budget for \(option): expected http:// or https:// and a host, e.g. https://cdn.example.com")
            }
            let rest = o.drop { $0 != "/" }.dropFirst(2)
            guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@"), !rest.contains("?") else {
                throw UsageError("invalid origin '\(words[0])' in the egress budget for \(option): an origin is a scheme, a host and an optional port, no path or login")
            }
            origin = o
        }
        let parts = words[words.count - 1].split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw UsageError("invalid egress budget '\(text)' for \(option): \(expected)")
        }
        let bytes = try ByteSize.parse(String(parts[0]), option: option)
        guard bytes > 0 else {
            throw UsageError("an egress budget of 0 for \(option) would refuse every fetch: leave it out for no budget, or give a size such as 1G/day")
        }
        let period: Period
        let p = parts[1].lowercased()
        let pieces = p.split(separator: "@", omittingEmptySubsequences: false)
        switch (pieces.first.map(String.init), pieces.count) {
        case ("day", 1), ("daily", 1): period = .day
        case ("week", 1), ("weekly", 1): period = .week
        case ("month", 1), ("monthly", 1): period = .month(resetDay: 1)
        case ("month", 2), ("monthly", 2):
            guard let day = Int(pieces[1]), (1...31).contains(day) else {
                throw UsageError("invalid reset day '\(pieces[1])' in '\(text)' for \(option): expected a day of the month from 1 to 31 (month@15)")
            }
            period = .month(resetDay: day)
        default:
            throw UsageError("invalid period '\(parts[1])' in '\(text)' for \(option): expected day, week, month or month@DAY")
        }
        return EgressBudgetValue(origin: origin, bytes: bytes, period: period)
    }
}
