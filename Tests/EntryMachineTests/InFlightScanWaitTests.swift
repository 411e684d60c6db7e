import XCTest
import CoreTypes
@testable import EntryMachine

/// Which class a fetch takes while a scanner's read waits on it (`FetchPriority.waitedScan`):
/// above read-ahead and the scan's own margin, below a player's waiting read, which always wins.
final class InFlightScanWaitTests: XCTestCase {
    func testAScannersWaitRaisesAFetchAboveReadAheadAndAPlayersWaitAboveThat() {
        struct Row {
            var line: UInt
            var base: FetchPriority
            var players: [(range: Range<Int64>, since: Double)] = []
            var scanners: [(range: Range<Int64>, since: Double)] = []
            var becomes: FetchPriority?
            var waited: Double = 0
        }
        let rows: [Row] = [
            Row(line: #line, base: .scan, scanners: [(0..<100, 4)], becomes: .waitedScan, waited: 2),     // a probe's own fetch
            Row(line: #line, base: .near, scanners: [(0..<100, 4)], becomes: .waitedScan, waited: 2),     // a copy's stream a probe waits on
            Row(line: #line, base: .far, scanners: [(0..<100, 4)], becomes: .waitedScan, waited: 2),
            Row(line: #line, base: .preload, scanners: [(0..<100, 4)], becomes: .waitedScan, waited: 2),
            Row(line: #line, base: .scan, players: [(0..<100, 5)], scanners: [(0..<100, 3)], becomes: .waiting, waited: 1),
            Row(line: #line, base: .waiting, scanners: [(0..<100, 4)], becomes: nil),                    // nothing to raise
            Row(line: #line, base: .scan, scanners: [(2000..<2100, 4)], becomes: nil),                   // bytes it does not deliver
        ]
        for r in rows {
            var t = InFlightTable()
            t.start(id: 1, generation: 1, start: 0, end: 1000, reader: 7, priority: r.base, now: 0)
            let changes = t.prioritize(waiting: r.players, scanning: r.scanners, now: 6)
            XCTAssertEqual(changes, r.becomes.map { [.init(id: 1, priority: $0, waitedSeconds: r.waited)] } ?? [], line: r.line)
        }
    }

    func testAFetchFallsBackToItsClassOnceTheScannersReadIsAnswered() {
        var t = InFlightTable()
        t.start(id: 1, generation: 1, start: 0, end: 1000, reader: 7, priority: .scan, now: 0)
        XCTAssertEqual(t.prioritize(waiting: [], scanning: [(0..<100, 5)], now: 6).map(\.priority), [.waitedScan])
        XCTAssertEqual(t.prioritize(waiting: [], scanning: [(0..<100, 5)], now: 7), [], "nothing changed")
        XCTAssertEqual(t.prioritize(waiting: [], now: 8), [.init(id: 1, priority: .scan, waitedSeconds: 0)])
    }

    func testTheClassesInOrder() {
        XCTAssertEqual(FetchPriority.allCases.sorted(), [.waiting, .waitedScan, .near, .far, .scan, .preload])
        XCTAssertEqual(FetchPriority.allCases.map(\.rawValue), [0, 5, 1, 2, 3, 4], "the codes of the classes that were there stay")
        XCTAssertEqual(ReaderClass.allCases.map(\.waitedFetchClass), [.waiting, .waiting, .waitedScan, nil])
    }
}
