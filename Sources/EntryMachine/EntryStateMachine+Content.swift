import CoreTypes
import Foundation

/// The entry's version and its bytes, as its state machine keeps them: its index row id, its
/// `EntryInfo`, the bytes on disk and those waiting for the writer, the transfers running for
/// it, the slices' sizes, last accesses and pins, its origin byte count, its own limit for a body
/// without a length, its recent errors and the row the index last got.
///
/// Only the machine changes it (`EntryStateMachine+Content` below, and the events of the other
/// files that take the in-flight table): the machine's `content` has a setter inside this module
/// only, so a write to it from the engine does not compile. `EntryState` reads it by the old
/// field names.
package struct EntryContent {
    /// Index row id; data file names use it. -1 until the first successful answer.
    package var id: Int64
    package var info: EntryInfo
    /// Bytes of `info.generation` that are on disk.
    package var coverage = RangeSet()
    /// Bytes of `info.generation` that arrived and wait for the writer (never in `coverage`).
    package var pending = PendingBytes()
    package var inflight = InFlightTable()
    /// Bytes present per slice, and when each slice was last read or written (LRU).
    package var sliceBytes: [Int64: Int64] = [:]
    package var sliceAccess: [Int64: Double] = [:]
    /// Slices a scanner-class reader (or `preload --head/--tail`) read: kept in the cap's scan
    /// share (`Evictor`, `ScanShare`), evicted only by the share's own oldest.
    package var scanSlices: Set<Int64> = []
    /// Slices of the current generation that must not be evicted now (a read or a write is using
    /// them). Reset with each new generation: pins of an older one are released as no-ops.
    package var pins: [Int64: Int] = [:]
    package var bytesFromOrigin: Int64 = 0
    /// The most a body without a length may bring before it fails, when an open asked for less
    /// than the engine's own limit (`TransferStarts.unknownLengthLimit`).
    package var unknownLengthLimit: Int64?
    package var recentErrors: [String] = []
    /// The hash of the row the index holds for this entry, or will once its queued write lands:
    /// a row with this hash is not saved again. A hash, not the row: every entry in memory would
    /// carry a second copy of its row's fields (200 bytes of the ~1.4 KiB an idle entry costs).
    /// Two rows with one hash (one chance in 2^64, the hash seeded per process) would skip one
    /// save of the row's fields, never of extents, which are saved on their own.
    package var savedRowHash: Int?

    init(id: Int64, info: EntryInfo) {
        self.id = id
        self.info = info
    }

    /// An entry of no URL yet: a machine alone, as its tables test it.
    init() {
        self.init(id: -1, info: EntryInfo(key: CacheKey(rawValue: ""), url: "", finalURL: "", length: nil, contentType: nil,
                                          etag: nil, lastModified: nil, acceptsRanges: true, generation: 0,
                                          validatedAt: .distantPast))
    }
}

extension EntryStateMachine {
    /// Still in its shard and at `generation`.
    package func isCurrent(_ generation: Int64) -> Bool { !isRemoved && content.info.generation == generation }

    // MARK: Start and index rows

    /// The entry was read from the index at start: its counts and last error are the row's, and
    /// so is the row the index holds (a stop writes only entries that changed since).
    package mutating func loaded(_ row: EntryRow) {
        reads.hits = row.hits
        reads.misses = row.misses
        reads.bytesFromCache = row.bytesFromCache
        content.bytesFromOrigin = row.bytesFromOrigin
        if let err = row.lastError { content.recentErrors = [err] }
        content.savedRowHash = self.row().hashValue
    }

    /// A slice's extents found on disk at start (`CacheLoad`): in the coverage and the slice's
    /// size, last read when the entry was. Returns the bytes the coverage gained.
    package mutating func sliceLoaded(_ slice: Int64, extents: some Sequence<Range<Int64>>) -> Int64 {
        var added: Int64 = 0
        for x in extents {
            let n = content.coverage.insert(x)
            content.sliceBytes[slice, default: 0] += n
            added += n
        }
        content.sliceAccess[slice] = reads.lastAccess
        return added
    }

    /// Slices the index marks as read by a scanner (`CacheIndex.loadScanSlices`), loaded at
    /// start: only those with bytes on disk keep the mark.
    package mutating func scanSlicesLoaded(_ slices: some Sequence<Int64>) {
        for s in slices where content.sliceBytes[s] != nil { content.scanSlices.insert(s) }
    }

