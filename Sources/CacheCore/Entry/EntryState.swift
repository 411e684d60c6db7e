import Foundation
import Atomics

/// Map of this folder (`Entry/`): one entry as the engine holds it; its machine and the rules it
/// decides with are the EntryMachine module's.
/// - `EntryState.swift` (this file): the entry under its shard lock (its machine, key and
///   handle), with the machine's facts by their old names, get-only; a waiting read's reply
///   (`WaitingRead`: data file, answer, held chunks); a reader (`ReaderState`); the shards.
/// - `EntryState+Reads.swift`: the reader side's facts by their old names.
/// - `Waiter+Read.swift`: a machine's `Waiter` as the engine answers it (its `WaitingRead`).
/// - `VersionSample.swift`: did the remote file change (its bytes; the overlap plan is `Fetch/`'s).
/// - `LetGoOrder.swift`: which idle entries of a shard are let go first (SIEVE).
/// Neighbours: `Engine/`, `Read/`, `Fetch/`, `Eviction/` and `Maintenance/` find entries here under
/// the shard lock; waiting reads hold `Memory/` chunks.
///
/// Everything the engine holds in memory about one entry. Guarded by its shard's lock, and never
/// leaves it: it lives in its shard's `EntryTable`, and what crosses threads is its `handle`.
///
/// Its life (`probing`: no index row yet, id -1, until the first good answer; then `live`; and
/// `removed` once it left its shard: `cache rm`, a live playlist refresh, `clear`), the opens
/// waiting for a probe and which transfers are probes are `machine`'s, and so is its reader side
/// (`EntryReads`: the reads waiting, those that timed out lately, read-ahead not read yet, the
/// read counts; `EntryState+Reads` keeps their old names), and its version and bytes
/// (`EntryContent`: info, coverage, pending bytes, transfers, slices, pins, errors; the fields
/// below keep their old names, get-only): `EntryStateMachine` (module EntryMachine) decides and
/// records, the engine and `EntrySink` carry out. Work that ran without the lock (a transfer's
/// write, a read from disk, an eviction) finds the entry again by its handle, which finds
/// nothing once it was removed, and checks `isCurrent` for its generation before it records
/// anything, so a removed entry or an old version never gains bytes, coverage or pins again.
/// Not `Sendable`, and checked so (no `@unchecked`): the compiler keeps it inside its shard's
/// `LockedValue` (a reference is neither captured by nor stored outside a locked block, and
/// `Shard.locked` returns only `Sendable` types), with its `Waiter`s and state machine.
final class EntryState {
    typealias OpenCompletion = @Sendable (Result<EntryInfo, CacheError>) -> Void

    /// The entry's state: its life, reads, version and bytes. Only its events change it: its
    /// fields have setters inside the EntryMachine module only, so no write to one from here
    /// builds. Settable only so that the events run in place; nothing replaces it but `init`
    /// (`scripts/entry-writes.sh`).
    var machine: EntryStateMachine<OpenCompletion> {
        didSet { reportFigures() }
    }
    /// Where its figures are counted, once the engine attached it (`EntryState+Totals`).
    var totals: RunningTotals?
    /// What it added to `totals` last (nil: nothing, it was not live).
    var reported: EntryFigures?

    /// Index row id; data file names use it. -1 until the first successful answer.
    var id: Int64 { machine.content.id }
    var info: EntryInfo { machine.content.info }
    /// Bytes of `info.generation` that are on disk.
    var coverage: RangeSet { machine.content.coverage }
    /// Bytes of `info.generation` that arrived and wait for the writer (never in `coverage`).
    var pending: PendingBytes { machine.content.pending }
    var inflight: InFlightTable { machine.content.inflight }
    /// Bytes present per slice, and when each slice was last read or written (LRU).
    var sliceBytes: [Int64: Int64] { machine.content.sliceBytes }
    var sliceAccess: [Int64: Double] { machine.content.sliceAccess }
    /// Slices a scanner read, kept in the cap's scan share (`ScanShare`), and their bytes on disk.
    var scanSlices: Set<Int64> { machine.content.scanSlices }
    var scanBytes: Int64 { machine.scanBytes }
    /// Slices whose rows an eviction is deleting right now: nothing is written into them until
    /// that commit is done, or the row delete would take the new extents too (the machine's
    /// marks: `EntryStateMachine+Eviction`).
    var evicting: Set<Int64> { machine.evicting }
    var bytesFromOrigin: Int64 { machine.content.bytesFromOrigin }
    /// The most a body without a length may bring before it fails, when an open asked for less
    /// than the engine's own limit (`TransferStarts.unknownLengthLimit`): a directory listing is
    /// capped at 64 MiB, and an endless one is stopped there, not at half the cache's capacity.
    var unknownLengthLimit: Int64? { machine.content.unknownLengthLimit }
    /// True for a directory listing's page: only listings open with a limit of their own
    /// (`unknownLengthLimit`, `CacheEngine.open`). A page that changed is a new version like any
    /// other, but not "a remote file changed": no notice, no `remoteChanges` (issue 38).
    var isListingPage: Bool { unknownLengthLimit != nil }
    /// Slices on disk since before this start whose extents were not checked against their
    /// checksums yet: their bytes are served only after the check (`SliceVerifier`).
    var unverified: Set<Int64> {
        guard mayHaveUnverified else { return [] }
        let marks = machine.unverified
        if marks.isEmpty { mayHaveUnverified = false }   // they only shrink after the load
        return marks
    }
    /// Whether the machine may still have unchecked slices: set by the load that marked some
    /// (`uncheckedLoaded`), cleared once it has none. Every read and every scrub step asks for
    /// `unverified`, and the machine's answer (generic, from another module) copies its whole
    /// state: an entry this process wrote, or one whose slices were all checked, answers here.
    private var mayHaveUnverified = false

