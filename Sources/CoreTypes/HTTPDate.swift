import Foundation

/// RFC 9110 HTTP-date parsing and formatting: IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"),
/// with the obsolete RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime ("Sun Nov  6
/// 08:49:37 1994") forms accepted.
///
/// By hand, not with `DateFormatter`: a formatter is built per call, and the first one of the
/// process loads ICU's time zone data, which cost a cold mount's first lookup about 15 ms (its
/// entry's mtime comes from Last-Modified) on top of the origin's round trip.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let dayNames = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday

    public static func parse(_ s: String) -> Date? {
        let fields = s.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" || $0 == ":" || $0 == "\t" }).map(String.init)
        guard fields.count >= 7, fields[0].allSatisfy(\.isLetter) else { return nil }
        let day: String, month: String, year: String, clock: ArraySlice<String>, zone: String?
        if let _ = Int(fields[1]) {
            // IMF-fixdate, RFC 850: day-name, day month year hour minute second zone.
            guard fields.count == 8 else { return nil }
            (day, month, year, clock, zone) = (fields[1], fields[2], fields[3], fields[4...6], fields[7])
        } else {
            // asctime: day-name month day hour minute second year, always GMT.
            guard fields.count == 7 else { return nil }
            (day, month, year, clock, zone) = (fields[2], fields[1], fields[6], fields[3...5], nil)
        }
        func digits(_ s: String, _ counts: Set<Int>) -> Int? {
            counts.contains(s.count) && s.allSatisfy({ $0.isASCII && $0.isNumber }) ? Int(s) : nil
        }
        guard let m = months.firstIndex(of: month.lowercased()), let d = digits(day, [1, 2]), var y = digits(year, [2, 4]),
              let h = digits(clock[clock.startIndex], [2]), let min = digits(clock[clock.startIndex + 1], [2]),
              let sec = digits(clock[clock.startIndex + 2], [2]), h <= 23, min <= 59, sec <= 60 else { return nil }
        var offset = 0
        if let zone {
            guard let o = Self.offset(ofZone: zone) else { return nil }
            offset = o
        }
        // RFC 9110: a two-digit year more than 50 years in the future is in the past century.
        if year.count == 2 { y += y < 70 ? 2000 : 1900 }
        let days = daysFromCivil(year: y, month: m + 1, day: d)
        guard civilFromDays(days) == (y, m + 1, d) else { return nil }   // 31 Feb, 0 Jan
        let seconds = days * 86400 + h * 3600 + min * 60 + sec - offset
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    public static func format(_ d: Date) -> String {
        let t = Int(d.timeIntervalSince1970.rounded(.down))
        let days = t >= 0 ? t / 86400 : (t - 86399) / 86400
        let secs = t - days * 86400
        let (y, m, day) = civilFromDays(days)
        let weekday = ((days % 7) + 7) % 7
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(dayNames[weekday]), \(two(day)) \(monthNames[m - 1]) \(y) \(two(secs / 3600)):\(two(secs / 60 % 60)):\(two(secs % 60)) GMT"
    }

    /// Seconds east of GMT for the zones an HTTP date may carry (GMT by the RFC; UTC and
    /// numeric offsets seen in the wild); nil for anything else.
    private static func offset(ofZone zone: String) -> Int? {
        switch zone.uppercased() {
        case "GMT", "UTC", "UT", "Z": return 0
        default:
            guard zone.count == 5, let sign = zone.first, sign == "+" || sign == "-",
                  let hhmm = Int(zone.dropFirst()), zone.dropFirst().allSatisfy(\.isNumber) else { return nil }
            let seconds = (hhmm / 100) * 3600 + (hhmm % 100) * 60
            return sign == "-" ? -seconds : seconds
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    /// The date of a day since 1970-01-01 (the inverse of `daysFromCivil`).
    static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