    /// The row the index holds for the entry now.
    package func row() -> EntryRow {
        let info = content.info
        return EntryRow(id: content.id, key: info.key.string, url: info.url, finalURL: info.finalURL,
                                   length: info.length, contentType: info.contentType, etag: info.etag,
                                   lastModified: info.lastModified, acceptsRanges: info.acceptsRanges,
                                   generation: info.generation, validatedAt: info.validatedAt.timeIntervalSince1970,
                                   lastAccess: reads.lastAccess, hits: reads.hits, misses: reads.misses,
                                   bytesFromCache: reads.bytesFromCache, bytesFromOrigin: content.bytesFromOrigin,
                                   lastError: content.recentErrors.last)
    }

    /// The row to hand to the index, nil when it has that one already; once handed, it is the
    /// one the index holds.
    package mutating func rowToSave() -> EntryRow? {
        let now = row()
        let hash = now.hashValue
        guard hash != content.savedRowHash else { return nil }
        content.savedRowHash = hash
        return now
    }

    /// The sweeper took the read counts for the index (`Maintenance.writeReadStats`): true if
    /// reads changed them since it last did.
    package mutating func readStatsTaken() -> Bool {
        defer { reads.readStatsDirty = false }
        return reads.readStatsDirty
    }

    /// The index row id the entry's first good answer gave it (`HeadDecision.Version.adoptFirst`).
    package mutating func indexed(id: Int64) { content.id = id }

    // MARK: Opens and versions

    /// An open asked for a limit of its own on a body without a length (a listing page): the
    /// smallest asked holds.
    package mutating func lengthLimitAsked(_ limit: Int64) {
        content.unknownLengthLimit = min(limit, content.unknownLengthLimit ?? limit)
    }

    /// A metadata probe (`openRequested`'s `startProbe`, or a head's reprobe) starts as fetch
    /// `id` of the current version, from byte 0 to `end`: pinned (nobody may cancel it for want
    /// of interest) and of the waiting class. `url`: the URL the open asked, which the entry's
    /// requests use from now on.
    package mutating func probeStarted(_ id: Int, url: String? = nil, end: Int64?, now: Double) {
        if let url { content.info.url = url }
        transferStarted(id, start: 0, end: end, reader: nil, pinned: true, priority: .waiting, now: now)
    }

    /// Fetch `id` of the current version starts at `start` (`InFlightTable.start`).
    package mutating func transferStarted(_ id: Int, start: Int64, end: Int64?, reader: Int?, pinned: Bool = false,
                                  priority: FetchPriority = .far, now: Double) {
        content.inflight.start(id: id, generation: content.info.generation, start: start, end: end, reader: reader,
                               pinned: pinned, priority: priority, now: now)
    }

    /// What the origin said of the version (`head`), taken as the entry's at `now`: its URL after
    /// redirects, length (if it said one), type, validators and whether it serves ranges.
    package mutating func headAdopted(_ head: ResponseHead, at now: Date) {
        content.info.finalURL = head.finalURL
        if let length = head.totalLength { content.info.length = length }
        content.info.contentType = head.contentType
        content.info.etag = head.etag
        content.info.lastModified = head.lastModified
        content.info.acceptsRanges = head.acceptsRanges || head.status == 206
        content.info.validatedAt = now
    }

    /// A head confirmed the version at `now` (`confirmed(_:by:at:)`).
    package mutating func versionConfirmed(by head: ResponseHead, at now: Date) {
        content.info = Self.confirmed(content.info, by: head, at: now)
    }

    /// A head's body step is done (`info(_:after:)`).
    package mutating func bodyDecided(_ body: HeadDecision.Body) {
        content.info = Self.info(content.info, after: body)
    }

    /// The version is to be asked again at the next open (its bytes differed from the cached ones
    /// though its validators did not).
    package mutating func validationForgotten() { content.info.validatedAt = .distantPast }

    /// A body without a length ended: its end is the file's length.
    mutating func lengthLearned(_ length: Int64) { content.info.length = length }

    /// What a new version leaves the engine to do: give back `droppedBytes` of its total, and
    /// cancel the transfers `cancel` of the old version.
    package struct GenerationAction: Equatable {
        package var droppedBytes: Int64
        package var cancel: [Int]
    }

    /// The remote file changed: the entry is at `generation` now, of no known length, with no
    /// bytes, pending bytes, read-ahead, slices, pins or unchecked slices of its own; the
    /// transfers of the old version go, except `kept` (the one whose head told, which follows the
    /// entry). The caller adopts the head and fails the reads of the old version.
    package mutating func generationStarted(_ generation: Int64, keeping kept: Int?) -> GenerationAction {
        let old = content.info.generation
        content.info.generation = generation
        content.info.length = nil
        let dropped = content.coverage.count
        content.coverage = RangeSet()
        reads.unreadAhead = RangeSet()
        reads.wastedUncounted += reads.unreadFetched.droppedAll()
        uncheckedSlicesForgotten()
        content.pending.removeAll()
        content.sliceBytes = [:]
        content.sliceAccess = [:]
        content.scanSlices = []
        content.pins = [:]
        return GenerationAction(droppedBytes: dropped, cancel: content.inflight.removeAll(generation: old, keeping: kept))
    }