    /// The load found `slices` on disk from before this start, not checked yet (call under the
    /// shard lock, as for every mark).
    func uncheckedLoaded(_ slices: [Int64]) {
        machine.loadedUnchecked(slices)
        if !slices.isEmpty { mayHaveUnverified = true }
    }
    /// Unchecked slices a job will check ahead of a reader (`slicesToVerifyAhead`): not queued twice.
    var verifyQueued: Set<Int64> { machine.verifyQueued }
    var recentErrors: [String] { machine.content.recentErrors }

    /// The key it is kept under (never changes) and its number, never reused: what names it
    /// outside the lock.
    let key: CacheKey
    let serial: UInt64
    var handle: EntryHandle { EntryHandle(key: key, serial: serial) }
    /// The numbers given to entries so far, in this process.
    private static let serials = ManagedAtomic<UInt64>(0)

    init(id: Int64, info: EntryInfo, lastAccess: Double) {
        self.key = info.key
        self.serial = Self.serials.loadThenWrappingIncrement(ordering: .relaxed) + 1
        self.machine = EntryStateMachine(id: id, info: info, lastAccess: lastAccess)
    }

    /// Has an index row and is still in its shard.
    var isPersisted: Bool { machine.isLive }

    /// Still in its shard and at `generation`: what a step that ran without the lock checks
    /// before it records its result.
    func isCurrent(_ generation: Int64) -> Bool { machine.isCurrent(generation) }

    /// The entry left its shard: nothing may be added to it any more. Returns what the machine
    /// says the caller must do (fail the opens waiting, give its bytes back) the first time.
    /// Called by `EntryTable.remove` only (and tests of a lone entry): the two go together.
    @discardableResult
    func markRemoved() -> EntryStateMachine<OpenCompletion>.RemoveAction { machine.removed() }

    /// The machine's `slicesPinned`.
    func pin(_ slices: ClosedRange<Int64>, generation: Int64) { machine.slicesPinned(slices, generation: generation) }

    /// The machine's `slicesUnpinned`: a no-op once the entry moved on (its pins were reset).
    func unpin(_ slices: ClosedRange<Int64>, generation: Int64) { machine.slicesUnpinned(slices, generation: generation) }

    func isPinned(_ slice: Int64) -> Bool { (machine.content.pins[slice] ?? 0) > 0 }

    /// Keeps `message` among the recent errors, stamped with `time` (the engine's clock).
    func noteError(_ message: String, at time: Date) { machine.errorNoted(message, at: time) }

    /// Whether a row was handed to the index for this entry (or loaded from it). `saveRow` skips
    /// a row equal to the last one handed (by its hash: `EntryContent.savedRowHash`), so a stop
    /// (which saves every entry) writes only the entries that changed, not the whole cache.
    var hasSavedRow: Bool { machine.content.savedRowHash != nil }

    /// Hands the entry's row to `index` (written behind) unless the index has it already.
    func saveRow(to index: CacheIndex) {
        if let row = machine.rowToSave() { index.updateEntry(row) }
    }

    func row() -> CacheIndex.EntryRow { machine.row() }
}

