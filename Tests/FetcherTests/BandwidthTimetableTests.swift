import Foundation
import XCTest
import CacheCore
@testable import Fetcher

/// `--bwlimit "08:00,512K 23:00,off"`: the limit in force at each time, and the throttle taking
/// each new limit at its time, driven by clocks the test sets (wall clock in UTC, uptime).
final class BandwidthTimetableTests: XCTestCase {
    let utc: Calendar = {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        return c
    }()

    /// 2026-11-23 is a Monday.
    func date(_ day: Int, _ hour: Int, _ minute: Int) -> Date {
        utc.date(from: DateComponents(year: 2026, month: 11, day: day, hour: hour, minute: minute))!
    }

    func testTheEntryInForceIsTheLastThatStartedAndWrapsAroundTheDay() {
        let table = BandwidthTimetable(entries: [.init(minute: 8 * 60, bytesPerSecond: 512 << 10),
                                                 .init(minute: 12 * 60, bytesPerSecond: 10 << 20),
                                                 .init(minute: 23 * 60, bytesPerSecond: 0)], weekly: false)
        let cases: [(Int, Int, Int64, String)] = [
            (7, 59, 0, "before the first entry: the last one of the day before (off)"),
            (8, 0, 512 << 10, "at its minute"),
            (11, 59, 512 << 10, "until the next"),
            (12, 0, 10 << 20, "the next"),
            (23, 30, 0, "off: no limit"),
        ]
        for (h, m, rate, why) in cases {
            XCTAssertEqual(table.bytesPerSecond(at: date(24, h, m), calendar: utc), rate, why)
        }
    }

    /// The status document's view: the limit now, and the next entry that changes it, at its
    /// time (round the day, or the week); none when no entry does.
    func testTheStatusNamesTheNextChangeAndItsLimit() {
        let daily = BandwidthTimetable(entries: [.init(minute: 8 * 60, bytesPerSecond: 512 << 10),
                                                 .init(minute: 12 * 60, bytesPerSecond: 512 << 10),
                                                 .init(minute: 23 * 60, bytesPerSecond: 0)], weekly: false)
        let weekly = BandwidthTimetable(entries: [.init(minute: 8 * 60, bytesPerSecond: 1 << 20),
                                                  .init(minute: 5 * 24 * 60, bytesPerSecond: 0)], weekly: true)
        let same = BandwidthTimetable(entries: [.init(minute: 60, bytesPerSecond: 1 << 20)], weekly: false)
        let cases: [(BandwidthTimetable, Date, BandwidthLimitStatus, String)] = [
            (daily, date(24, 9, 30), .init(bytesPerSecond: 512 << 10, nextChange: date(24, 23, 0), nextBytesPerSecond: 0),
             "12:00 changes nothing: the next change is 23:00's"),
            (daily, date(24, 23, 0), .init(bytesPerSecond: 0, nextChange: date(25, 8, 0), nextBytesPerSecond: 512 << 10),
             "at its minute; the next change is the next day's"),
            (daily, date(25, 7, 59).addingTimeInterval(30), .init(bytesPerSecond: 0, nextChange: date(25, 8, 0), nextBytesPerSecond: 512 << 10),
             "within a minute: at the next minute's start"),
            (weekly, date(27, 9, 0), .init(bytesPerSecond: 1 << 20, nextChange: date(28, 0, 0), nextBytesPerSecond: 0), "Friday: Saturday's"),
            (weekly, date(29, 12, 0), .init(bytesPerSecond: 0, nextChange: date(30, 8, 0), nextBytesPerSecond: 1 << 20), "round the week"),
            (same, date(24, 9, 0), .init(bytesPerSecond: 1 << 20), "one entry: no change"),
        ]
        for (table, at, expected, why) in cases {
            XCTAssertEqual(table.status(at: at, calendar: utc), expected, why)
        }
    }