    // MARK: Transfers

    /// A transfer's bytes `gap` are new to the entry: those no read waits for are marked as
    /// read-ahead (`markReadAhead`). Returns how many were.
    /// `fetchedBy`: the class of the reader whose transfer brought them (nil: the open's probe),
    /// whose waste they are if they leave the cache unread (`UnreadFetched`).
    package mutating func readAheadArrived(_ gap: Range<Int64>, waiting: WaitingRanges, fetchedBy owner: ReaderClass? = nil) -> Int64 {
        let ahead = Self.readAhead(in: gap, waiting: waiting)
        switch ahead {
        case .all: reads.unreadFetched.mark(gap, by: owner)
        case let .only(early): for r in early.ranges { reads.unreadFetched.mark(r, by: owner) }
        }
        return Self.markReadAhead(gap, ahead, in: &reads.unreadAhead)
    }

    /// Fetched bytes that left the cache unread since the last call (evicted, found unreadable,
    /// dropped for a new version), by fetcher; the engine counts them
    /// (`CacheMetrics.noteWasted`).
    package mutating func takeWasted() -> WastedBytes {
        defer { reads.wastedUncounted = WastedBytes() }
        return reads.wastedUncounted
    }

    /// A chunk of new bytes waits for the writer.
    package mutating func pendingAdded(_ chunk: PendingBytes.Chunk) { content.pending.add(chunk) }

    /// A transfer brought `range` (new or not): counted as from the origin, and the transfer's
    /// cursor moves past it.
    package mutating func transferAdvanced(_ fetch: Int, past range: Range<Int64>, now: Double) -> InFlightTable.Progress {
        content.bytesFromOrigin += range.length
        return content.inflight.advance(fetch, to: range.upperBound, now: now)
    }

    /// A transfer now delivers from `cursor` (a new version's body from its start, or a whole
    /// body sent to a ranged request).
    package mutating func transferRebased(_ fetch: Int, cursor: Int64, end: Int64?, generation: Int64, pinned: Bool) {
        content.inflight.rebase(fetch, cursor: cursor, end: end, generation: generation, pinned: pinned)
    }

    /// A transfer ended (or its head showed it belongs to no version of the entry's any more).
    @discardableResult
    package mutating func transferEnded(_ fetch: Int) -> InFlightTable.Fetch? { content.inflight.finish(fetch) }

    /// The writer is done with `chunks` (written or refused): they leave the pending bytes.
    mutating func pendingWritten(_ chunks: [PendingBytes.Chunk]) {
        for c in chunks { content.pending.remove(c) }
    }

    /// Bytes written to disk (`recordWritten(_:sliceSize:now:coverage:sliceBytes:sliceAccess:)`).
    mutating func recordWritten(_ written: [Range<Int64>], sliceSize: Int64, now: Double) -> Int64 {
        Self.recordWritten(written, sliceSize: sliceSize, now: now, coverage: &content.coverage,
                           sliceBytes: &content.sliceBytes, sliceAccess: &content.sliceAccess)
    }

    // MARK: The rules that take the in-flight table

    /// Runs `body` with the machine's in-flight table lent out `inout` (left empty meanwhile, so
    /// it is changed in place, never copied), for the events whose rules take the table as a
    /// parameter so that their tables test them on one of their own.
    private mutating func lendingInflight<T>(_ body: (inout Self, inout InFlightTable) -> T) -> T {
        var table = InFlightTable()
        swap(&table, &content.inflight)
        defer { swap(&table, &content.inflight) }
        return body(&self, &table)
    }

    /// `readRequested(_:facts:inflight:…)` on the entry's own transfers.
    package mutating func readRequested(_ read: ReadRequest, facts: ReadFacts, progress: inout ReaderProgress,
                                now: Double, monotonic: MonotonicInstant,
                                readAheadRule: (inout ReaderProgress, Range<Int64>, RangeSet,
                                                [ReadPlanner.RunningFetch]) -> AccessPattern,
                                streamSize: (Int64, Double?) -> Int64?, makeFetchID: () -> Int,
                                makeReply: (Range<Int64>) -> any WaiterReply) -> ReadAction {
        lendingInflight { m, table in
            m.readRequested(read, facts: facts, inflight: &table, progress: &progress, now: now, monotonic: monotonic,
                            readAheadRule: readAheadRule, streamSize: streamSize, makeFetchID: makeFetchID,
                            makeReply: makeReply)
        }
    }

