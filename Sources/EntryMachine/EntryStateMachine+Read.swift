import CoreTypes

/// The read side of an entry's state machine: a read asks for bytes (`readRequested`); reads
/// waiting are answered, failed or planned again as bytes land and transfers end
/// (`EntryStateMachine+Waiters`); the sweeper's `tick` fails those past their deadline
/// (`EntryStateMachine+Tick`).
///
/// What it owns (`EntryReads`, the machine's `reads`): the reads waiting (`Waiter`s), the reads
/// that timed out lately, the read-ahead not read yet, and the read counts. What it only reads
/// (`ReadFacts`): the entry's version, coverage, pending bytes and unchecked slices, which other
/// steps write. The in-flight table it is handed `inout` (transfers move it too). No locks, no
/// clock, no I/O: the engine calls it under the shard lock and carries out what it returns (pins,
/// launches, cancels, answers). Time comes in as parameters: `now` (the injected wall clock's
/// seconds: last access, transfer rates) and `monotonic` (the injected monotonic clock: a read's
/// deadline and the retry window, how a reader consumes, how long a read waited). The reader's read-ahead rule, the stream size and fetch ids
/// come in as non-escaping functions, as `openRequested`'s `makeFetchID` does.
extension EntryStateMachine {
    /// What a read asks for, and of whom.
    package struct ReadRequest {
        package var reader: Int
        package var readerClass: ReaderClass
        /// Where the reader stops reading, if it said (its read-ahead ends there).
        package var readerEnd: Int64?
        package var door: ReadDoor
        /// The class its waits give a fetch (`ReaderClass.waitedFetchClass`).
        package var waitClass: FetchPriority?
        /// The reader reads in bulk (`ReaderTempo`): its fetches rank `ReaderTempo.bulkFetchClass`
        /// and its waits promote none.
        package var bulk = false
        /// The version the reader is bound to.
        package var generation: Int64
        package var offset: Int64
        package var length: Int

        package init(reader: Int, readerClass: ReaderClass, readerEnd: Int64? = nil, door: ReadDoor, waitClass: FetchPriority? = nil, bulk: Bool = false, generation: Int64, offset: Int64, length: Int) {
            self.reader = reader
            self.readerClass = readerClass
            self.readerEnd = readerEnd
            self.door = door
            self.waitClass = waitClass
            self.bulk = bulk
            self.generation = generation
            self.offset = offset
            self.length = length
        }
    }

    /// What the entry holds beside the machine, as the read finds it.
    package struct ReadFacts {
        package var generation: Int64
        package var length: Int64?
        package var acceptsRanges: Bool
        package var coverage: RangeSet
        package var pending: PendingBytes
        /// Slices on disk since before this start not checked yet.
        package var unverified: Set<Int64>
        package var sliceSize: Int64
        /// How long a read may wait for its bytes (`--read-timeout`).
        package var readTimeout: Duration

        package init(generation: Int64, length: Int64? = nil, acceptsRanges: Bool, coverage: RangeSet, pending: PendingBytes, unverified: Set<Int64>, sliceSize: Int64, readTimeout: Duration) {
            self.generation = generation
            self.length = length
            self.acceptsRanges = acceptsRanges
            self.coverage = coverage
            self.pending = pending
            self.unverified = unverified
            self.sliceSize = sliceSize
            self.readTimeout = readTimeout
        }
    }

    package enum ReadFailure: Equatable, Sendable {
        /// The reader was closed.
        case cancelled
        /// The entry left its shard (or has no index row).
        case removed
        /// The entry moved to another version than the reader's: note it among the entry's errors.
        case remoteChanged
        /// The same reader asks again for bytes that just timed out (the kernel retries a failed
        /// read-ahead at once): one timeout per read, not one per retry.
        case timedOut
    }