/// How a waiting read (the machine's `Waiter`) is answered, and the bytes that reached it. A
/// class, so a transfer can fill it in place: bytes that
/// arrive for it are not copied, it keeps references to the parts of the chunks they landed in
/// (`held`), and it is answered from them when they cover it, with no read back from disk (and
/// even when the disk is full). What it holds is counted in the `MemoryBudget`'s retained share;
/// when that has no room it lets go of all it holds (bytes the disk refused excepted: nothing
/// else has them), holds nothing more, and its bytes come from the write queue and the data file
/// when all are there. The entry machine sees only `filled`.
final class WaitingRead: WaiterReply {
    /// The reader's open data file, for the parts answered from disk.
    let files: ReaderFiles
    /// The waiting read's range (the `Waiter`'s).
    let range: Range<Int64>
    /// How the read is answered: what leaves the shard lock in its stead, a `Waiter` never does.
    typealias Completion = @Sendable (Result<ReadLease, CacheError>) -> Void
    let completion: Completion
    /// Bytes of `range` that arrived while it waited, where they are: sorted, disjoint, exactly
    /// `filled`. `kept`: bytes the disk refused, which it must not let go of.
    private(set) var held: [(range: Range<Int64>, bytes: ChunkBytes, kept: Bool)] = []
    package private(set) var filled = RangeSet()
    /// False once the retained share had no room for it: it holds only bytes the disk refused.
    private(set) var retaining = true

    init(files: ReaderFiles, range: Range<Int64>, completion: @escaping Completion) {
        self.files = files
        self.range = range
        self.completion = completion
    }

    /// Holds the part of `bytes` (entry offsets, at `offset` in `storage`) that this read wants and
    /// does not have yet, if the retained share has room (always, `force`: bytes the disk refused,
    /// which nothing else holds). Without room it lets go of everything it may let go of.
    func fill(_ bytes: Range<Int64>, in storage: ChunkStorage, at offset: Int, force: Bool = false) {
        let overlap = range.clamped(to: bytes)
        guard !overlap.isEmpty, force || retaining else { return }
        if force {
            // Held already through another chunk: the same bytes, now the only copy left.
            for i in held.indices where held[i].range.overlaps(overlap) { held[i].kept = true }
        }
        let gaps = filled.gaps(in: overlap)
        guard !gaps.isEmpty else { return }
        // A new hold only for a piece that does not extend the one before it (most arrivals do:
        // that one's hold keeps the chunk already).
        var retention: ChunkRetention?
        for gap in gaps {
            let at = offset + Int(gap.lowerBound - bytes.lowerBound)
            let i = held.firstIndex { $0.range.lowerBound > gap.lowerBound } ?? held.endIndex
            // libcurl hands 16 KiB at a time: the arrivals that follow each other in one chunk
            // become one piece, so a reply is one buffer, not eight.
            if i > 0, held[i - 1].range.upperBound == gap.lowerBound, held[i - 1].kept == force,
               held[i - 1].bytes.retention.storage === storage, held[i - 1].bytes.offset + held[i - 1].bytes.count == at {
                let before = held[i - 1]
                held[i - 1] = (before.range.lowerBound..<gap.upperBound,
                               ChunkBytes(before.bytes.retention, offset: before.bytes.offset, count: before.bytes.count + Int(gap.length)),
                               force)
                filled.insert(gap)
                continue
            }
            if retention == nil {
                retention = ChunkRetention(storage, force: force)
                guard retention != nil else { return letGo() }
            }
            filled.insert(gap)
            held.insert((range: gap, bytes: ChunkBytes(retention!, offset: at, count: Int(gap.length)), kept: force), at: i)
        }
    }

    /// The retained share is spent: keep only what nothing else holds, and hold nothing more.
    /// What it let go of is still in the write queue or on disk (pinned by this read).
    private func letGo() {
        retaining = false
        held.removeAll { !$0.kept }
        filled = RangeSet()
        for h in held { filled.insert(h.range) }
    }

    /// The bytes of `wanted` (a prefix of `range`) that it holds, as runs in order (no copy),
    /// with the gaps between them (to be read from the queue or disk) as nil.
    func runs(of wanted: Range<Int64>) -> [(Range<Int64>, ChunkBytes?)] {
        var out: [(Range<Int64>, ChunkBytes?)] = []
        var at = wanted.lowerBound
        for h in held where h.range.overlaps(wanted) {
            let run = h.range.clamped(to: wanted)
            if run.lowerBound > at { out.append((at..<run.lowerBound, nil)) }
            let lo = Int(run.lowerBound - h.range.lowerBound)
            out.append((run, h.bytes.slice(lo, lo + Int(run.length))))
            at = run.upperBound
        }
        if at < wanted.upperBound { out.append((at..<wanted.upperBound, nil)) }
        return out
    }
}

