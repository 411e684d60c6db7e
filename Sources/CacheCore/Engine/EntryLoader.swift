import Foundation
import Logging

/// Entries in memory by what is in use: an entry lives in its shard's table while something
/// uses it (an open, a reader, a transfer, a read, a pin, an eviction or a check under way),
/// and, idle, up to the entry budget (`CacheConfiguration.entryMemoryBudget`), let go in the
/// order `LetGoOrder` keeps (SIEVE: a sweep does not push out what is used again and again); the
/// rest are in the index only, loaded again when looked up.
///
/// *What it owns.* The load of an entry from the index (`load`: its row, its current version's
/// extents and scan marks, its data file checked against them as the start's check did,
/// `StartupCheck.check`) and the letting go of idle ones (`trimEntries`). One load per key at a
/// time (`EntryTable.loadTurn`): the opens of a key being loaded wait for that load and run
/// when it ends. A loaded entry's generation, coverage and extents are the index's (committed
/// first: `CacheIndex.storedEntry`); its slices are checked against their checksums before
/// they are served (`unverified`) unless its data file was checked or written in this process
/// (`EntryTable.trusted`). The bytes, the scan share's bytes and the last generation of every
/// entry are counted at start from the index (`CacheLoad`), so a load or a let-go changes no total;
/// the status totals (`RunningTotals`) too, counted in the background (`countIndexEntries`): a
/// loaded entry is attached as counted already, one let go leaves its figures in them.
///
/// *Which thread runs it.* A load runs on the caller's thread for a blocking caller (a command,
/// an eviction round, `cachedInfo`), else as a job of `pool` (an open, a read of a reader whose
/// entry was let go, and `loadAhead`: a mount's folder opened file after file has its next
/// files loaded in one job, so their opens find them in memory, `FolderScanAhead`). The trim runs in the sweeper's job and after a load that passed the budget.
///
/// *What it may block on.* The index (a commit of what is pending, then reads) and one data
/// file's open and `SEEK_HOLE`s, never under a shard lock; a blocking load of a key another
/// thread is loading waits for that thread, which holds no engine lock while it loads.
final class EntryLoader: Sendable {
    private let configuration: CacheConfiguration
    private let shards: [Shard]
    private let store: SliceStore
    private let evictor: Evictor
    private let maintenance: Maintenance
    private let totals: RunningTotals
    private let openReaders: OpenReaders
    private let pool: BlockingIOPool
    private let logger: Logger
    /// The engine's test hook (`EngineCore.testHook`): a load about to begin.
    private let testHook: @Sendable () -> (@Sendable (EngineCore.Step) -> Void)?
    /// Where the scrub's walk through the index is: the last row id it loaded.
    private let scrubCursor = LockedValue<Int64>(0)

    init(configuration: CacheConfiguration, shards: [Shard], store: SliceStore, evictor: Evictor, maintenance: Maintenance,
         totals: RunningTotals, openReaders: OpenReaders, pool: BlockingIOPool, logger: Logger,
         testHook: @escaping @Sendable () -> (@Sendable (EngineCore.Step) -> Void)?) {
        self.configuration = configuration
        self.shards = shards
        self.store = store
        self.evictor = evictor
        self.maintenance = maintenance
        self.totals = totals
        self.openReaders = openReaders
        self.pool = pool
        self.logger = logger
        self.testHook = testHook
    }

    /// What an idle entry costs in memory: the budget is counted in entries of this size. Measured
    /// (the process's resident memory over 50,000 entries of a 4 KiB file put in a table as a load
    /// does: the entry, its strings and slice tables, its places in the table and `LetGoOrder`):
    /// 1,249 bytes each. A file of many slices or a long URL costs more; the budget is a size,
    /// not a promise to the byte.
    static let entryMemoryEstimate: Int64 = 1280

    /// Idle entries each shard keeps in memory at most.
    var idleEntriesPerShard: Int {
        max(1, Int(configuration.entryMemoryBudget / Self.entryMemoryEstimate) / shards.count)
    }

    /// Runs `body` once `key`'s entry is in memory, or the index has none: now, on this thread,
    /// when it is in memory already; else after a load, as a job of `pool`. `body` gets whether
    /// the index was asked (an entry still missing then is one the index has not).
    func whenLoaded(_ key: CacheKey, _ body: @escaping @Sendable (_ asked: Bool) -> Void) {
        let shard = shards.of(key)
        if shard.locked({ $0[key] != nil }) { return body(false) }
        pool.submit { [self] in
            // What waits for another load runs as a job of its own: the loader holds the
            // evictor's lock when eviction loads, which an open's probe may want.
            switch shard.locked({ $0.loadTurn(key, then: { [pool] in pool.submit { body(true) } }) }) {
            case .inMemory: body(false)
            case .waiting: break
            case .yours:
                load(key, shard: shard)
                body(true)
            }
        }
    }