    package struct ReadAction: Sendable {
        package enum Answer: Sendable {
            case fail(ReadFailure)
            /// An empty range (past the end, a length of 0): answer with no bytes.
            case empty
            /// Check these slices against their checksums first, then ask again: bytes from
            /// before this start are served once checked.
            case verifyFirst([Int64])
            /// All here: answer now from these runs (memory for bytes pending for the writer,
            /// the data file for the rest). Pin and touch `range`.
            case hit(Range<Int64>, runs: [HitRun])
            /// The read waits (as the machine's newest waiter) for its fetches. Pin `range`.
            case wait(Range<Int64>)
        }
        package var answer: Answer
        /// The entry has unchecked slices: those just past this range are to be checked ahead of
        /// the reader (`SliceVerifier.slicesToVerifyAhead`, after the read's own check).
        package var verifyAhead: Range<Int64>?
        /// Fetches to start (on the in-flight table already).
        package var launches: [PlannedFetch] = []
        /// Fetches a seek left behind that nobody wants any more: cancel them now, not at their
        /// next bytes (held for the read, paused, a transfer would keep its connection, and the
        /// origin would go on filling it from the link the read needs).
        package var cancel: [Int] = []
        /// Changes of class to pass on to transfers, in order, before the lock is released.
        package var priorities: [InFlightTable.PriorityChange] = []
        /// Bytes of read-ahead this read consumed (for `CacheMetrics.readAheadReadBytes`).
        package var readAheadRead: Int64 = 0
        /// Bytes of a waiting read's range pending for the writer: the engine has the new waiter
        /// (the machine's newest, `EntryReads.waiters.last`) hold them, which takes their memory
        /// into the budget's retained share, so they reach it even if the disk refuses them.
        package var holdPending: [PendingBytes.View] = []

        package init(_ answer: Answer) { self.answer = answer }

        /// The range pinned for the read (by a hit or a wait), which the engine pins.
        package var pinned: Range<Int64>? {
            switch answer {
            case let .hit(r, _), let .wait(r): r
            case .fail, .empty, .verifyFirst: nil
            }
        }
    }

    /// A fetch a plan starts, with the bytes it is to bring if known (for `CacheMetrics`).
    package struct PlannedFetch: Sendable, Equatable {
        package var id: Int
        package var fetch: ReadPlanner.Fetch
        package var bytes: Int64?
    }

    // MARK: Read requested

    /// A read of `read.offset..<+length` by a reader whose progress is `progress`.
    /// - Parameters:
    ///   - readAheadRule: the reader's access pattern and window after this read
    ///     (`Reader.updateReadAhead`): given the request, the bytes present and the
    ///     fetches other readers want.
    ///   - streamSize: the size of each parallel stream for a window and a measured rate.
    ///   - makeReply: the engine's part of a `Waiter` for the range it waits for (how it is
    ///     answered), taken only when the read must wait.
    mutating func readRequested(_ read: ReadRequest, facts: ReadFacts, inflight: inout InFlightTable,
                                progress: inout ReaderProgress, now: Double, monotonic: MonotonicInstant,
                                readAheadRule: (inout ReaderProgress, Range<Int64>, RangeSet,
                                                [ReadPlanner.RunningFetch]) -> AccessPattern,
                                streamSize: (Int64, Double?) -> Int64?,
                                makeFetchID: () -> Int, makeReply: (Range<Int64>) -> any WaiterReply) -> ReadAction {
        guard !progress.closed else { return ReadAction(.fail(.cancelled)) }
        guard isLive else { return ReadAction(.fail(.removed)) }
        let uptime = monotonic.seconds
        guard facts.generation == read.generation else { return ReadAction(.fail(.remoteChanged)) }
        let wanted = read.offset.addingClamped(Int64(max(0, read.length)))  // offsets come from clients and the kernel
        let end = facts.length.map { min($0, wanted) } ?? wanted
        guard read.offset >= 0, end > read.offset else { return ReadAction(.empty) }
        let request = read.offset..<end
        var action = ReadAction(.wait(request))
        // Bytes from before this start are served once their checksums were checked; the
        // slices the reader comes to next are checked meanwhile.
        if !facts.unverified.isEmpty {
            action.verifyAhead = request
            let unchecked = Self.slices(of: request, size: facts.sliceSize).filter { facts.unverified.contains($0) }
            if !unchecked.isEmpty {
                action.answer = .verifyFirst(unchecked)
                return action
            }
        }
        // Bytes waiting for the writer count as present: their transfer has passed them.
        let present = facts.pending.adding(to: facts.coverage)
        if reads.timedOutLately(reader: read.reader, overlapping: request, now: monotonic), !present.contains(request) {
            action.answer = .fail(.timedOut)
            return action
        }
        let running = inflight.running(generation: read.generation, now: now)
        // A jump forward over bytes that only this reader's own read-ahead is fetching is a
        // seek; over bytes other readers wait for, the page cache they share skipped them.
        let othersWant = running.filter { f in inflight.fetches[f.id]?.interest.contains { $0 != read.reader } ?? false }
        let pattern = readAheadRule(&progress, request, present, othersWant)
        let kind = progress.pace.kind(now: uptime)
        let readAhead = kind == .unknown && progress.pace.afterSeek ? ReaderPace.boundWhileUnknown(progress.readAhead, linkRate: inflight.observedRate)
            : progress.readAhead
        let paceClass = progress.pace.readAheadPriority(now: uptime)
        var orphaned: [Int] = []
        if pattern == .seek {
            // Bytes ahead of the old position are no longer this reader's concern: its fetches
            // there stop unless someone else (or one of its reads still waiting) needs them.
            let waiting = reads.waiters.filter { $0.reader == read.reader }.map(\.range)
            orphaned = inflight.release(reader: read.reader, keeping: waiting)
        }
        if !reads.unreadAhead.isEmpty { action.readAheadRead = reads.unreadAhead.remove(request) }
        if !reads.unreadFetched.isEmpty { reads.unreadFetched.read(request) }
        reads.lastAccess = now
        reads.readStatsDirty = true
        reads.readsByDoor.add(read.door)

        // A player's read-ahead is one stream: its rate is small, and parallel streams would
        // share the link with the bytes it waits for.
        let planner = ReadPlanner(readAhead: readAhead, seekThreshold: max(2 << 20, readAhead / 2),
                                  streamSize: kind == .paced || read.readerClass == .scanner
                                      ? nil : streamSize(readAhead, inflight.observedRate),
                                  readerEnd: read.readerEnd)
        let readAheadClass: FetchPriority = read.bulk ? ReaderTempo.bulkFetchClass : read.readerClass.fixedFetchClass ?? paceClass
        // What it started before it was judged (or while it was watched) follows the verdict.
        inflight.rebase(owner: read.reader, bulk: read.bulk, watchedClass: read.readerClass.fixedFetchClass ?? paceClass)
        var plan = planner.plan(request: request, length: facts.length, cached: present, running: running)
        if !facts.acceptsRanges { Self.wholeBodyOnly(&plan, running: running) }
        for t in plan.truncations { inflight.truncate(t.fetch, at: t.end) }
        for step in plan.steps { if case let .wait(_, id) = step { inflight.addInterest(read.reader, in: id) } }
        for f in plan.fetches {
            let id = makeFetchID()
            inflight.start(id: id, generation: read.generation, start: f.start, end: f.end,
                           reader: read.reader, readerClass: read.readerClass, pinned: !facts.acceptsRanges, priority: readAheadClass, now: now)
            action.launches.append(PlannedFetch(id: id, fetch: f, bytes: (f.end ?? facts.length).map { $0 - f.start }))
        }
        progress.pace.note(readEnd: request.upperBound, missed: !plan.isHit, now: uptime)
        if plan.isHit {
            reads.hits += 1
            reads.bytesFromCache += request.length
            action.answer = .hit(request, runs: EntryReads.runs(request, pending: facts.pending))
        } else {
            reads.misses += 1
            let waiter = Waiter(reader: read.reader, range: request, generation: read.generation,
                                deadline: monotonic + facts.readTimeout, since: monotonic, reply: makeReply(request))
            waiter.waitClass = read.bulk ? nil : read.waitClass
            waiter.readerClass = read.readerClass
            action.holdPending = facts.pending.views(in: request)
            reads.waiters.append(waiter)
        }
        action.priorities = prioritized(&inflight, uptime: uptime)
        // What the seek left behind stops now (unless this read joined it: a seek forward into
        // a stream's own range waits on that stream).
        action.cancel = orphaned.filter { inflight.fetches[$0]?.interest.isEmpty ?? false }
        return action
    }

