import CoreTypes
@testable import EntryMachine
import XCTest

/// The arrival side of an entry's life with no engine: what an arrival is (ignored, cut off,
/// taken), which of its bytes are new and which read-ahead, how they are cut for the writer,
/// what a finished write records, when a writer that found no room tries again, and what a
/// confirming head or a whole body changes in the entry's info. One row per transition.
final class EntryStateMachineArrivalTests: XCTestCase {
    typealias Machine = EntryStateMachine<Int>
    typealias State = Machine.State

    private static var live: State { .live(.init()) }
    private static var probing: State { .probing(.init()) }

    // MARK: Bytes arrived

    func testBytesArrived() {
        struct Row {
            var line: UInt
            var state: State = EntryStateMachineArrivalTests.live
            var range: Range<Int64>
            var current = true
            var length: Int64? = 1000
            var ownLimit: Int64?
            var engineLimit: Int64 = 500
            var action: Machine.ArrivalAction
        }
        let rows = [
            // Bytes of the entry's version, on a fetch of its table: taken, whatever their size.
            Row(line: #line, range: 0..<100, action: .take),
            Row(line: #line, range: 900..<2000, action: .take),   // past the engine's limit, but the length is known
            Row(line: #line, state: Self.probing, range: 0..<100, action: .take),
            // The fetch left the table, or the entry moved on or left its shard: nothing recorded.
            Row(line: #line, range: 0..<100, current: false, action: .ignore),
            Row(line: #line, state: .removed, range: 0..<100, action: .ignore),
            Row(line: #line, state: .removed, range: 0..<100, length: nil, action: .ignore),
            // No length: taken up to the limit, cut off past it; the open's own limit wins.
            Row(line: #line, range: 400..<500, length: nil, action: .take),
            Row(line: #line, range: 400..<501, length: nil, action: .cutOff(limit: 500, asked: false)),
            Row(line: #line, range: 0..<64, length: nil, ownLimit: 64, action: .take),
            Row(line: #line, range: 48..<65, length: nil, ownLimit: 64, action: .cutOff(limit: 64, asked: true)),
            Row(line: #line, range: 400..<600, length: nil, ownLimit: 1000, action: .take),
            Row(line: #line, range: 400..<600, current: false, length: nil, action: .ignore),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            let action = machine.bytesArrived(range: row.range, current: row.current, length: row.length,
                                              ownLimit: row.ownLimit, engineLimit: row.engineLimit)
            XCTAssertEqual(action, row.action, line: row.line)
            XCTAssertEqual(machine.state, row.state, "an arrival changes no fact of the machine", line: row.line)
        }
    }

    func testNewBytesAreThoseNeitherOnDiskNorPending() {
        struct Row { var line: UInt; var range: Range<Int64>; var coverage: [Range<Int64>]; var pending: [Range<Int64>]; var new: [Range<Int64>] }
        let rows = [
            Row(line: #line, range: 0..<100, coverage: [], pending: [], new: [0..<100]),
            Row(line: #line, range: 0..<100, coverage: [0..<100], pending: [], new: []),
            Row(line: #line, range: 0..<100, coverage: [20..<40], pending: [], new: [0..<20, 40..<100]),
            Row(line: #line, range: 0..<100, coverage: [], pending: [50..<150], new: [0..<50]),
            Row(line: #line, range: 0..<100, coverage: [0..<10], pending: [30..<40, 90..<95], new: [10..<30, 40..<90, 95..<100]),
            Row(line: #line, range: 0..<100, coverage: [0..<50], pending: [50..<100], new: []),
        ]
        for row in rows {
            XCTAssertEqual(Machine.newBytes(in: row.range, coverage: RangeSet(row.coverage), pending: RangeSet(row.pending)),
                           row.new, line: row.line)
        }
    }

    func testReadAheadIsWhatNoWaitingReadAskedFor() {
        struct Row { var line: UInt; var gap: Range<Int64>; var waiting: [Range<Int64>]; var ahead: Machine.ReadAhead; var marked: [Range<Int64>] }
        let rows = [
            // No read waits for any of it: all read-ahead, with nothing allocated.
            Row(line: #line, gap: 100..<200, waiting: [], ahead: .all, marked: [100..<200]),
            Row(line: #line, gap: 100..<200, waiting: [0..<100, 200..<300], ahead: .all, marked: [100..<200]),
            // Reads wait for some or all of it: only the rest is read-ahead.
            Row(line: #line, gap: 100..<200, waiting: [0..<150], ahead: .only(RangeSet([150..<200])), marked: [150..<200]),
            Row(line: #line, gap: 100..<200, waiting: [120..<130, 160..<170], ahead: .only(RangeSet([100..<120, 130..<160, 170..<200])),
                marked: [100..<120, 130..<160, 170..<200]),
            Row(line: #line, gap: 100..<200, waiting: [0..<1000], ahead: .only(RangeSet()), marked: []),
        ]
        for row in rows {
            let ahead = Machine.readAhead(in: row.gap, waiting: row.waiting)
            XCTAssertEqual(ahead, row.ahead, line: row.line)
            var unread = RangeSet()
            let added = Machine.markReadAhead(row.gap, ahead, in: &unread)
            XCTAssertEqual(unread, RangeSet(row.marked), line: row.line)
            XCTAssertEqual(added, RangeSet(row.marked).count, line: row.line)
        }
        // Read-ahead marked already is not counted twice.
        var unread = RangeSet([100..<150])
        XCTAssertEqual(Machine.markReadAhead(100..<200, .all, in: &unread), 50)
        XCTAssertEqual(unread, RangeSet([100..<200]))
    }

    func testNewBytesAreCutAtSliceBoundaries() {
        struct Row { var line: UInt; var gap: Range<Int64>; var chunks: [Range<Int64>] }
        let rows = [
            Row(line: #line, gap: 0..<100, chunks: [0..<100]),
            Row(line: #line, gap: 0..<1024, chunks: [0..<1024]),
            Row(line: #line, gap: 1000..<1100, chunks: [1000..<1024, 1024..<1100]),
            Row(line: #line, gap: 1000..<3000, chunks: [1000..<1024, 1024..<2048, 2048..<3000]),
            Row(line: #line, gap: 2048..<2048, chunks: []),
        ]
        for row in rows {
            XCTAssertEqual(Array(Machine.chunks(of: row.gap, sliceSize: 1024)), row.chunks, line: row.line)
        }
    }

    // MARK: Write completed

    func testWriteCompleted() {
        struct Row { var line: UInt; var state: State; var current: Bool; var action: Machine.WriteAction }
        let rows = [
            Row(line: #line, state: Self.live, current: true, action: .record),
            Row(line: #line, state: Self.probing, current: true, action: .record),
            // Another version now: its pending bytes are dropped, nothing recorded.
            Row(line: #line, state: Self.live, current: false, action: .dropPending),
            Row(line: #line, state: .removed, current: true, action: .dropPending),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            XCTAssertEqual(machine.writeCompleted(current: row.current), row.action, line: row.line)
            XCTAssertEqual(machine.state, row.state, line: row.line)
        }
    }

    func testRecordWrittenMarksCoverageSliceSizesAndAccess() {
        struct Row {
            var line: UInt
            var coverage: [Range<Int64>] = []
            var sliceBytes: [Int64: Int64] = [:]
            var written: [Range<Int64>]
            var added: Int64
            var nextCoverage: [Range<Int64>]
            var nextSliceBytes: [Int64: Int64]
            var accessed: Set<Int64>
        }
        let rows = [
            Row(line: #line, written: [], added: 0, nextCoverage: [], nextSliceBytes: [:], accessed: []),
            Row(line: #line, written: [0..<100], added: 100, nextCoverage: [0..<100], nextSliceBytes: [0: 100], accessed: [0]),
            Row(line: #line, written: [0..<100, 1024..<1100], added: 176, nextCoverage: [0..<100, 1024..<1100],
                nextSliceBytes: [0: 100, 1: 76], accessed: [0, 1]),
            Row(line: #line, coverage: [0..<100], sliceBytes: [0: 100], written: [100..<200], added: 100,
                nextCoverage: [0..<200], nextSliceBytes: [0: 200], accessed: [0]),
            // Bytes the coverage had already add nothing to the engine's total.
            Row(line: #line, coverage: [0..<100], sliceBytes: [0: 100], written: [50..<150], added: 50,
                nextCoverage: [0..<150], nextSliceBytes: [0: 200], accessed: [0]),
        ]
        for row in rows {
            var coverage = RangeSet(row.coverage), sliceBytes = row.sliceBytes, access: [Int64: Double] = [7: 1]
            let added = Machine.recordWritten(row.written, sliceSize: 1024, now: 42, coverage: &coverage,
                                              sliceBytes: &sliceBytes, sliceAccess: &access)
            XCTAssertEqual(added, row.added, line: row.line)
            XCTAssertEqual(coverage, RangeSet(row.nextCoverage), line: row.line)
            XCTAssertEqual(sliceBytes, row.nextSliceBytes, line: row.line)
            var expected: [Int64: Double] = [7: 1]
            for s in row.accessed { expected[s] = 42 }
            XCTAssertEqual(access, expected, line: row.line)
        }
    }

    // MARK: Write refused

    func testAWriterThatFoundNoRoomWaitsAPauseBeforeTryingTheDiskAgain() {
        struct Row { var line: UInt; var now: Double; var pausedUntil: Double; var mayWrite: Bool }
        let refusedAt = 100.0, until = refusedAt + Machine.noRoomPause
        let rows = [
            Row(line: #line, now: 5, pausedUntil: 0, mayWrite: true),      // never refused
            Row(line: #line, now: refusedAt, pausedUntil: until, mayWrite: false),
            Row(line: #line, now: refusedAt + 0.5, pausedUntil: until, mayWrite: false),
            Row(line: #line, now: until, pausedUntil: until, mayWrite: true),
            Row(line: #line, now: until + 10, pausedUntil: until, mayWrite: true),
            // The clock was set back past the refusal: no pause of an hour.
            Row(line: #line, now: refusedAt - 3600, pausedUntil: until, mayWrite: true),
        ]
        XCTAssertEqual(Machine.noRoomPause, 1)
        for row in rows {
            XCTAssertEqual(Machine.mayWrite(now: row.now, pausedUntil: row.pausedUntil), row.mayWrite, line: row.line)
        }
    }

    // MARK: Transfer finished: what it left undelivered

    func testShortfall() {
        struct Row { var line: UInt; var position: Int64; var end: Int64?; var clean: Bool; var undelivered: Range<Int64>; var endedShort: Bool }
        let rows = [
            // All delivered: nothing left, not short.
            Row(line: #line, position: 100, end: 100, clean: true, undelivered: 100..<100, endedShort: false),
            // Ended cleanly before its end: short, the rest undelivered.
            Row(line: #line, position: 60, end: 100, clean: true, undelivered: 60..<100, endedShort: true),
            // Failed before its end: the rest undelivered, but not "short" (the failure says why).
            Row(line: #line, position: 60, end: 100, clean: false, undelivered: 60..<100, endedShort: false),
            // To the end of the file: its end is the file's, never short.
            Row(line: #line, position: 60, end: nil, clean: true, undelivered: 60..<Int64.max, endedShort: false),
            Row(line: #line, position: 60, end: nil, clean: false, undelivered: 60..<Int64.max, endedShort: false),
            // A body that ran past its end (an origin that sent more) leaves nothing.
            Row(line: #line, position: 150, end: 100, clean: true, undelivered: 100..<100, endedShort: false),
        ]
        for row in rows {
            let (undelivered, endedShort) = Machine.shortfall(position: row.position, end: row.end, clean: row.clean)
            XCTAssertEqual(undelivered, row.undelivered, line: row.line)
            XCTAssertEqual(endedShort, row.endedShort, line: row.line)
        }
    }

    // MARK: Head: what a confirmation and a body change in the entry's info

    private func info(length: Int64? = 1000, acceptsRanges: Bool = false) -> EntryInfo {
        EntryInfo(key: CacheKey(rawValue: "k"), url: "http://origin.test/f", finalURL: "http://origin.test/f", length: length,
                  contentType: "video/mp4", etag: "\"e\"", lastModified: nil, acceptsRanges: acceptsRanges, generation: 3,
                  validatedAt: Date(timeIntervalSince1970: 0))
    }

    private func head(_ status: Int, total: Int64?) -> ResponseHead {
        ResponseHead(status: status, finalURL: "http://mirror.test/f", bodyStart: 0, totalLength: total, acceptsRanges: false)
    }

    func testConfirmedInfo() {
        struct Row { var line: UInt; var info: EntryInfo; var head: ResponseHead; var length: Int64?; var acceptsRanges: Bool }
        let rows = [
            // A 206 shows ranges are served; a length known stays.
            Row(line: #line, info: info(), head: head(206, total: 2000), length: 1000, acceptsRanges: true),
            Row(line: #line, info: info(length: nil), head: head(206, total: 2000), length: 2000, acceptsRanges: true),
            Row(line: #line, info: info(length: nil), head: head(206, total: nil), length: nil, acceptsRanges: true),
            // A 200 changes nothing about ranges either way.
            Row(line: #line, info: info(acceptsRanges: true), head: head(200, total: 1000), length: 1000, acceptsRanges: true),
            Row(line: #line, info: info(), head: head(200, total: 1000), length: 1000, acceptsRanges: false),
        ]
        let now = Date(timeIntervalSince1970: 1_000_000)
        for row in rows {
            let next = Machine.confirmed(row.info, by: row.head, at: now)
            XCTAssertEqual(next.validatedAt, now, line: row.line)
            XCTAssertEqual(next.finalURL, "http://mirror.test/f", line: row.line)
            XCTAssertEqual(next.length, row.length, line: row.line)
            XCTAssertEqual(next.acceptsRanges, row.acceptsRanges, line: row.line)
            XCTAssertEqual(next.generation, row.info.generation, line: row.line)
            XCTAssertEqual(next.etag, row.info.etag, line: row.line)
        }
    }

    func testInfoAfterBody() {
        struct Row { var line: UInt; var body: HeadDecision.Body; var acceptsRanges: Bool }
        let rows = [
            Row(line: #line, body: .partial, acceptsRanges: true),
            Row(line: #line, body: .none, acceptsRanges: true),
            Row(line: #line, body: .wrongStart("asked for bytes from 0, got 40"), acceptsRanges: true),
            // The whole body, sent or streaming already: ranges are not served.
            Row(line: #line, body: .whole(ignoredRange: true), acceptsRanges: false),
            Row(line: #line, body: .whole(ignoredRange: false), acceptsRanges: false),
            Row(line: #line, body: .giveWay, acceptsRanges: false),
        ]
        for row in rows {
            let before = info(acceptsRanges: true)
            var expected = before
            expected.acceptsRanges = row.acceptsRanges
            XCTAssertEqual(Machine.info(before, after: row.body), expected, line: row.line)
        }
    }
}