    /// Loads the entries of `keys` not in memory, one after the other in one job of `pool`
    /// (`CacheEngine.loadAhead`): one in memory is skipped (`loadNow` looks first), one being
    /// loaded already is waited for, one the index has not is a look that finds nothing.
    func loadAhead(_ keys: [CacheKey]) {
        guard !keys.isEmpty else { return }
        pool.submit { [self] in
            for key in keys { loadNow(key) }
        }
    }

    /// Loads `key`'s entry from the index if it is not in memory, on this thread (waiting for
    /// another thread's load of it). Returns whether it is in memory now.
    /// `recent`: it comes in as the newest (an open, a command); false for a look (eviction's,
    /// the scrub's), which leaves it first in line to be let go.
    @discardableResult
    func loadNow(_ key: CacheKey, recent: Bool = true) -> Bool {
        guard loadInline(key, recent: recent) else { return true }
        return shards.of(key).locked { $0[key] != nil }
    }

    /// `loadNow`'s load; returns whether the index was asked (false: it was in memory).
    func loadInline(_ key: CacheKey, recent: Bool = true) -> Bool {
        let shard = shards.of(key)
        // Most calls find it in memory (every open of a cached file asks): no condition made.
        if shard.locked({ $0[key] != nil }) { return false }
        let done = ConditionLock(false)
        switch shard.locked({ $0.loadTurn(key, then: { done.withLock { $0 = true }; done.broadcast() }) }) {
        case .inMemory: return false
        case .waiting: done.wait(until: { $0 })
        case .yours: load(key, shard: shard, recent: recent)
        }
        return true
    }

    /// The load itself, by the holder of `key`'s turn: reads, checks, puts the entry in, ends
    /// the turn (running what waited for it).
    private func load(_ key: CacheKey, shard: Shard, recent: Bool = true) {
        testHook()?(.entryLoading(key))
        var stored: CacheIndex.StoredEntry?
        do { stored = try store.index.storedEntry(key: key.string) } catch {
            logger.warning("cannot read an entry from the cache index; it is fetched again", metadata: [
                "key": "\(key.string)", "error": "\(error)"])
        }
        var kept: [Int64: [Range<Int64>]] = [:]
        var unchecked: [Int64] = []
        var scans: [Int64] = []
        if let s = stored {
            let file = FileID(entry: s.row.id, generation: s.row.generation)
            let trusted = shard.locked { $0.trusted.contains(file) }
            var bySlice: [CacheIndex.SliceID: [CacheIndex.ExtentRow]] = [:]
            for x in s.extents { bySlice[.init(entryID: x.entryID, generation: x.generation, slice: x.slice), default: []].append(x) }
            var good = Set(bySlice.keys)
            if !trusted && !bySlice.isEmpty {
                good = checked(file, bySlice, scans: Set(s.scanSlices))
                unchecked = good.map(\.slice)
            }
            for sid in good { kept[sid.slice] = bySlice[sid]!.map { $0.start..<$0.end } }
            scans = s.scanSlices.filter { kept[$0] != nil }
        }
        let (waiting, over): ([@Sendable () -> Void], Bool) = shard.locked { entries in
            if let s = stored, entries[key] == nil {
                let e = EntryState(id: s.row.id, info: s.row.info, lastAccess: s.row.lastAccess)
                e.machine.loaded(s.row)
                for (slice, ranges) in kept { _ = e.machine.sliceLoaded(slice, extents: ranges) }
                e.uncheckedLoaded(unchecked)
                if evictor.scanShare.isOn { e.machine.scanSlicesLoaded(scans) }
                // Counted already as its row and extents are (the start's count, or what it
                // reported when let go); slices dropped by the check above leave the totals here.
                var stored = RangeSet()
                for x in s.extents { stored.insert(x.start..<x.end) }
                e.attach(to: totals, counted: EntryFigures(info: s.row.info, coverage: stored, withErrors: s.row.lastError != nil,
                                                           in: totals))
                entries.add(e, recent: recent)
            }
            // Past the budget by a quarter: let go now rather than at the sweeper's next second
            // (not for eviction's loads, which its round takes at once).
            return (entries.loadEnded(key), recent && entries.count > idleEntriesPerShard + idleEntriesPerShard / 4)
        }
        if !unchecked.isEmpty { maintenance.scrubAgain() }
        if over { pool.submit { [self] in trim(shard) } }
        // Each only submits a job or wakes a blocking loader (`whenLoaded`, `loadInline`).
        waiting.forEach { $0() }
    }