    // MARK: Read from the page cache's side

    /// A read the mount puts into the kernel's page cache ahead of a sequential reader
    /// (`Reader.cachedLease`): answered only if the whole file is on disk (no byte pending
    /// for the writer) and the range is checked, and nothing is fetched or waited for; counted as
    /// bytes served from the cache. Returns the range to pin and answer (clipped to the file's
    /// end), or nil. The reader's read-ahead and pace stay as they are: a reader served from the
    /// page cache sends no reads, and the engine's read-ahead, which follows them, would take its
    /// next read of a file still being fetched for a seek and start over small.
    package mutating func cachedReadRequested(offset: Int64, length: Int, generation: Int64, closed: Bool,
                                      facts: ReadFacts, now: Double) -> Range<Int64>? {
        guard !closed, isLive, facts.generation == generation else { return nil }
        let wanted = offset.addingClamped(Int64(max(0, length)))
        let end = facts.length.map { min($0, wanted) } ?? wanted
        guard offset >= 0, end > offset else { return nil }
        let range = offset..<end
        guard let size = facts.length, facts.coverage.contains(0..<size), facts.pending.isEmpty else { return nil }
        if !facts.unverified.isEmpty, Self.slices(of: range, size: facts.sliceSize).contains(where: facts.unverified.contains) {
            return nil
        }
        reads.bytesFromCache += range.length
        if !reads.unreadFetched.isEmpty { reads.unreadFetched.read(range) }
        reads.lastAccess = now
        reads.readStatsDirty = true
        return range
    }