    /// What the daemon gives the status document: nothing without --bwlimit, a fixed limit with no
    /// next change, a timetable's view.
    func testTheConfigurationReportsTheLimitForTheStatusDocument() throws {
        var c = FetcherConfiguration(clock: .realTime)
        XCTAssertNil(c.bandwidthReport, "no limit: no 'bandwidth' in the document")
        c.maxBytesPerSecond = 1 << 20
        XCTAssertEqual(try XCTUnwrap(c.bandwidthReport)(date(24, 9, 0)), BandwidthLimitStatus(bytesPerSecond: 1 << 20))
        c.bandwidthTimetable = BandwidthTimetable(entries: [.init(minute: 8 * 60, bytesPerSecond: 512 << 10),
                                                            .init(minute: 23 * 60, bytesPerSecond: 0)], weekly: false)
        let report = try XCTUnwrap(c.bandwidthReport)(Date())
        XCTAssertNotNil(report.nextChange, "a timetable's next change (in the machine's time zone)")
        XCTAssertTrue([0, 512 << 10].contains(report.bytesPerSecond))
    }

    func testAWeeklyTableCountsFromMonday() {
        let table = BandwidthTimetable(entries: [.init(minute: 8 * 60, bytesPerSecond: 1 << 20),               // Mon-08:00
                                                 .init(minute: 5 * 24 * 60, bytesPerSecond: 0)], weekly: true)  // Sat-00:00
        XCTAssertEqual(table.bytesPerSecond(at: date(23, 7, 0), calendar: utc), 0, "Monday 07:00: still Saturday's")
        XCTAssertEqual(table.bytesPerSecond(at: date(23, 9, 0), calendar: utc), 1 << 20, "Monday 09:00")
        XCTAssertEqual(table.bytesPerSecond(at: date(27, 23, 0), calendar: utc), 1 << 20, "Friday night")
        XCTAssertEqual(table.bytesPerSecond(at: date(28, 0, 1), calendar: utc), 0, "Saturday")
        XCTAssertEqual(table.bytesPerSecond(at: date(29, 12, 0), calendar: utc), 0, "Sunday")
    }

    func testTheThrottleTakesEachLimitAtItsTimeAndOffLetsEveryPausedTransferGo() {
        let table = BandwidthTimetable(entries: [.init(minute: 8 * 60, bytesPerSecond: 1 << 20),
                                                 .init(minute: 23 * 60, bytesPerSecond: 0)], weekly: false)
        var uptime: UInt64 = 0
        let throttle = Throttle(timetable: table, date: date(24, 9, 0), calendar: utc, now: .at(uptime))
        XCTAssertEqual(throttle.bytesPerSecond, 1 << 20)
        XCTAssertTrue(throttle.admit(256 << 10, transfer: 1, priority: .waiting, now: .at(uptime)), "a full bucket lets one chunk through")
        XCTAssertFalse(throttle.admit(1, transfer: 1, priority: .waiting, now: .at(uptime)), "in debt")
        XCTAssertFalse(throttle.admit(1, transfer: 2, priority: .far, now: .at(uptime)))

        // 23:00: off. Looked at no more than once a second of uptime.
        throttle.follow(date: self.date(24, 23, 0), calendar: utc, now: .at(uptime + 1))
        XCTAssertEqual(throttle.bytesPerSecond, 1 << 20, "not looked at again within the second")
        uptime += 1_000_000_000
        throttle.follow(date: self.date(24, 23, 0), calendar: utc, now: .at(uptime))
        XCTAssertEqual(throttle.bytesPerSecond, 0)
        XCTAssertEqual(throttle.due(now: .at(uptime)), [1, 2], "every paused transfer goes on, the waiting read first")
        XCTAssertTrue(throttle.admit(100 << 20, transfer: 1, priority: .waiting, now: .at(uptime)), "no limit")
        XCTAssertNil(throttle.wait(now: .at(uptime)))

        // 08:00 the next day: the limit again, from a fresh bucket.
        uptime += 1_000_000_000
        throttle.follow(date: self.date(25, 8, 0), calendar: utc, now: .at(uptime))
        XCTAssertEqual(throttle.bytesPerSecond, 1 << 20)
        XCTAssertTrue(throttle.admit(256 << 10, transfer: 3, priority: .waiting, now: .at(uptime)))
        XCTAssertFalse(throttle.admit(1, transfer: 3, priority: .waiting, now: .at(uptime)), "limited again")
    }
}