    /// Checks a data file of an entry loaded for the first time in this process against its
    /// rows; drops the rows of slices whose bytes are gone (and their bytes from the totals).
    /// Returns the slices kept.
    private func checked(_ file: FileID, _ bySlice: [CacheIndex.SliceID: [CacheIndex.ExtentRow]], scans: Set<Int64>) -> Set<CacheIndex.SliceID> {
        let check = StartupCheck(store: store.files, logger: logger, open: configuration.openDataFileForCheck)
        var outcome = StartupCheck.Outcome()
        _ = check.check(file, slices: Array(bySlice.keys), extents: bySlice, into: &outcome)
        guard !outcome.stale.isEmpty else { return outcome.kept }
        let stale = Array(outcome.stale)
        do {
            try store.index.deleteSlices(stale) {}
            var bytes: Int64 = 0, scanBytes: Int64 = 0
            for sid in stale {
                let n = bySlice[sid, default: []].reduce(0) { $0 + ($1.end - $1.start) }
                bytes += n
                if scans.contains(sid.slice) { scanBytes += n }
            }
            evictor.addBytes(-bytes)
            if evictor.scanShare.isOn { evictor.scanShare.add(-scanBytes) }
            logger.info("dropped the rows of cached bytes that are gone from disk", metadata: [
                "entry": "\(file.entry)", "slices": "\(stale.count)"])
        } catch {
            logger.warning("cannot drop rows of cached bytes that are gone; they are not served", metadata: ["error": "\(error)"])
        }
        return outcome.kept
    }

    /// Whether `e` may be let go: nothing uses it, nothing outside the lock names it. Call under
    /// its shard lock.
    func isIdle(_ e: EntryState) -> Bool {
        // Opens wait only for a probe, which is a transfer (`inflight`); every pin is of a slice
        // with bytes, or of one a read waits for or a write fills.
        guard e.isPersisted, e.waiters.isEmpty, e.inflight.isEmpty, e.pending.isEmpty, e.evicting.isEmpty,
              e.verifyQueued.isEmpty, !e.sliceBytes.keys.contains(where: e.isPinned) else { return false }
        return !openReaders.contains(e.key)
    }

    /// Lets idle entries of every shard go down to the budget (the sweeper's job).
    func trimEntries() {
        for shard in shards { trim(shard) }
    }

    /// Lets idle entries of `shard` go down to the budget, in one walk of the let-go order
    /// (`LetGoOrder`: those not used again since they came in first, so a sweep through more
    /// files than the budget holds does not push out the ones opened again and again); entries
    /// in use stay. Each saves its row (written behind; a load commits it before it reads).
    func trim(_ shard: Shard) {
        let limit = idleEntriesPerShard
        shard.locked { entries in
            guard entries.count > limit else { return }
            for e in entries.letGo(entries.count - limit, canLetGo: isIdle) {
                store.save(e)
                if e.unverified.isEmpty { entries.trusted.insert(FileID(entry: e.id, generation: e.info.generation)) }
                store.forgetFiles(of: e.handle)
            }
        }
    }

    /// The row of `key`'s entry, from memory or the index, without loading it (`cachedInfo`).
    func storedInfo(_ key: CacheKey) -> EntryInfo? {
        let (inMemory, known): (Bool, EntryInfo?) = shards.of(key).locked { entries in
            guard let e = entries[key] else { return (false, nil) }
            return (true, e.isPersisted ? e.info : nil)
        }
        if inMemory { return known }
        return (try? store.index.storedRow(key: key.string))?.info
    }

    /// Loads entries the index says were last read before `cutoff` and holds bytes of, up to a
    /// round (`Evictor.roundSlices`) of those not in memory: `--cache-max-age` evicts from memory.
    func loadReadBefore(_ cutoff: Double) {
        var after = -Double.infinity, loaded = 0
        for _ in 0..<4 where loaded < Evictor.roundSlices {
            guard let page = try? store.index.keysReadBefore(cutoff, limit: Evictor.roundSlices, after: after),
                  !page.isEmpty else { return }
            for (k, access) in page {
                after = access
                let key = CacheKey(rawValue: k)
                if !shards.of(key).locked({ $0[key] != nil }) {
                    loadNow(key)
                    loaded += 1
                }
            }
        }
    }

    /// The scrub's walk through the index (`Maintenance.scrubOne`): loads the next entries in row
    /// order, as eviction does (first in line to be let go), until one has unchecked slices or
    /// 256 rows were looked at. False once the walk reached the end of the index.
    func loadNextToScrub() -> Bool {
        let after = scrubCursor.withLock { $0 }
        guard let page = try? store.index.keyPage(after: after, limit: 256), let last = page.last else { return false }
        for (id, k) in page {
            scrubCursor.withLock { $0 = id }
            let key = CacheKey(rawValue: k)
            let shard = shards.of(key)
            if shard.locked({ $0[key] != nil }) { continue }
            loadNow(key, recent: false)
            if shard.locked({ $0[key].map { !$0.unverified.isEmpty } ?? false }) { return true }
        }
        scrubCursor.withLock { $0 = last.id }
        return true
    }
}
