import Settings
import XCTest

/// `--egress-budget` values: what each means, and a bad one is one line naming it.
final class EgressBudgetValueTests: XCTestCase {
    func testBudgetsAndTheirPeriods() throws {
        let rows: [(String, EgressBudgetValue)] = [
            ("1M/day", .init(origin: nil, bytes: 1 << 20, period: .day)),
            ("50G/week", .init(origin: nil, bytes: 50 << 30, period: .week)),
            ("10G/month", .init(origin: nil, bytes: 10 << 30, period: .month(resetDay: 1))),
            ("100GiB/Month@15", .init(origin: nil, bytes: 100 << 30, period: .month(resetDay: 15))),
            ("1.5T/month@31", .init(origin: nil, bytes: Int64(1.5 * Double(1 << 40)), period: .month(resetDay: 31))),
            ("https://CDN.example.com 10G/month", .init(origin: "https://cdn.example.com", bytes: 10 << 30, period: .month(resetDay: 1))),
            ("http://10.0.0.5:8080  2G/day", .init(origin: "http://10.0.0.5:8080", bytes: 2 << 30, period: .day)),
        ]
        for (text, value) in rows { XCTAssertEqual(try EgressBudgetValue.parse(text, option: "--egress-budget"), value, text) }
    }

    func testBadBudgetsAreOneLineNamingThem() {
        let rows: [(String, String)] = [
            ("0/day", "an egress budget of 0 for --egress-budget would refuse every fetch"),
            ("0G/month", "an egress budget of 0"),
            ("-1G/day", "invalid size '-1G' for --egress-budget"),
            ("lots/day", "invalid size 'lots' for --egress-budget"),
            ("10G", "invalid egress budget '10G' for --egress-budget: expected SIZE/PERIOD"),
            ("10G/year", "invalid period 'year' in '10G/year'"),
            ("10G/day@3", "invalid period 'day@3'"),
            ("10G/month@0", "invalid reset day '0' in '10G/month@0'"),
            ("10G/month@32", "invalid reset day '32'"),
            ("10G/month@", "invalid reset day ''"),
            ("cdn.example.com 10G/month", "invalid origin 'cdn.example.com'"),
            ("https://cdn.example.com/films 10G/month", "no path or login"),
            ("https://a https://b 1G/day", "invalid egress budget"),
            ("", "invalid egress budget"),
        ]
        for (text, message) in rows {
            XCTAssertThrowsError(try EgressBudgetValue.parse(text, option: "--egress-budget"), text) { error in
                XCTAssertTrue("\(error)".contains(message), "\(text): \(error)")
            }
        }
    }
}
