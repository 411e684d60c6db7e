import CoreTypes
@testable import EntryMachine
import XCTest

/// A reader's pace, fed reads and times by hand: a copy and a player are told apart, and a
/// player's read-ahead follows what it consumes.
final class ReaderPaceTests: XCTestCase {
    let chunk: Int64 = 128 << 10

    func testTheKindIsUnknownUntilTheRunHasLastedASecond() {
        var p = ReaderPace(now: 10, at: 0)
        p.note(readEnd: chunk, missed: true, now: 10.1)
        XCTAssertEqual(p.kind(now: 10.5), .unknown)
        XCTAssertEqual(p.readAheadPriority(now: 10.5), .far, "unknown read-ahead yields")
    }

    func testAReaderWhoseReadsWaitIsACopy() {
        var p = ReaderPace(now: 0, at: 0)
        var t = 0.0, end: Int64 = 0
        for _ in 0..<100 { t += 0.01; end += chunk; p.note(readEnd: end, missed: true, now: t) }
        XCTAssertEqual(p.kind(now: t), .greedy)
        XCTAssertEqual(p.readAheadPriority(now: t), .near)
        XCTAssertGreaterThan(p.readAheadBound(now: t, floor: 256 << 10), 32 << 20, "a fast copy is not bounded")
    }

    func testAPlayerGetsReadAheadInProportionToItsBitrate() {
        // 4 Mbit/s: 512 KB/s, in 128 KiB reads after a burst of cold ones.
        var p = ReaderPace(now: 0, at: 0)
        var t = 0.0, end: Int64 = 0
        for _ in 0..<4 { t += 0.02; end += chunk; p.note(readEnd: end, missed: true, now: t) }
        for _ in 0..<40 { t += Double(chunk) / 512_000; end += chunk; p.note(readEnd: end, missed: false, now: t) }
        XCTAssertEqual(p.kind(now: t), .paced)
        XCTAssertEqual(p.readAheadPriority(now: t), .far)
        let rate = p.rate(now: t)
        XCTAssertEqual(rate, 512_000, accuracy: 60_000)
        let bound = p.readAheadBound(now: t, floor: 256 << 10)
        XCTAssertLessThan(bound, Int64(rate * ReaderPace.maxLead) + 1, "never more than the longest lead")
        XCTAssertGreaterThanOrEqual(bound, Int64(rate * ReaderPace.baseLead))
    }

    func testTheLeadGrowsWhileNoReadWaitsAndStopsGrowingAtAMiss() {
        var p = ReaderPace(now: 0, at: 0)
        XCTAssertEqual(p.lead(now: 0), ReaderPace.baseLead)
        XCTAssertEqual(p.lead(now: 10), ReaderPace.baseLead + 5)
        XCTAssertEqual(p.lead(now: 1000), ReaderPace.maxLead)
        p.note(readEnd: chunk, missed: true, now: 1000)
        XCTAssertEqual(p.lead(now: 1000), ReaderPace.baseLead, "the link did not keep up")
    }

    func testABurstAtTheStartIsNotARate() {
        var p = ReaderPace(now: 0, at: 0)
        p.note(readEnd: 1 << 20, missed: true, now: 0.001)
        XCTAssertEqual(p.rate(now: 0.001), Double(1 << 20) / ReaderPace.rampFloor)
    }

    func testASeekStartsANewRun() {
        var p = ReaderPace(now: 0, at: 0)
        for i in 1...50 { p.note(readEnd: Int64(i) * chunk, missed: true, now: Double(i) * 0.05) }
        p.restart(now: 3, at: 90 << 20)
        XCTAssertEqual(p.kind(now: 3.5), .unknown)
        XCTAssertEqual(p.rate(now: 3.5), 0)
    }

    func testOnlyARunThatBeganWithASeekIsBoundWhileItsKindIsUnknown() {
        var p = ReaderPace(now: 0, at: 0)
        p.restart(now: 0, at: 0, seek: false)
        XCTAssertFalse(p.afterSeek, "a reader's first run: a copy from the start fills the link at once")
        p.restart(now: 5, at: 90 << 20)
        XCTAssertTrue(p.afterSeek)
    }

    func testWhileTheKindIsUnknownReadAheadIsAtMostASecondOfTheLink() {
        let rows: [(String, window: Int64, linkRate: Double?, bound: Int64)] = [
            ("a 10 Mbit/s link: about a second of it, no parallel streams after a seek", 16 << 20, 1_250_000, 1_250_000),
            ("a 200 Mbit/s connection: a copy's window is not cut", 16 << 20, 25_000_000, 16 << 20),
            ("not measured yet (an entry's first fetches): not bounded", 16 << 20, nil, 16 << 20),
            ("a transfer measured crawling: the floor", 16 << 20, 10_000, ReaderPace.unknownFloor),
            ("a window under the bound stays as it is", 128 << 10, 1_250_000, 128 << 10),
        ]
        for row in rows {
            XCTAssertEqual(ReaderPace.boundWhileUnknown(row.window, linkRate: row.linkRate), row.bound, row.0)
        }
    }
}

/// Which fetches a waiting read makes urgent.
final class InFlightPriorityTests: XCTestCase {
    func testAFetchThatDeliversBytesAReadWaitsForIsWaitingUntilTheReadIsAnswered() {
        var t = InFlightTable()
        t.start(id: 1, generation: 1, start: 0, end: 1000, reader: 7, priority: .far, now: 0)
        t.start(id: 2, generation: 1, start: 1000, end: 2000, reader: 7, priority: .far, now: 0)
        t.start(id: 3, generation: 1, start: 2000, end: 3000, reader: 7, priority: .near, now: 0)
        XCTAssertEqual(t.prioritize(waiting: [(0..<100, 5.0), (50..<150, 4.0)], now: 6),
                       [.init(id: 1, priority: .waiting, waitedSeconds: 2)], "from the oldest read")
        XCTAssertEqual(t.prioritize(waiting: [(0..<100, 5.0), (50..<150, 4.0)], now: 7), [], "nothing changed")
        XCTAssertEqual(t.prioritize(waiting: [(0..<100, 5.0)], now: 7),
                       [.init(id: 1, priority: .waiting, waitedSeconds: 2)], "the oldest read was answered")
        XCTAssertEqual(t.prioritize(waiting: [], now: 8), [.init(id: 1, priority: .far, waitedSeconds: 0)])
    }

    func testOnlyWhatAFetchHasStillToDeliverCounts() {
        var t = InFlightTable()
        t.start(id: 1, generation: 1, start: 0, end: 1000, reader: 7, priority: .far, now: 0)
        _ = t.advance(1, to: 500, now: 1)
        XCTAssertEqual(t.prioritize(waiting: [(100..<200, 1.0)], now: 2), [], "those bytes arrived already")
        XCTAssertEqual(t.prioritize(waiting: [(400..<600, 1.0)], now: 2).map(\.priority), [.waiting])
    }
}
