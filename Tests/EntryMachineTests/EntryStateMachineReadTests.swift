import CoreTypes
@testable import EntryMachine
import XCTest

/// The read side of an entry's state machine with no engine: a read asked (`readRequested`) as a
/// table of what the entry holds and what the machine says, then time passing (`tick`), bytes
/// landing (`waitersWoken`), another version (`staleWaitersRemoved`), a transfer ending
/// (`waitersReplanned`) and a reader closing (`readerClosed`). Reader 1 reads a file of 10 MB at
/// version 7, in slices of 1 MB; fetch ids handed out start at 100; `now` is 1000 on the wall
/// clock, 50 s (`at(0)`) on the monotonic one that deadlines are on.
final class EntryStateMachineReadTests: XCTestCase {
    typealias Machine = EntryStateMachine<Int>
    static let mb: Int64 = 1 << 20
    static let now = 1000.0
    /// `seconds` from the monotonic clock's now (50 s).
    static func at(_ seconds: Double) -> MonotonicInstant { MonotonicInstant(nanoseconds: UInt64((50 + seconds) * 1e9)) }
    static let newID = 100

    /// What an action says, in a form a table can compare.
    enum Said: Equatable {
        case fail(Machine.ReadFailure)
        case empty
        case verifyFirst([Int64])
        /// Answered now; each run `d` (the data file) or `m` (memory).
        case hit(Range<Int64>, runs: String)
        case wait(Range<Int64>)
    }

    static func said(_ a: Machine.ReadAction) -> Said {
        switch a.answer {
        case let .fail(f): .fail(f)
        case .empty: .empty
        case let .verifyFirst(s): .verifyFirst(s)
        case let .hit(r, runs): .hit(r, runs: runs.map { $0.pending == nil ? "d" : "m" }.joined())
        case let .wait(r): .wait(r)
        }
    }

    /// The entry as the read finds it.
    struct Entry {
        var state: Machine.State = .live(Machine.Facts())
        var generation: Int64 = 7
        var length: Int64? = 10 * mb
        var acceptsRanges = true
        var coverage = RangeSet()
        var unverified: Set<Int64> = []
        var running: [InFlightTable.Fetch] = []
        var timedOut: [EntryReads.TimedOut] = []
        var unreadAhead = RangeSet()
        /// Reads of reader 1 already waiting.
        var waiting: [Range<Int64>] = []
    }

    static func fetch(_ id: Int, _ range: Range<Int64>, interest: Set<Int> = [1], generation: Int64 = 7) -> InFlightTable.Fetch {
        InFlightTable.Fetch(id: id, generation: generation, start: range.lowerBound, cursor: range.lowerBound,
                            end: range.upperBound, interest: interest, pinned: false, startedAt: now)
    }

    static func waiter(_ range: Range<Int64>, reader: Int = 1, generation: Int64 = 7, deadline: MonotonicInstant = at(10)) -> Waiter {
        Waiter(reader: reader, range: range, generation: generation, deadline: deadline, since: at(0), reply: NoReply())
    }

    struct Outcome {
        var machine: Machine
        var inflight: InFlightTable
        var action: Machine.ReadAction
        var progress: ReaderProgress
        var ids: Int
    }

    /// Asks for `range` as reader 1, version 7 unless told, with the read-ahead rule saying
    /// `pattern` and leaving a window of `readAhead`.
    func ask(_ e: Entry, _ range: Range<Int64>, generation: Int64 = 7, closed: Bool = false,
             pattern: AccessPattern = .sequential, readAhead: Int64 = 0,
             readerClass: ReaderClass = .player) -> Outcome {
        var machine = Machine(state: e.state)
        machine.reads.timedOut = e.timedOut
        machine.reads.unreadAhead = e.unreadAhead
        machine.reads.waiters = e.waiting.map { Self.waiter($0) }
        var inflight = InFlightTable()
        for f in e.running {
            inflight.start(id: f.id, generation: f.generation, start: f.start, end: f.end, reader: nil, now: Self.now)
            for r in f.interest { inflight.addInterest(r, in: f.id) }
        }
        var progress = ReaderProgress(readAhead: readAhead)
        progress.closed = closed
        let facts = Machine.ReadFacts(generation: e.generation, length: e.length, acceptsRanges: e.acceptsRanges,
                                      coverage: e.coverage, pending: PendingBytes(), unverified: e.unverified,
                                      sliceSize: Self.mb, readTimeout: .seconds(10))
        let read = Machine.ReadRequest(reader: 1, readerClass: readerClass, readerEnd: nil, door: .fuse, waitClass: readerClass.waitedFetchClass,
                                       generation: generation, offset: range.lowerBound, length: Int(range.count))
        var ids = Self.newID - 1
        let action = machine.readRequested(read, facts: facts, inflight: &inflight, progress: &progress,
                                           now: Self.now, monotonic: Self.at(0),
                                           readAheadRule: { p, _, _, _ in p.readAhead = readAhead; return pattern },
                                           streamSize: { _, _ in nil }, makeFetchID: { ids += 1; return ids },
                                           makeReply: { _ in NoReply() })
        return Outcome(machine: machine, inflight: inflight, action: action, progress: progress, ids: ids)
    }