    /// `waitersReplanned(_:failedRange:endedShort:inflight:…)` on the entry's own transfers.
    package mutating func waitersReplanned(_ facts: WaiterFacts, failedRange: Range<Int64>?, endedShort: Bool, now: Double,
                                   uptime: Double, makeFetchID: () -> Int) -> ReplanAction {
        lendingInflight { m, table in
            m.waitersReplanned(facts, failedRange: failedRange, endedShort: endedShort, inflight: &table, now: now,
                               uptime: uptime, makeFetchID: makeFetchID)
        }
    }

    /// `readerClosed(_:inflight:uptime:)` on the entry's own transfers.
    package mutating func readerClosed(_ reader: Int, uptime: Double)
        -> (waiters: [Waiter], orphaned: [Int], priorities: [InFlightTable.PriorityChange]) {
        lendingInflight { m, table in m.readerClosed(reader, inflight: &table, uptime: uptime) }
    }

    /// `prioritized(_:uptime:)` on the entry's own transfers.
    package mutating func prioritized(uptime: Double) -> [InFlightTable.PriorityChange] {
        lendingInflight { m, table in m.prioritized(&table, uptime: uptime) }
    }

    // MARK: Slices

    /// Slice `slice` (bytes `range`) left the disk: evicted, or its data file unreadable.
    /// Returns the bytes the coverage lost.
    package mutating func sliceDropped(_ slice: Int64, range: Range<Int64>) -> Int64 {
        let n = content.coverage.remove(range)
        if !reads.unreadFetched.isEmpty { reads.wastedUncounted += reads.unreadFetched.dropped(range) }
        content.sliceBytes[slice] = nil
        content.sliceAccess[slice] = nil
        content.scanSlices.remove(slice)
        return n
    }

    /// A scanner-class reader read `slices` (a read that touched them, hit or miss): they are
    /// scan slices from now on, until they leave the disk. Returns those that were not yet.
    package mutating func slicesScanned(_ slices: ClosedRange<Int64>) -> [Int64] {
        slices.filter { content.scanSlices.insert($0).inserted }
    }

    /// Bytes on disk of its scan slices: what it holds in the cap's scan share.
    package var scanBytes: Int64 {
        content.scanSlices.reduce(0) { $0 + (content.sliceBytes[$1] ?? 0) }
    }

    /// Slices read or written at `now` (their last access, for eviction).
    package mutating func slicesTouched(_ slices: ClosedRange<Int64>, now: Double) {
        for s in slices { content.sliceAccess[s] = now }
    }

    /// A read or write of `generation` uses `slices`: eviction leaves them alone until it
    /// releases them. No pin for a removed entry or another version.
    package mutating func slicesPinned(_ slices: ClosedRange<Int64>, generation: Int64) {
        guard isCurrent(generation) else { return }
        for s in slices { content.pins[s, default: 0] += 1 }
    }

    /// Releases a pin taken at `generation`; a no-op once the entry moved on (its pins were reset).
    package mutating func slicesUnpinned(_ slices: ClosedRange<Int64>, generation: Int64) {
        guard isCurrent(generation) else { return }
        for s in slices {
            let n = (content.pins[s] ?? 1) - 1
            content.pins[s] = n > 0 ? n : nil
        }
    }

    /// A fully cached version went to the kernel as a whole (`WholeFile`): one hit of `length`
    /// bytes through `door`, at `now`.
    package mutating func wholeFileRead(_ length: Int64, door: ReadDoor, now: Double) {
        reads.hits += 1
        reads.bytesFromCache += length
        reads.lastAccess = now
        reads.readStatsDirty = true
        reads.readsByDoor.add(door)
    }

    // MARK: Errors, stop, removal

    /// Keeps `message` among the ten most recent errors, stamped with `time`.
    package mutating func errorNoted(_ message: String, at time: Date) {
        content.recentErrors.append("\(ISO8601DateFormatter().string(from: time)) \(message)")
        if content.recentErrors.count > 10 { content.recentErrors.removeFirst(content.recentErrors.count - 10) }
    }

    /// The engine stops (or the entry is removed): the reads waiting and the transfers running
    /// are handed back to be failed and cancelled; `dropBytes` (`cache rm`/`clear`) also forgets
    /// its bytes, which the command deletes.
    package mutating func stopped(dropBytes: Bool) -> (waiters: [Waiter], fetches: [Int]) {
        if dropBytes {
            content.coverage = RangeSet()
            content.sliceBytes = [:]
            content.scanSlices = []
        }
        let waiters = reads.waiters
        reads.waiters = []
        return (waiters, content.inflight.removeAll())
    }
}
