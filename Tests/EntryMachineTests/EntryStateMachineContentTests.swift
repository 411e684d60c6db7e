import CoreTypes
@testable import EntryMachine
import XCTest

/// The entry's version and bytes as its machine keeps them (`EntryStateMachine+Content`): what
/// each event records, one row per transition.
final class EntryStateMachineContentTests: XCTestCase {
    typealias Machine = EntryStateMachine<Int>
    private static let mb: Int64 = 1 << 20
    private static let at = Date(timeIntervalSince1970: 1_000_000)

    private static func info(generation: Int64 = 1, length: Int64? = 4 << 20) -> EntryInfo {
        EntryInfo(key: CacheKey(rawValue: "k"), url: "http://o/f", finalURL: "http://o/f", length: length,
                  contentType: "video/mp4", etag: "\"a\"", lastModified: nil, acceptsRanges: true,
                  generation: generation, validatedAt: .distantPast)
    }

    private static func head(status: Int = 206, length: Int64? = 8 << 20, etag: String? = "\"b\"",
                             ranges: Bool = true) -> ResponseHead {
        ResponseHead(status: status, finalURL: "http://cdn/f", bodyStart: 0, totalLength: length, contentType: "video/webm",
                     etag: etag, lastModified: "Tue, 01 Dec 2026 00:00:00 GMT", acceptsRanges: ranges)
    }

    /// A live entry at generation 1 with slices 0 and 1 on disk, a pin on slice 1, read-ahead not
    /// read, slice 2 unchecked, and transfer 7 running for reader 1.
    private static func filled() -> Machine {
        var m = Machine(id: 3, info: info(), lastAccess: 50)
        _ = m.recordWritten([0..<mb, mb..<(2 * mb)], sliceSize: mb, now: 60)
        m.slicesPinned(1...1, generation: 1)
        m.loadedUnchecked([2])
        m.transferStarted(7, start: 0, end: nil, reader: 1, now: 0)
        _ = m.readAheadArrived(0..<mb, waiting: WaitingRanges([], generation: 1))
        return m
    }