    // MARK: Read requested

    /// What a read is answered with, for each kind of entry it finds.
    func testReadRequested() {
        let mb = Self.mb
        struct Row {
            var line: UInt
            var entry = Entry()
            var range: Range<Int64>
            var generation: Int64 = 7
            var closed = false
            var said: Said
            /// The range after which unchecked slices are to be checked ahead of the reader.
            var verifyAhead: Range<Int64>?
            /// Fetches started, as start..<end (nil end: to the end of the file).
            var launches: [ReadPlanner.Fetch] = []
        }
        let whole = RangeSet([0..<10 * mb])
        let rows: [Row] = [
            // Reads that cannot be answered.
            Row(line: #line, range: 0..<mb, closed: true, said: .fail(.cancelled)),
            Row(line: #line, entry: Entry(state: .removed), range: 0..<mb, said: .fail(.removed)),
            Row(line: #line, entry: Entry(state: .probing(Machine.Facts())), range: 0..<mb, said: .fail(.removed)),
            Row(line: #line, entry: Entry(coverage: whole), range: 0..<mb, generation: 6, said: .fail(.remoteChanged)),
            // Nothing to read.
            Row(line: #line, range: 10 * mb..<11 * mb, said: .empty),
            Row(line: #line, range: 5..<5, said: .empty),
            // On disk: answered now, from the data file.
            Row(line: #line, entry: Entry(coverage: whole), range: 0..<mb, said: .hit(0..<mb, runs: "d")),
            Row(line: #line, entry: Entry(coverage: whole), range: 9 * mb..<12 * mb, said: .hit(9 * mb..<10 * mb, runs: "d")),
            // Bytes from before this start: checked first; the next slices are checked ahead.
            Row(line: #line, entry: Entry(coverage: whole, unverified: [0, 1, 2, 3]), range: 0..<mb,
                said: .verifyFirst([0]), verifyAhead: 0..<mb),
            Row(line: #line, entry: Entry(coverage: whole, unverified: [1, 2, 3]), range: 0..<mb,
                said: .hit(0..<mb, runs: "d"), verifyAhead: 0..<mb),
            Row(line: #line, entry: Entry(coverage: whole, unverified: [0]), range: 9 * mb..<12 * mb,
                said: .hit(9 * mb..<10 * mb, runs: "d"), verifyAhead: 9 * mb..<10 * mb),
            // Missing: a fetch starts and the read waits.
            Row(line: #line, range: 0..<mb, said: .wait(0..<mb), launches: [.init(start: 0, end: mb)]),
            Row(line: #line, entry: Entry(coverage: RangeSet([0..<mb / 2])), range: 0..<mb, said: .wait(0..<mb),
                launches: [.init(start: mb / 2, end: mb)]),
            // A fetch running there already: joined.
            Row(line: #line, entry: Entry(running: [Self.fetch(5, 0..<2 * mb, interest: [2])]), range: 0..<mb,
                said: .wait(0..<mb)),
            // An origin that ignores ranges: one whole-body transfer from byte 0.
            Row(line: #line, entry: Entry(acceptsRanges: false), range: 4 * mb..<5 * mb, said: .wait(4 * mb..<5 * mb),
                launches: [.init(start: 0, end: nil)]),
            // The kernel's retry of a read that timed out a moment ago fails at once…
            Row(line: #line, entry: Entry(timedOut: [.init(reader: 1, range: 0..<mb, at: Self.at(-1))]), range: 0..<mb,
                said: .fail(.timedOut)),
            // …but not once the bytes are here, nor after the retry window, nor another reader's.
            Row(line: #line, entry: Entry(coverage: whole, timedOut: [.init(reader: 1, range: 0..<mb, at: Self.at(-1))]),
                range: 0..<mb, said: .hit(0..<mb, runs: "d")),
            Row(line: #line, entry: Entry(timedOut: [.init(reader: 1, range: 0..<mb, at: Self.at(-3))]), range: 0..<mb,
                said: .wait(0..<mb), launches: [.init(start: 0, end: mb)]),
            Row(line: #line, entry: Entry(timedOut: [.init(reader: 2, range: 0..<mb, at: Self.at(-1))]), range: 0..<mb,
                said: .wait(0..<mb), launches: [.init(start: 0, end: mb)]),
        ]
        for row in rows {
            let out = ask(row.entry, row.range, generation: row.generation, closed: row.closed)
            XCTAssertEqual(Self.said(out.action), row.said, line: row.line)
            XCTAssertEqual(out.action.verifyAhead, row.verifyAhead, line: row.line)
            XCTAssertEqual(out.action.launches.map(\.fetch), row.launches, line: row.line)
            // What it started is on the in-flight table, for this reader.
            for f in out.action.launches {
                XCTAssertEqual(out.inflight.fetches[f.id]?.interest, [1], line: row.line)
                XCTAssertEqual(out.inflight.fetches[f.id]?.pinned, !row.entry.acceptsRanges, line: row.line)
            }
            if out.action.launches.isEmpty { XCTAssertEqual(out.ids, Self.newID - 1, "no id taken", line: row.line) }
        }
    }

    /// What a read records: counts, last access, the door, a waiter with its deadline.
    func testReadRecordsCountsAndWaiter() {
        let mb = Self.mb
        let hit = ask(Entry(coverage: RangeSet([0..<mb])), 0..<mb)
        XCTAssertEqual(hit.machine.reads.hits, 1)
        XCTAssertEqual(hit.machine.reads.bytesFromCache, mb)
        XCTAssertEqual(hit.machine.reads.misses, 0)
        XCTAssertEqual(hit.machine.reads.lastAccess, Self.now)
        XCTAssertTrue(hit.machine.reads.readStatsDirty)
        XCTAssertEqual(hit.machine.reads.readsByDoor.fuse, 1)
        XCTAssertTrue(hit.machine.reads.waiters.isEmpty)
        XCTAssertEqual(hit.action.pinned, 0..<mb)

        let miss = ask(Entry(), 0..<mb)
        XCTAssertEqual(miss.machine.reads.misses, 1)
        XCTAssertEqual(miss.machine.reads.hits, 0)
        XCTAssertEqual(miss.machine.reads.waiters.map(\.range), [0..<mb])
        XCTAssertEqual(miss.machine.reads.waiters.first?.deadline, Self.at(10), "the read timeout from now, on the monotonic clock")
        XCTAssertEqual(miss.machine.reads.waiters.first?.since, Self.at(0))
        XCTAssertEqual(miss.action.pinned, 0..<mb)

        // Nothing is recorded for a read that is not served.
        for refused in [ask(Entry(), 0..<mb, generation: 6), ask(Entry(unverified: [0]), 0..<mb), ask(Entry(), 0..<mb, closed: true)] {
            XCTAssertEqual(refused.machine.reads.hits + refused.machine.reads.misses, 0)
            XCTAssertFalse(refused.machine.reads.readStatsDirty)
            XCTAssertNil(refused.action.pinned)
        }
    }

    /// A read's fetch becomes `.waiting` (the fetcher is told); read-ahead it consumed is counted.
    func testReadPrioritizesAndCountsReadAhead() {
        let mb = Self.mb
        let miss = ask(Entry(), 0..<mb)
        XCTAssertEqual(miss.action.priorities.map(\.priority), [.waiting])
        XCTAssertEqual(miss.inflight.fetches[Self.newID]?.priority, .waiting)

        let ahead = ask(Entry(coverage: RangeSet([0..<4 * mb]), unreadAhead: RangeSet([mb..<4 * mb])), 0..<2 * mb)
        XCTAssertEqual(ahead.action.readAheadRead, mb)
        XCTAssertEqual(ahead.machine.reads.unreadAhead, RangeSet([2 * mb..<4 * mb]))
    }

    /// A seek leaves this reader's read-ahead behind: fetches only it wanted are cancelled, those
    /// another reader or one of its own waiting reads needs go on.
    func testSeekCancelsWhatOnlyThisReaderWanted() {
        let mb = Self.mb
        let entry = Entry(coverage: RangeSet([8 * mb..<9 * mb]),
                          running: [Self.fetch(5, 1 * mb..<3 * mb), Self.fetch(6, 3 * mb..<5 * mb, interest: [1, 2]),
                                    Self.fetch(7, 5 * mb..<6 * mb)],
                          waiting: [5 * mb..<5 * mb + 10])
        let out = ask(entry, 8 * mb..<9 * mb, pattern: .seek)
        XCTAssertEqual(Self.said(out.action), .hit(8 * mb..<9 * mb, runs: "d"))
        XCTAssertEqual(out.action.cancel, [5])
        XCTAssertEqual(out.inflight.fetches[6]?.interest, [2])
        XCTAssertEqual(out.inflight.fetches[7]?.interest, [1], "its own read still waits on it")
        // Read on in order: nothing is let go.
        XCTAssertEqual(ask(entry, 8 * mb..<9 * mb, pattern: .sequential).action.cancel, [])
    }

    /// The reader's window (from its read-ahead rule) reaches past the read; the pace notes the read.
    func testReadAheadWindowIsPlanned() {
        let mb = Self.mb
        let out = ask(Entry(), 0..<mb, readAhead: 4 * mb)
        XCTAssertEqual(out.action.launches.map(\.fetch), [.init(start: 0, end: 5 * mb)])
        XCTAssertEqual(out.action.launches.map(\.bytes), [5 * mb])
        XCTAssertEqual(out.progress.readAhead, 4 * mb)
        // A scanner's fetches keep their class: they start as `.scan`.
        let scan = ask(Entry(), 0..<mb, readerClass: .scanner)
        XCTAssertEqual(scan.inflight.fetches[Self.newID]?.base, .scan)
        XCTAssertEqual(scan.action.priorities.map(\.priority), [.waitedScan], "and rank `.waitedScan` while it waits on them")
    }

    // MARK: Read for the page cache

    /// A read put into the page cache ahead of a reader: only a whole file on disk, checked, of
    /// the reader's version; it fetches nothing and leaves the reader's progress alone.
    func testCachedReadRequested() {
        let mb = Self.mb
        struct Row {
            var line: UInt
            var entry = Entry(coverage: RangeSet([0..<10 * EntryStateMachineReadTests.mb]))
            var range: Range<Int64>
            var generation: Int64 = 7
            var closed = false
            var answered: Range<Int64>?
        }
        let rows: [Row] = [
            Row(line: #line, range: 0..<mb, answered: 0..<mb),
            Row(line: #line, range: 9 * mb..<11 * mb, answered: 9 * mb..<10 * mb),
            Row(line: #line, range: 10 * mb..<11 * mb),
            Row(line: #line, range: 0..<mb, closed: true),
            Row(line: #line, range: 0..<mb, generation: 6),
            Row(line: #line, entry: Entry(state: .removed, coverage: RangeSet([0..<10 * mb])), range: 0..<mb),
            Row(line: #line, entry: Entry(coverage: RangeSet([0..<9 * mb])), range: 0..<mb),
            Row(line: #line, entry: Entry(length: nil, coverage: RangeSet([0..<10 * mb])), range: 0..<mb),
            Row(line: #line, entry: Entry(coverage: RangeSet([0..<10 * mb]), unverified: [0]), range: 0..<mb),
            Row(line: #line, entry: Entry(coverage: RangeSet([0..<10 * mb]), unverified: [1]), range: 0..<mb, answered: 0..<mb),
        ]
        for row in rows {
            var machine = Machine(state: row.entry.state)
            let e = row.entry
            let facts = Machine.ReadFacts(generation: e.generation, length: e.length, acceptsRanges: true, coverage: e.coverage,
                                          pending: PendingBytes(), unverified: e.unverified,
                                          sliceSize: mb, readTimeout: .seconds(10))
            let got = machine.cachedReadRequested(offset: row.range.lowerBound, length: Int(row.range.count),
                                                  generation: row.generation, closed: row.closed, facts: facts, now: Self.now)
            XCTAssertEqual(got, row.answered, line: row.line)
            XCTAssertEqual(machine.reads.bytesFromCache, row.answered?.length ?? 0, line: row.line)
            XCTAssertEqual(machine.reads.readStatsDirty, row.answered != nil, line: row.line)
            XCTAssertEqual(machine.reads.hits, 0, "not a read the reader sent", line: row.line)
        }
    }

    // MARK: Tick

    /// Reads past their deadline fail (once), and are remembered for the retry window.
    func testTick() {
        struct Row {
            var line: UInt
            var deadlines: [MonotonicInstant]
            var timedOutBefore: [MonotonicInstant] = []
            var now: MonotonicInstant
            var late: [MonotonicInstant]
            var timedOutAfter: [MonotonicInstant]
        }
        let t = Self.at(0)
        let rows: [Row] = [
            Row(line: #line, deadlines: [], now: t, late: [], timedOutAfter: []),
            Row(line: #line, deadlines: [Self.at(1)], now: t, late: [], timedOutAfter: []),
            Row(line: #line, deadlines: [t], now: t, late: [t], timedOutAfter: [t]),
            Row(line: #line, deadlines: [Self.at(-1), Self.at(1), Self.at(-2)], now: t, late: [Self.at(-1), Self.at(-2)], timedOutAfter: [t, t]),
            // Older timeouts are forgotten past the window, kept within it.
            Row(line: #line, deadlines: [t], timedOutBefore: [Self.at(-3), Self.at(-1)], now: t, late: [t], timedOutAfter: [Self.at(-1), t]),
            // Nothing late: nothing forgotten either (the next late read does that).
            Row(line: #line, deadlines: [Self.at(1)], timedOutBefore: [Self.at(-3)], now: t, late: [], timedOutAfter: [Self.at(-3)]),
        ]
        for row in rows {
            var machine = Machine(persisted: true)
            machine.reads.waiters = row.deadlines.enumerated().map { i, d in Self.waiter(Int64(i)..<Int64(i + 1), deadline: d) }
            machine.reads.timedOut = row.timedOutBefore.map { .init(reader: 1, range: 0..<1, at: $0) }
            let late = machine.tick(now: row.now)
            XCTAssertEqual(late.map(\.deadline), row.late, line: row.line)
            XCTAssertEqual(machine.reads.waiters.map(\.deadline), row.deadlines.filter { $0 > row.now }, line: row.line)
            XCTAssertEqual(machine.reads.timedOut.map(\.at), row.timedOutAfter, line: row.line)
        }
        // What a tick remembers makes the retry fail at once; a read of other bytes waits.
        var machine = Machine(persisted: true)
        machine.reads.waiters = [Self.waiter(0..<Self.mb, deadline: t)]
        _ = machine.tick(now: t)
        let retry = ask(Entry(timedOut: machine.reads.timedOut), 0..<Self.mb)
        XCTAssertEqual(Self.said(retry.action), .fail(.timedOut))
        XCTAssertEqual(Self.said(ask(Entry(timedOut: machine.reads.timedOut), Self.mb..<2 * Self.mb).action), .wait(Self.mb..<2 * Self.mb))
    }

    // MARK: Waiters

    static func facts(coverage: RangeSet = RangeSet(), length: Int64? = 10 * mb, acceptsRanges: Bool = true) -> Machine.WaiterFacts {
        Machine.WaiterFacts(generation: 7, length: length, acceptsRanges: acceptsRanges, coverage: coverage, pending: PendingBytes())
    }

    /// Waiters whose bytes are all on disk are taken out, clipped to the file's end; the others stay.
    func testWaitersWoken() {
        let mb = Self.mb
        var machine = Machine(persisted: true)
        machine.reads.waiters = [Self.waiter(0..<mb), Self.waiter(mb..<3 * mb), Self.waiter(9 * mb..<11 * mb),
                                 Self.waiter(10 * mb..<11 * mb)]
        let woken = machine.waitersWoken(Self.facts(coverage: RangeSet([0..<2 * mb, 9 * mb..<10 * mb])))
        XCTAssertEqual(woken.map(\.waiter.range), [0..<mb, 9 * mb..<11 * mb, 10 * mb..<11 * mb])
        XCTAssertEqual(woken.map(\.clip), [0..<mb, 9 * mb..<10 * mb, 10 * mb..<10 * mb])
        XCTAssertEqual(machine.reads.waiters.map(\.range), [mb..<3 * mb])
        XCTAssertTrue(machine.waitersWoken(Self.facts()).isEmpty, "nothing landed for it")
        XCTAssertEqual(machine.reads.waiters.map(\.range), [mb..<3 * mb])
    }

    /// A new version: the waiters of the old one are taken out (they fail), the others stay.
    func testStaleWaitersRemoved() {
        var machine = Machine(persisted: true)
        machine.reads.waiters = [Self.waiter(0..<1, generation: 6), Self.waiter(1..<2, generation: 7)]
        XCTAssertEqual(machine.staleWaitersRemoved(generation: 7).map(\.range), [0..<1])
        XCTAssertEqual(machine.reads.waiters.map(\.range), [1..<2])
        XCTAssertEqual(machine.staleWaitersRemoved(generation: 7).count, 0)
    }

    /// A transfer ended: each waiter fails, starts a fetch for what nobody fetches now, or waits
    /// on a transfer still running.
    func testWaitersReplanned() {
        let mb = Self.mb
        struct Row {
            var line: UInt
            var waiter: Range<Int64>
            var replans = 0
            var running: [InFlightTable.Fetch] = []
            var coverage = RangeSet()
            var failed: Range<Int64>?
            var endedShort = false
            var failedWith: Machine.ReplanFailure?
            var launches: [ReadPlanner.Fetch] = []
        }
        let rows: [Row] = [
            Row(line: #line, waiter: 0..<mb, launches: [.init(start: 0, end: mb)]),
            Row(line: #line, waiter: 0..<mb, coverage: RangeSet([0..<mb / 2]), launches: [.init(start: mb / 2, end: mb)]),
            Row(line: #line, waiter: 0..<mb, running: [Self.fetch(5, 0..<2 * mb, interest: [])]),
            // It needed the bytes the failed transfer did not bring.
            Row(line: #line, waiter: 0..<mb, failed: mb / 2..<2 * mb, failedWith: .transferFailed),
            Row(line: #line, waiter: 0..<mb, coverage: RangeSet([0..<mb]), failed: mb / 2..<2 * mb),
            // Transfers keep ending early: the ninth time it gives up.
            Row(line: #line, waiter: 0..<mb, replans: 7, endedShort: true, launches: [.init(start: 0, end: mb)]),
            Row(line: #line, waiter: 0..<mb, replans: 8, endedShort: true, failedWith: .endsEarly),
            Row(line: #line, waiter: 0..<mb, replans: 8, endedShort: false, launches: [.init(start: 0, end: mb)]),
        ]
        for row in rows {
            var machine = Machine(persisted: true)
            let w = Self.waiter(row.waiter)
            w.replans = row.replans
            machine.reads.waiters = [w]
            var inflight = InFlightTable()
            for f in row.running { inflight.start(id: f.id, generation: 7, start: f.start, end: f.end, reader: nil, now: Self.now) }
            var ids = Self.newID - 1
            let action = machine.waitersReplanned(Self.facts(coverage: row.coverage), failedRange: row.failed,
                                                  endedShort: row.endedShort, inflight: &inflight, now: Self.now, uptime: 50,
                                                  makeFetchID: { ids += 1; return ids })
            XCTAssertEqual(action.failed.map(\.why), row.failedWith.map { [$0] } ?? [], line: row.line)
            XCTAssertEqual(machine.reads.waiters.count, row.failedWith == nil ? 1 : 0, line: row.line)
            XCTAssertEqual(action.launches.map(\.fetch), row.launches, line: row.line)
            for f in row.running { XCTAssertEqual(inflight.fetches[f.id]?.interest, [1], "joined", line: row.line) }
        }
    }

    /// A reader closes: its waiters are taken out, and the fetches only it wanted are let go.
    func testReaderClosed() {
        var machine = Machine(persisted: true)
        machine.reads.waiters = [Self.waiter(0..<1, reader: 1), Self.waiter(1..<2, reader: 2)]
        var inflight = InFlightTable()
        inflight.start(id: 5, generation: 7, start: 0, end: 10, reader: 1, now: Self.now)
        inflight.start(id: 6, generation: 7, start: 0, end: 10, reader: 1, now: Self.now)
        inflight.addInterest(2, in: 6)
        let (waiters, orphaned, _) = machine.readerClosed(1, inflight: &inflight, uptime: 50)
        XCTAssertEqual(waiters.map(\.range), [0..<1])
        XCTAssertEqual(orphaned, [5])
        XCTAssertEqual(machine.reads.waiters.map(\.reader), [2])
        XCTAssertEqual(inflight.fetches[6]?.interest, [2])
    }
}

/// A waiting read's reply with no engine: it holds nothing.
final class NoReply: WaiterReply {
    var filled = RangeSet()
}