/// Per-reader state: sequential detection and read-ahead window.
final class ReaderState: Sendable {
    let id: Int
    /// The version this reader was made for; it never follows the entry to another one.
    let entry: EntryInfo
    /// The data file of that version, once a read opened it.
    let files = ReaderFiles()
    /// Where the reader stops reading, if it said: its read-ahead ends there.
    let end: Int64?
    /// The front door its reads come through, for the per-file counts.
    let door: ReadDoor
    /// Who reads (`ReaderClass`): what read-ahead it gets and the class of its fetches.
    let readerClass: ReaderClass
    /// The slices its reads touch become scan slices (`ScanShare`): a scanner's, or
    /// `preload --head/--tail`'s, while the share is on.
    let fillsScanShare: Bool

    /// What its reads so far say about it (`ReaderProgress`, which the entry machine's reads take).
    typealias Progress = ReaderProgress
    /// Read and changed only under the entry's shard lock (by `read` and `close`), so its own
    /// lock is never contended: it is there for the compiler's sake, so this class is checked
    /// `Sendable` (a reader crosses threads: a FUSE handle, a queued verify, a chunked read). A
    /// leaf lock inside the shard's, a few per read.
    let progress: LockedValue<Progress>

    init(id: Int, entry: EntryInfo, end: Int64? = nil, door: ReadDoor = .cli, initialReadAhead: Int64,
         readerClass: ReaderClass = .player, fillsScanShare: Bool = false) {
        self.id = id
        self.fillsScanShare = fillsScanShare
        self.entry = entry
        self.end = end
        self.door = door
        self.readerClass = readerClass
        var progress = Progress(readAhead: initialReadAhead)
        if !readerClass.readsAheadFromOpen(door: door) {
            progress.readAhead = 0
            progress.earning = EarnedReadAhead()
        }
        self.progress = LockedValue(progress)
    }
}

/// Names an entry outside its shard's lock: its key and the number it was made with.
///
/// What crosses threads in an entry's stead (a transfer's sink, the launches and hits a locked
/// block hands out, a queued check, eviction rounds, kept descriptors): `EntryState` is not
/// `Sendable`, and never leaves its shard's lock. Not the key alone, nor key and generation: a
/// transfer follows its entry across versions (`newVersionFromStart`), and a new entry for the
/// same key (after `cache rm`, a playlist refresh) is another entry. `serial` is never reused.
struct EntryHandle: Hashable, Sendable {
    let key: CacheKey
    let serial: UInt64
}

/// One lock domain of the engine's per-entry state: a table of entries under one lock, which
/// guards the table and every `EntryState` and `Waiter` of its entries (and, with a leaf lock of
/// their own, the `ReaderState.progress` of their readers). Every locked block returns only
/// `Sendable` values (`LockedValue`'s `sending` rules); work outside the lock names an entry by
/// its `EntryHandle` and finds it again under the lock (`EntryTable.subscript(_: EntryHandle)`).
///
/// A struct over the `LockedValue` (no indirection beside it) rather than the `LockedValue`
/// itself, so that a block's result is `Sendable` by its type: `sending` alone lets a block
/// return an entry of the table (the compiler does not see that the result is in the table's
/// region), which this rules out.
struct Shard: Sendable {
    private let table: LockedValue<EntryTable>

    init() { table = LockedValue(EntryTable()) }

    @inline(__always)
    func locked<T: Sendable>(_ body: (inout sending EntryTable) -> T) -> T {
        table.withLock { body(&$0) }
    }

    /// `locked` if no other thread holds the lock now; nil without waiting otherwise (tests).
    func lockedIfAvailable<T: Sendable>(_ body: (inout sending EntryTable) -> T) -> T? {
        table.withLockIfAvailable { body(&$0) }
    }
}

extension [Shard] {
    /// The shard `key`'s entry lives in: the same for every part that holds the shards.
    func of(_ key: CacheKey) -> Shard { self[Int(key.stableHash % UInt64(count))] }
}

