@testable import CacheCore
import Foundation
import Logging
import TestSupport
import XCTest

/// `--egress-budget`'s periods: where each starts and resets, in several time zones, at month
/// ends and across daylight-saving changes. Pure arithmetic, a table.
final class EgressBudgetPeriodTests: XCTestCase {
    private func date(_ iso: String) -> Date { ISO8601DateFormatter().date(from: iso)! }

    private func calendar(_ zone: String) -> Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: zone)!
        return c
    }

    func testEachPeriodStartsAndResetsAtLocalMidnight() {
        let rows: [(zone: String, at: String, period: EgressPeriod, start: String, end: String)] = [
            ("UTC", "2026-03-10T15:00:00Z", .day, "2026-03-10T00:00:00Z", "2026-03-11T00:00:00Z"),
            ("UTC", "2026-03-10T00:00:00Z", .day, "2026-03-10T00:00:00Z", "2026-03-11T00:00:00Z"),   // midnight starts a day
            ("America/New_York", "2026-11-29T03:00:00Z", .day, "2026-11-28T05:00:00Z", "2026-11-29T05:00:00Z"),  // still the 28th there
            // The EU's clocks go forward on 29 March 2026: that day is 23 hours.
            ("Europe/Berlin", "2026-03-29T10:00:00Z", .day, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"),
            // ...and back on 25 October 2026: 25 hours.
            ("Europe/Berlin", "2026-10-25T10:00:00Z", .day, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"),
            // Weeks from Monday: 29 November 2026 is a Sunday.
            ("UTC", "2026-11-29T12:00:00Z", .week, "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"),
            ("UTC", "2026-11-30T00:00:00Z", .week, "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"),
            ("Asia/Tokyo", "2026-11-29T16:00:00Z", .week, "2026-11-29T15:00:00Z", "2026-12-06T15:00:00Z"),  // Monday 01:00 there
            ("UTC", "2026-02-15T12:00:00Z", .month(resetDay: 1), "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"),
            ("UTC", "2026-12-31T23:59:59Z", .month(resetDay: 1), "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"),
            // Day 31 in a shorter month is its last day.
            ("UTC", "2026-02-15T12:00:00Z", .month(resetDay: 31), "2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z"),
            ("UTC", "2026-03-01T12:00:00Z", .month(resetDay: 31), "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z"),
            ("UTC", "2026-04-30T12:00:00Z", .month(resetDay: 31), "2026-04-30T00:00:00Z", "2026-05-31T00:00:00Z"),
            ("UTC", "2028-02-29T12:00:00Z", .month(resetDay: 30), "2028-02-29T00:00:00Z", "2028-03-30T00:00:00Z"),  // a leap year
            ("Asia/Kolkata", "2026-01-14T20:00:00Z", .month(resetDay: 15), "2026-01-14T18:30:00Z", "2026-02-14T18:30:00Z"),
            ("Asia/Kolkata", "2026-01-14T18:00:00Z", .month(resetDay: 15), "2025-12-14T18:30:00Z", "2026-01-14T18:30:00Z"),
        ]
        for (i, r) in rows.enumerated() {
            let w = r.period.window(containing: date(r.at), calendar: calendar(r.zone))
            XCTAssertEqual(w.start, date(r.start), "row \(i): \(r.zone) \(r.at) \(r.period)")
            XCTAssertEqual(w.end, date(r.end), "row \(i): \(r.zone) \(r.at) \(r.period)")
        }
    }

    func testBudgetsAreWrittenAsGiven() {
        XCTAssertEqual("\(EgressBudget(bytes: 1 << 20, period: .day))", "1M/day")
        XCTAssertEqual("\(EgressBudget(bytes: 10 << 30, period: .month(resetDay: 15)))", "10G/month@15")
        XCTAssertEqual("\(EgressBudget(bytes: 1500, period: .week))", "1500/week")
    }

    func testOriginKeysNameOneOriginOneWay() {
        let rows: [(String, String?)] = [
            ("http://Example.com/a/b?c", "http://example.com:80"),
            ("https://example.com", "https://example.com:443"),
            ("https://example.com:443/x", "https://example.com:443"),
            ("http://user:pw@example.com:8080/x", "http://example.com:8080"),
            ("http://[::1]/x", "http://[::1]:80"),
            ("http://[::1]:9000/x", "http://[::1]:9000"),
            ("ftp://example.com/x", nil),
            ("example.com", nil),
        ]
        for (url, key) in rows { XCTAssertEqual(EgressLedger.originKey(of: url), key, url) }
    }
}

/// The ledger: classes yield in order as the budget nears its end, a spent budget refuses every
/// class until its reset, a clock that jumps neither gives a budget back nor keeps an old one,
/// and the use survives a restart. The clock is the test's.
final class EgressLedgerTests: XCTestCase {
    let origin = "http://a.example:80"
    var temp: TemporaryDirectory!

    override func setUp() { temp = TemporaryDirectory() }
    override func tearDown() { temp.remove() }

    private var utc: Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        return c
    }

    private func ledger(_ clock: MovableClock, bytes: Int64 = 1000, file: String? = nil, log: RecordedLog? = nil) -> EgressLedger {
        EgressLedger(rules: .init(everyOrigin: EgressBudget(bytes: bytes, period: .day)), file: file, calendar: utc,
                     logger: log?.logger ?? Logger(label: "test"), clock: { clock.now })
    }

    /// 2030-01-01T10:00:00Z.
    private func morning() -> MovableClock { MovableClock(start: Date(timeIntervalSince1970: 1_893_492_000)) }

    func testClassesYieldInOrderAsTheBudgetNearsItsEnd() {
        let clock = morning()
        let l = ledger(clock)
        let rows: [(add: Int64, refused: [FetchPriority], yielding: String?)] = [
            (0, [], nil),
            (799, [], nil),
            (1, [.preload], "background"),                        // 80 %: warm-up and background stop
            (99, [.preload], "background"),
            (1, [.scan, .preload], "background and scanners"),    // 90 %: scanners too
            (99, [.scan, .preload], "background and scanners"),
            (1, FetchPriority.allCases, "every reader"),          // spent: players too
        ]
        for (i, r) in rows.enumerated() {
            l.add(origin, bytes: r.add)
            let refused = FetchPriority.allCases.filter { l.refusal(origin, priority: $0) != nil }
            XCTAssertEqual(Set(refused), Set(r.refused + (r.refused.contains(.scan) ? [.waitedScan] : [])), "row \(i)")
            XCTAssertEqual(l.status().first?.yielding, r.yielding, "row \(i)")
        }
        let refusal = l.refusal(origin, priority: .waiting)
        XCTAssertEqual(refusal?.spent, true)
        XCTAssertEqual(refusal?.resetsAt, Date(timeIntervalSince1970: 1_893_542_400), "the next midnight")
        XCTAssertEqual(l.retryAfter(url: origin + "/film.mkv"), 50_400, "14 hours to midnight")
        XCTAssertNil(l.refusal("http://b.example:80", priority: .preload), "each origin has its own")
        let s = l.status().first { $0.origin == origin }
        XCTAssertEqual(s?.usedBytes, 1000)
        XCTAssertEqual(s?.leftBytes, 0)
        XCTAssertEqual(s?.spent, true)
        XCTAssertEqual(s?.budget, "1000/day")
    }

    func testASpentBudgetIsLoggedOnceAndResetsAtMidnight() {
        let clock = morning()
        let log = RecordedLog()
        let l = ledger(clock, log: log)
        l.add(origin, bytes: 600)
        l.add(origin, bytes: 600)   // one transfer past the end: it ran when 400 were left
        l.add(origin, bytes: 10)
        XCTAssertEqual(log.lines.filter { $0.contains("egress budget spent") }.count, 1, "\(log.lines)")
        XCTAssertEqual(l.status().first?.usedBytes, 1210)
        clock.advance(14 * 3600)   // midnight
        XCTAssertNil(l.refusal(origin, priority: .preload))
        XCTAssertEqual(l.status().first?.usedBytes, 0)
    }

    func testAClockThatJumpsBackGivesNothingBackAndOneThatJumpsAheadStartsTheNewPeriod() {
        let clock = morning()
        let l = ledger(clock)
        l.add(origin, bytes: 1000)
        clock.advance(-3 * 86400)   // three days back
        XCTAssertNotNil(l.refusal(origin, priority: .waiting), "a clock gone back keeps the spent budget")
        clock.advance(3 * 86400 + 13 * 3600)   // 23:00 of the first day again
        XCTAssertNotNil(l.refusal(origin, priority: .waiting))
        clock.advance(40 * 86400)   // forty days ahead
        XCTAssertNil(l.refusal(origin, priority: .waiting))
        XCTAssertEqual(l.status().first?.periodStart, utc.startOfDay(for: clock.now))
    }

    func testTheUseSurvivesARestartAndAnUnreadableFileCountsFromZero() throws {
        let clock = morning()
        let file = temp.appending("egress-budget.json")
        let first = ledger(clock, file: file)
        first.add(origin, bytes: 300)
        first.save()
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600, "owner-only")
        let second = ledger(clock, file: file)
        XCTAssertEqual(second.status().first?.usedBytes, 300, "the next start remembers")
        second.add(origin, bytes: 500)   // 800: background stops
        XCTAssertNotNil(second.refusal(origin, priority: .preload))
        second.save()
        clock.advance(86400)
        XCTAssertEqual(ledger(clock, file: file).status().first?.usedBytes, 0, "a new day")

        try "not json".write(toFile: file, atomically: true, encoding: .utf8)
        let log = RecordedLog()
        let third = ledger(clock, file: file, log: log)
        XCTAssertTrue(third.status().isEmpty)
        XCTAssertTrue(log.lines.contains { $0.contains("could not be read") }, "\(log.lines)")
    }

    func testTheUseIsSavedAsItGrowsNotOnlyAtTheStop() {
        let clock = morning()
        let file = temp.appending("egress-budget.json")
        let l = ledger(clock, bytes: 1 << 30, file: file)
        l.add(origin, bytes: 1 << 20)
        XCTAssertFalse(FileManager.default.fileExists(atPath: file), "not for every request")
        l.add(origin, bytes: 4 << 20)
        XCTAssertEqual(ledger(clock, bytes: 1 << 30, file: file).status().first?.usedBytes, 5 << 20, "every 4 MiB")
        l.add(origin, bytes: 1)
        clock.advance(11)
        l.add(origin, bytes: 1)
        XCTAssertEqual(ledger(clock, bytes: 1 << 30, file: file).status().first?.usedBytes, (5 << 20) + 2, "every 10 s")
    }

    func testAnOriginNamedInTheRulesIsShownBeforeItIsFetchedFrom() {
        let clock = morning()
        let l = EgressLedger(rules: .init(origins: ["https://cdn.example:443": EgressBudget(bytes: 1 << 30, period: .month(resetDay: 1))]),
                             file: nil, calendar: utc, logger: Logger(label: "test"), clock: { clock.now })
        XCTAssertEqual(l.status().map(\.origin), ["https://cdn.example:443"])
        XCTAssertNil(l.refusal("http://other.example:80", priority: .preload), "an origin without a budget is never refused")
        l.add("http://other.example:80", bytes: 1 << 40)
        XCTAssertEqual(l.status().count, 1)
    }
}

/// A spent budget does not hide what the cache holds: an open whose check is refused for the
/// budget is answered from the cached copy, as when the origin is down.
final class EgressBudgetOpenTests: XCTestCase {
    func testAnOpenRefusedForTheBudgetServesTheCachedCopy() {
        let spent = CacheError.budgetSpent(url: "http://a/f")
        typealias Machine = EntryStateMachine<Int>
        XCTAssertEqual(Machine.openAnswer(after: spent, live: true, lengthKnown: true), .staleCopy(spent))
        XCTAssertEqual(Machine.openAnswer(after: spent, live: false, lengthKnown: false), .failure(spent), "nothing cached: the open fails")
        XCTAssertEqual(CacheError(.budgetSpent(url: "http://a/f"), url: "http://a/f"), spent)
    }
}