    func testGenerationStartedDropsEverythingOfTheOldVersion() {
        struct Row { var line: UInt; var keeping: Int?; var cancel: [Int]; var kept: Set<Int> }
        let rows = [
            // The transfer whose head told follows the entry to the new version; the others go.
            Row(line: #line, keeping: 7, cancel: [], kept: [7]),
            Row(line: #line, keeping: nil, cancel: [7], kept: []),
        ]
        for row in rows {
            var m = Self.filled()
            let action = m.generationStarted(9, keeping: row.keeping)
            XCTAssertEqual(action, .init(droppedBytes: 2 * Self.mb, cancel: row.cancel), line: row.line)
            XCTAssertEqual(Set(m.content.inflight.fetches.keys), row.kept, line: row.line)
            XCTAssertEqual(m.content.info.generation, 9, line: row.line)
            XCTAssertNil(m.content.info.length, "the new version's length is its head's", line: row.line)
            XCTAssertTrue(m.content.coverage.isEmpty && m.content.sliceBytes.isEmpty && m.content.sliceAccess.isEmpty,
                          line: row.line)
            XCTAssertTrue(m.content.pins.isEmpty && m.reads.unreadAhead.isEmpty && m.unverified.isEmpty, line: row.line)
            // A pin of the old version is released as a no-op; one of the new one counts.
            m.slicesUnpinned(1...1, generation: 1)
            m.slicesPinned(1...1, generation: 9)
            XCTAssertEqual(m.content.pins, [1: 1], line: row.line)
        }
    }

    func testHeadsAndBodiesChangeTheInfo() {
        struct Row {
            var line: UInt; var info: EntryInfo; var event: (inout Machine) -> Void
            var length: Int64?; var etag: String?; var acceptsRanges: Bool; var validatedAt: Date
        }
        let rows = [
            // A head adopted takes everything the origin said, its length if it said one.
            Row(line: #line, info: Self.info(), event: { $0.headAdopted(Self.head(), at: Self.at) },
                length: 8 << 20, etag: "\"b\"", acceptsRanges: true, validatedAt: Self.at),
            Row(line: #line, info: Self.info(), event: { $0.headAdopted(Self.head(length: nil), at: Self.at) },
                length: 4 << 20, etag: "\"b\"", acceptsRanges: true, validatedAt: Self.at),
            Row(line: #line, info: Self.info(), event: { $0.headAdopted(Self.head(status: 200, ranges: false), at: Self.at) },
                length: 8 << 20, etag: "\"b\"", acceptsRanges: false, validatedAt: Self.at),
            // A confirmed version keeps its validators and the length it knew.
            Row(line: #line, info: Self.info(), event: { $0.versionConfirmed(by: Self.head(), at: Self.at) },
                length: 4 << 20, etag: "\"a\"", acceptsRanges: true, validatedAt: Self.at),
            // A whole body to a ranged request: the origin serves no ranges.
            Row(line: #line, info: Self.info(), event: { $0.bodyDecided(.whole(ignoredRange: true)) },
                length: 4 << 20, etag: "\"a\"", acceptsRanges: false, validatedAt: .distantPast),
            Row(line: #line, info: Self.info(), event: { $0.bodyDecided(.partial) },
                length: 4 << 20, etag: "\"a\"", acceptsRanges: true, validatedAt: .distantPast),
            // A body without a length ended: its end is the length.
            Row(line: #line, info: Self.info(length: nil), event: { $0.lengthLearned(123) },
                length: 123, etag: "\"a\"", acceptsRanges: true, validatedAt: .distantPast),
            // Bytes differed under the same validators: asked again at the next open.
            Row(line: #line, info: Self.info(), event: { $0.versionConfirmed(by: Self.head(), at: Self.at); $0.validationForgotten() },
                length: 4 << 20, etag: "\"a\"", acceptsRanges: true, validatedAt: .distantPast),
        ]
        for row in rows {
            var m = Machine(id: 3, info: row.info, lastAccess: 0)
            row.event(&m)
            XCTAssertEqual(m.content.info.length, row.length, line: row.line)
            XCTAssertEqual(m.content.info.etag, row.etag, line: row.line)
            XCTAssertEqual(m.content.info.acceptsRanges, row.acceptsRanges, line: row.line)
            XCTAssertEqual(m.content.info.validatedAt, row.validatedAt, line: row.line)
        }
    }

    func testSlicesLoadedWrittenTouchedAndDropped() {
        let mb = Self.mb
        var m = Machine(id: 3, info: Self.info(), lastAccess: 50)
        // At start: extents of a slice, counted once, last read when the entry was.
        XCTAssertEqual(m.sliceLoaded(0, extents: [0..<100, 50..<200]), 200)
        XCTAssertEqual(m.content.sliceBytes, [0: 200])
        XCTAssertEqual(m.content.sliceAccess, [0: 50])
        // Written: the coverage gains what it did not have; the slice was accessed now.
        XCTAssertEqual(m.recordWritten([100..<300, mb..<(mb + 10)], sliceSize: mb, now: 70), 110)
        XCTAssertEqual(m.content.sliceAccess, [0: 70, 1: 70])
        m.slicesTouched(0...1, now: 80)
        XCTAssertEqual(m.content.sliceAccess, [0: 80, 1: 80])
        // Evicted (or unreadable): the coverage loses the slice's bytes, the slice is forgotten.
        XCTAssertEqual(m.sliceDropped(0, range: 0..<mb), 300)
        XCTAssertEqual(m.content.coverage, RangeSet([mb..<(mb + 10)]))
        XCTAssertEqual(m.content.sliceBytes.keys.sorted(), [1])
        XCTAssertEqual(m.content.sliceAccess.keys.sorted(), [1])
        XCTAssertEqual(m.sliceDropped(0, range: 0..<mb), 0, "dropped twice counts once")
    }

    func testPins() {
        struct Row { var line: UInt; var removed: Bool; var pin: Int64; var unpin: Int64?; var pins: [Int64: Int] }
        let rows = [
            Row(line: #line, removed: false, pin: 1, unpin: nil, pins: [0: 1, 1: 2]),
            Row(line: #line, removed: false, pin: 1, unpin: 1, pins: [0: 1, 1: 1]),
            // Another version's pins and releases are no-ops.
            Row(line: #line, removed: false, pin: 2, unpin: 2, pins: [0: 1, 1: 1]),
            Row(line: #line, removed: false, pin: 2, unpin: 1, pins: [0: 1]),
            // A removed entry takes no pins and holds none.
            Row(line: #line, removed: true, pin: 1, unpin: nil, pins: [:]),
        ]
        for row in rows {
            var m = Machine(id: 3, info: Self.info(generation: 1), lastAccess: 0)
            m.slicesPinned(0...1, generation: 1)
            if row.removed { _ = m.removed() }
            m.slicesPinned(1...1, generation: row.pin)
            if let g = row.unpin { m.slicesUnpinned(1...1, generation: g) }
            XCTAssertEqual(m.content.pins, row.pins, line: row.line)
        }
    }

    func testRowsAreHandedToTheIndexOnlyWhenTheyChanged() {
        var m = Machine(id: 3, info: Self.info(), lastAccess: 50)
        var stored = m.row()
        stored.hits = 4; stored.misses = 2; stored.bytesFromCache = 10; stored.bytesFromOrigin = 20; stored.lastError = "x"
        m.loaded(stored)
        XCTAssertEqual(m.row(), stored, "a loaded entry is its row")
        XCTAssertNil(m.rowToSave(), "the index has that row")
        m.wholeFileRead(100, door: .fuse, now: 60)
        XCTAssertEqual(m.reads.hits, 5)
        XCTAssertEqual(m.reads.bytesFromCache, 110)
        XCTAssertTrue(m.readStatsTaken(), "whole-file reads are read statistics for the sweeper")
        XCTAssertFalse(m.readStatsTaken())
        XCTAssertEqual(m.rowToSave()?.lastAccess, 60)
        XCTAssertNil(m.rowToSave())
        m.indexed(id: 9)
        XCTAssertEqual(m.rowToSave()?.id, 9)
    }

    func testErrorsKeepTheTenLatest() {
        var m = Machine(id: 3, info: Self.info(), lastAccess: 0)
        for i in 0..<12 { m.errorNoted("e\(i)", at: Self.at) }
        XCTAssertEqual(m.content.recentErrors.count, 10)
        XCTAssertTrue(m.content.recentErrors.first!.hasSuffix(" e2"))
        XCTAssertEqual(m.row().lastError, m.content.recentErrors.last)
    }

    func testOpensProbesAndLimits() {
        var m = Machine(id: -1, info: Self.info(), lastAccess: 0)
        XCTAssertTrue(m.isProbing)
        m.lengthLimitAsked(64 << 20)
        m.lengthLimitAsked(128 << 20)
        XCTAssertEqual(m.content.unknownLengthLimit, 64 << 20, "the smallest limit asked holds")
        m.probeStarted(5, url: "http://o/f?token=2", end: 256 << 10, now: 1)
        XCTAssertEqual(m.content.info.url, "http://o/f?token=2", "the entry's requests use the URL last opened")
        let probe = m.content.inflight.fetches[5]
        XCTAssertEqual(probe?.pinned, true)
        XCTAssertEqual(probe?.priority, .waiting)
        XCTAssertEqual(probe?.end, 256 << 10)
    }

    func testTransfersAdvanceRebaseAndEnd() {
        var m = Machine(id: 3, info: Self.info(), lastAccess: 0)
        m.transferStarted(7, start: 0, end: 100, reader: 1, now: 0)
        XCTAssertEqual(m.transferAdvanced(7, past: 0..<60, now: 1), .proceed)
        XCTAssertEqual(m.content.bytesFromOrigin, 60, "every byte a transfer brings is from the origin")
        XCTAssertEqual(m.content.inflight.fetches[7]?.cursor, 60)
        m.transferRebased(7, cursor: 0, end: nil, generation: 1, pinned: true)
        XCTAssertEqual(m.content.inflight.fetches[7]?.cursor, 0)
        XCTAssertEqual(m.content.inflight.fetches[7]?.pinned, true)
        XCTAssertEqual(m.transferEnded(7)?.id, 7)
        XCTAssertTrue(m.content.inflight.isEmpty)
        XCTAssertNil(m.transferEnded(7))
    }

    func testTheEventsThatLendTheTableChangeTheEntrysOwn() {
        var m = Machine(id: 3, info: Self.info(), lastAccess: 0)
        m.transferStarted(7, start: 0, end: nil, reader: 1, now: 0)
        m.transferStarted(8, start: 0, end: nil, reader: 2, now: 0)
        let closed = m.readerClosed(1, uptime: 0)
        XCTAssertEqual(closed.orphaned, [7], "nobody else wanted reader 1's transfer")
        XCTAssertEqual(m.content.inflight.fetches[8]?.interest, [2], "the table is back, changed in place")
        XCTAssertTrue(m.prioritized(uptime: 0).isEmpty, "no read waits: no class changes")
    }

    func testStoppingHandsBackTheReadsAndTransfers() {
        struct Row { var line: UInt; var dropBytes: Bool; var coverage: Int64 }
        let rows = [
            Row(line: #line, dropBytes: false, coverage: 2 * Self.mb),   // the engine stops: bytes stay on disk
            Row(line: #line, dropBytes: true, coverage: 0),              // `cache rm`: its bytes go
        ]
        for row in rows {
            var m = Self.filled()
            let (waiters, fetches) = m.stopped(dropBytes: row.dropBytes)
            XCTAssertTrue(waiters.isEmpty, line: row.line)
            XCTAssertEqual(fetches, [7], line: row.line)
            XCTAssertTrue(m.content.inflight.isEmpty, line: row.line)
            XCTAssertEqual(m.content.coverage.count, row.coverage, line: row.line)
            XCTAssertEqual(m.content.sliceBytes.isEmpty, row.dropBytes, line: row.line)
        }
    }

    /// A transfer's end, as the engine reports it: off the table, a body without a length gives
    /// the file its length, and what it left undelivered comes back for the reads waiting.
    func testATransferThatEndsIsTakenOffItsTableAndTeachesTheLengthItFound() {
        struct Row {
            var line: UInt
            var length: Int64?
            var end: Int64?
            var generation: Int64 = 1
            var position: Int64
            var clean = true
            var learned: Int64?
            var undelivered: Range<Int64>
            var endedShort = false
        }
        let mb = Self.mb
        let rows = [
            // No length: a clean end of a body to the end of the file is its length.
            Row(line: #line, length: nil, end: nil, position: 3 * mb, learned: 3 * mb, undelivered: 3 * mb..<Int64.max),
            // A failed one teaches nothing.
            Row(line: #line, length: nil, end: nil, position: 3 * mb, clean: false, undelivered: 3 * mb..<Int64.max),
            // A length known stays; a transfer that stopped before its end ended short.
            Row(line: #line, length: 4 * mb, end: 2 * mb, position: mb, learned: 4 * mb, undelivered: mb..<2 * mb,
                endedShort: true),
            // Of an older version: nothing learned.
            Row(line: #line, length: nil, end: nil, generation: 0, position: 3 * mb, undelivered: 3 * mb..<Int64.max),
        ]
        for row in rows {
            var m = Machine(id: 3, info: Self.info(length: row.length), lastAccess: 50)
            m.transferStarted(9, start: 0, end: row.end, reader: 1, now: 0)
            let finished = m.transferFinished(9, generation: row.generation, position: row.position, clean: row.clean,
                                              cause: row.clean ? nil : .timeout(url: "u"))
            XCTAssertNil(m.content.inflight.fetches[9], line: row.line)
            XCTAssertEqual(m.content.info.length, row.learned, line: row.line)
            XCTAssertEqual(finished.undelivered, row.undelivered, line: row.line)
            XCTAssertEqual(finished.endedShort, row.endedShort, line: row.line)
        }
    }

    /// A write done, as the engine reports it: its chunks leave the pending bytes; for the
    /// entry's version what was written is recorded, and the chunks the disk refused go to the
    /// reads waiting for them; for another version nothing is.
    func testAWriteRecordsWhatWasWrittenAndHandsWhatTheDiskRefusedToTheReadsWaiting() {
        let mb = Self.mb
        for generation: Int64 in [1, 0] {
            var m = Machine(id: 3, info: Self.info(), lastAccess: 50)
            let kept = PendingBytes.Chunk(range: 2 * mb..<(2 * mb + 100), storage: NoMemory(), offset: 0)
            let refused = PendingBytes.Chunk(range: 3 * mb..<(3 * mb + 100), storage: NoMemory(), offset: 0)
            m.pendingAdded(kept)
            m.pendingAdded(refused)
            var ids = 0
            var progress = ReaderProgress(readAhead: 0)
            _ = m.readRequested(.init(reader: 1, readerClass: .player, door: .fuse, generation: 1, offset: 3 * mb + 50, length: 100),
                                facts: .init(generation: 1, length: 4 * mb, acceptsRanges: true, coverage: RangeSet(),
                                             pending: m.content.pending, unverified: [], sliceSize: mb, readTimeout: .seconds(10)),
                                progress: &progress, now: 60, monotonic: MonotonicInstant(nanoseconds: 1_000_000_000),
                                readAheadRule: { _, _, _, _ in .first }, streamSize: { _, _ in nil },
                                makeFetchID: { ids += 1; return ids }, makeReply: { _ in NoReply() })
            let written = m.writeCompleted([kept, refused], written: [kept.range], generation: generation,
                                           sliceSize: mb, now: 70)
            XCTAssertTrue(m.content.pending.isEmpty, "generation \(generation)")
            if generation == 1 {
                XCTAssertEqual(written?.added, 100)
                XCTAssertEqual(m.content.coverage, RangeSet([kept.range]))
                XCTAssertEqual(written?.hold.map(\.chunk.range), [refused.range])
                XCTAssertTrue(written?.hold.first?.waiter === m.reads.waiters.first)
            } else {
                XCTAssertNil(written, "another version: nothing recorded")
                XCTAssertTrue(m.content.coverage.isEmpty)
            }
        }
    }

    func testRemovalLeavesNoPinsAndNoPendingBytes() {
        var m = Self.filled()
        let chunk = PendingBytes.Chunk(range: 2 * Self.mb..<(2 * Self.mb + 100), storage: NoMemory(), offset: 0)
        m.pendingAdded(chunk)
        XCTAssertEqual(m.content.pending.ranges, RangeSet([chunk.range]))
        m.pendingWritten([chunk])
        XCTAssertTrue(m.content.pending.isEmpty, "written bytes leave the pending ones")
        m.pendingAdded(chunk)
        _ = m.removed()
        XCTAssertTrue(m.content.pending.isEmpty && m.content.pins.isEmpty)
    }
}

/// Chunk memory with no bytes and no budget: a pending chunk as the machine sees it.
final class NoMemory: ChunkMemory {
    func bytes(at offset: Int, count: Int) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }
    func writerDone() {}
}