/// The entries of one shard in memory, by key: those in use, and the idle ones kept up to the
/// engine's entry budget (`EntryLoader`); the rest are in the index only.
///
/// An entry leaves its table when it is marked removed (`remove`), or when it is let go while
/// idle (`unload`: no reader, read, transfer, pin, pending byte or mark of eviction or check, so
/// no step outside the lock names it). A lookup by handle that finds nothing means that it was
/// removed, or let go with nothing of it in flight: what a step that ran without the lock
/// checks, beside `isCurrent`. An entry let go is loaded again from the index (`EntryLoader`),
/// under a new handle.
struct EntryTable {
    private var byKey: [CacheKey: EntryState] = [:]
    /// Keys being loaded from the index, with what runs once each is in (one load per key: the
    /// opens that come meanwhile wait for it).
    private var loading: [CacheKey: [@Sendable () -> Void]] = [:]
    /// Which entries are let go first (SIEVE: see `LetGoOrder`): every entry in memory is in it.
    private var order = LetGoOrder<CacheKey>()
    /// Data files (row id and generation) whose extents were checked against the disk and their
    /// checksums in this process, or written by it: loaded again, their slices are served
    /// without another check.
    var trusted = Set<FileID>()

    init() {}

    /// The entry of `key` now, whichever it is.
    subscript(key: CacheKey) -> EntryState? { byKey[key] }

    /// The entry `handle` names, if it is still in its table (not removed).
    @inline(__always)
    subscript(handle: EntryHandle) -> EntryState? {
        guard let e = byKey[handle.key], e.serial == handle.serial else { return nil }
        return e
    }

    var all: Dictionary<CacheKey, EntryState>.Values { byKey.values }
    var count: Int { byKey.count }

    /// Puts a new entry in (none may be there for its key): as the newest, not used again yet,
    /// unless not `recent` (a load for a look, not a use: eviction's, the scrub's), then first in
    /// line to be let go.
    mutating func add(_ entry: EntryState, recent: Bool = true) {
        precondition(byKey[entry.key] == nil, "an entry is already in the table under \(entry.key)")
        byKey[entry.key] = entry
        order.insert(entry.key, nextOut: !recent)
    }

    /// Marks `key`'s entry as used again (an open of an entry already in memory): the let-go
    /// order passes it over once.
    mutating func touch(_ key: CacheKey) {
        order.touch(key)
    }

    /// Takes out up to `count` entries that `canLetGo` allows (idle ones), in the let-go order
    /// (`LetGoOrder`), and returns them; the caller saved nothing yet and does so next, under
    /// the same lock.
    mutating func letGo(_ count: Int, canLetGo: (EntryState) -> Bool) -> [EntryState] {
        let keys = order.letGo(count) { key in byKey[key].map(canLetGo) ?? true }
        var out: [EntryState] = []
        out.reserveCapacity(keys.count)
        for key in keys {
            if let e = byKey.removeValue(forKey: key) { out.append(e) }
        }
        return out
    }

    /// Whether `key`'s entry was used again since it came in or the let-go order last passed it.
    func wasUsedAgain(_ key: CacheKey) -> Bool { order.wasUsed(key) }

    /// Takes the entry `handle` names out and marks it removed; nil if it was not there (removed
    /// already). What the removal returns is the caller's to carry out (fail the opens waiting).
    mutating func remove(_ handle: EntryHandle) -> (entry: EntryState, action: EntryStateMachine<EntryState.OpenCompletion>.RemoveAction)? {
        guard let e = self[handle] else { return nil }
        byKey.removeValue(forKey: handle.key)
        order.remove(handle.key)
        trusted.remove(FileID(entry: e.id, generation: e.info.generation))
        return (e, e.markRemoved())
    }

    /// Lets an idle entry go (the caller checked it idle and saved its row): it lives in the
    /// index only until it is loaded again.
    mutating func unload(_ handle: EntryHandle) {
        guard self[handle] != nil else { return }
        byKey.removeValue(forKey: handle.key)
        order.remove(handle.key)
    }

    enum LoadTurn { case inMemory, waiting, yours }

    /// Whether `key` must be loaded: it is in memory (`inMemory`), a load of it is under way and
    /// `then` runs once it ends (`waiting`), or the caller loads it and calls `loadEnded` (`yours`).
    mutating func loadTurn(_ key: CacheKey, then: (@Sendable () -> Void)?) -> LoadTurn {
        if byKey[key] != nil { return .inMemory }
        if loading[key] != nil {
            if let then { loading[key]!.append(then) }
            return .waiting
        }
        loading[key] = []
        return .yours
    }

    /// The load of `key` ended (the entry is in, or the index has none): what waited for it.
    mutating func loadEnded(_ key: CacheKey) -> [@Sendable () -> Void] {
        loading.removeValue(forKey: key) ?? []
    }

    /// A load of `key` is under way (another look-up joins it).
    func isLoading(_ key: CacheKey) -> Bool { loading[key] != nil }
}