    /// Classes the transfers again from the reads waiting now (a read began or stopped waiting
    /// on them); returns the changes for the fetcher.
    func prioritized(_ inflight: inout InFlightTable, uptime: Double) -> [InFlightTable.PriorityChange] {
        // One pass; an array is made only for a class that has waiters.
        var waiting: [(range: Range<Int64>, since: Double)] = [], scanning: [(range: Range<Int64>, since: Double)] = []
        for w in reads.waiters {
            if w.waitClass == .waiting {
                waiting.append((w.range, w.since.seconds))
            } else if w.waitClass == .waitedScan {
                scanning.append((w.range, w.since.seconds))
            }
        }
        return inflight.prioritize(waiting: waiting, scanning: scanning, now: uptime)
    }

    /// The slices of `range` (`DataFiles.sliceIndex`).
    package static func slices(of range: Range<Int64>, size: Int64) -> ClosedRange<Int64> {
        (range.lowerBound / size)...(max(range.lowerBound, range.upperBound - 1) / size)
    }

    /// An origin that ignores ranges answers every request with the whole body from byte 0, so
    /// one such transfer at a time feeds every reader (single flight), and none is cut short by
    /// a seek: asking again would start over from byte 0.
    package static func wholeBodyOnly(_ plan: inout ReadPlanner.Plan, running: [ReadPlanner.RunningFetch]) {
        plan.truncations = []
        guard !plan.fetches.isEmpty else { return }
        if running.isEmpty {
            plan.fetches = [ReadPlanner.Fetch(start: 0, end: nil)]
        } else {
            plan.fetches = []
            plan.steps = running.map { .wait($0.cursor..<($0.end ?? Int64.max), fetch: $0.id) }
        }
    }
}

/// The reader side of one entry, which its state machine owns (`EntryStateMachine.reads`).
package struct EntryReads {
    /// Reads waiting for bytes to land.
    package var waiters: [Waiter] = []
    /// Reads that timed out lately, by reader: the kernel's retry of one (the same file handle,
    /// the same bytes) fails at once instead of waiting `readTimeout` again.
    package var timedOut: [TimedOut] = []
    package struct TimedOut: Equatable {
        package var reader: Int
        package var range: Range<Int64>
        /// When, on the monotonic clock (as the deadlines).
        package var at: MonotonicInstant
    }
    /// How long a read that timed out is remembered.
    package static let retryWindow = Duration.seconds(2)
    /// Bytes that arrived while no read waited for them (read-ahead), not read since: what a
    /// read takes from here counts as read-ahead that was read (`CacheMetrics`).
    package var unreadAhead = RangeSet()
    /// The same bytes by who fetched them, and those of them that left the cache since the
    /// engine last took the count (`EntryStateMachine.takeWasted()`).
    package var unreadFetched = UnreadFetched()
    package var wastedUncounted = WastedBytes()
    package var hits: Int64 = 0
    package var misses: Int64 = 0
    package var bytesFromCache: Int64 = 0
    /// When it was last read (or made): what `--cache-max-age` and eviction go by.
    package var lastAccess: Double = 0
    /// Reads changed `lastAccess` or the counts since the row was last handed to the index (the
    /// sweeper writes such rows every few seconds, so `cache ls`/`info` of another process and a
    /// restart see them).
    package var readStatsDirty = false
    /// Reads since the start, by the door of their reader (for the status page).
    package var readsByDoor = DoorReads()

    package func timedOutLately(reader: Int, overlapping request: Range<Int64>, now: MonotonicInstant) -> Bool {
        !timedOut.isEmpty && timedOut.contains {
            $0.reader == reader && $0.range.overlaps(request) && now - $0.at <= Self.retryWindow
        }
    }

    /// How a hit on `range` is answered: from the data file, except bytes still pending for
    /// the writer, which come from memory (views of their chunks, held by the lease).
    package static func runs(_ range: Range<Int64>, pending: PendingBytes) -> [HitRun] {
        let inMemory = pending.views(in: range)
        guard !inMemory.isEmpty else { return [HitRun(range: range, pending: nil)] }
        var out: [HitRun] = []
        var at = range.lowerBound
        for v in inMemory {
            if v.range.lowerBound > at { out.append(HitRun(range: at..<v.range.lowerBound, pending: nil)) }
            out.append(HitRun(range: v.range, pending: v))
            at = v.range.upperBound
        }
        if at < range.upperBound { out.append(HitRun(range: at..<range.upperBound, pending: nil)) }
        return out
    }
}

/// One run of a hit's bytes: from the data file (`pending` nil), or bytes pending for the writer,
/// from memory (the engine holds their chunk for the reply: CacheCore's `ReadRun`).
package struct HitRun: Sendable {
    package let range: Range<Int64>
    package let pending: PendingBytes.View?
}
