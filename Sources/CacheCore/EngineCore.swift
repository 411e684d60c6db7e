import Foundation
import Atomics
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The engine's moving parts behind `CacheEngine`'s public face.
///
/// State is sharded by cache key: each `Shard` has its own lock, so readers of unrelated files never
/// contend. Disk and network I/O never happen under a shard lock (an entry's id is handed out in
/// memory, its row written behind), nor under `evictionLock`, which guards only the choice of
/// slices to evict. Threads (docs/threads.md): completions of reads that waited, checksum checks,
/// chunked reads, the sweeper's eviction and removals run as jobs on `pool`, the engine's one
/// bounded pool for blocking I/O (not Swift's cooperative pool, not a thread per call); slice
/// writes run on `writes` (WriteQueue's lanes), never on the fetch thread; the sweeper is a GCD
/// timer that fails late reads and submits the rest. No job of `pool` waits for another job of
/// it: each hands its result on by calling or submitting, never by blocking.
///
/// Files: this one holds setup, metadata (open, probe, remote change); `+Read` the read path;
/// `+Fetch` the sink that takes arriving bytes and writes them on its lane; `+Eviction` the cap;
/// `+Maintenance` list/remove/verify.
final class EngineCore: Sendable {
    /// The configuration in force; `sliceSize` is the one the cache was created with.
    let configuration: CacheConfiguration
    let source: RangeSource
    /// Which origins are down: an entry of one is served as cached, not revalidated.
    let originHealth: OriginHealthSource?
    let logger: Logger
    let metrics: CacheMetrics
    let store: DataFiles
    let index: CacheIndex
    /// Ranges the user pinned (`preload --pin`), which eviction leaves alone.
    let userPins: PinTable
    let directoryLock: DirectoryLock
    let shards: [Shard]
    /// The engine's one pool for blocking I/O (`CacheConfiguration.blockingIOThreads`): answers
    /// of reads that waited (they open the data file), failures of reads, open answers, checksum
    /// checks (`verifyKey`: one at a time, in order), chunked reads (`ChunkedRead`), the
    /// sweeper's maintenance (one at a time: `sweeping`) and removals. Its jobs never wait for
    /// one another.
    let pool: BlockingIOPool
    /// Read descriptors of data files that readers closed, for the next reader of that version.
    let idleFiles = IdleDataFiles()
    /// The keys of the URLs opened lately: the proxy opens its entry on every request, and a key
    /// is a function of the URL and the rules, which never change for the engine's life.
    let recentKeys = RecentResults<CacheKey>(capacity: 256)
    /// Checks of slices from before this start run one at a time, in the order asked
    /// (`EngineCore+Verify`): the serial queue they had, as a key of `pool`.
    static let verifyKey: UInt64 = 1
    /// The sweeper's once-a-second maintenance job (eviction, max age, index rows) is queued or
    /// running: the next tick skips it rather than pile up behind a slow disk, so there is one
    /// at a time.
    let sweeping = ManagedAtomic<Bool>(false)
    /// The scrub has a check queued or running.
    let scrubbing = ManagedAtomic<Bool>(false)
    /// The scrub found nothing left to check.
    let scrubDone = ManagedAtomic<Bool>(false)

    var initialReadAhead: Int64 { configuration.initialReadAhead }
    /// Bytes fetched ahead of time when an entry is first opened (file headers, a moov atom start).
    let probeLength: Int64 = 256 << 10
    /// How far a body without a length may run before it is taken for an endless stream (an
    /// internet radio station, a hostile origin) and stopped: half the capacity, so such a body
    /// can neither evict more than half of what the cache holds nor download forever.
    var unknownLengthLimit: Int64 { max(configuration.capacity / 2, configuration.sliceSize) }

    /// The engine's small shared state, under one leaf lock (never held around another lock).
    private struct Counters {
        var nextID = 1
        /// The last generation handed out. Generations are unique in the process, not only per
        /// entry: an entry removed and made anew for the same URL (`cache rm`, a playlist refresh)
        /// must not start again at a version its old readers are bound to. Above every stored one.
        var lastGeneration: Int64 = 0
        var observers: [@Sendable (EntryInfo) -> Void] = []
        /// Bytes on disk across all entries.
        var totalBytes: Int64 = 0
        var testHook: (@Sendable (Step) -> Void)?
        /// When a transfer last warned that it could not cache (a full disk): once a minute is enough.
        var lastNoRoomWarning = 0.0
        /// Origins whose ETags changed while length and Last-Modified did not (`differs`).
        var rotatingETagOrigins: Set<String> = []
        /// Entries whose last answer carried a `DAV:` header (`answeredDAV`).
        var davEntries: Set<CacheKey> = []
    }
    private let counters = LockedValue(Counters())
    private let sweeper = LockedValue<DispatchSourceTimer?>(nil)
    /// Transfers whose sink has not finished yet, so shutdown can wait for their last extents
    /// (broadcast when one finishes). Not a `DispatchGroup`: one freed while a sink that never
    /// finished had entered it ends the process.
    let activeSinks = ConditionLock(0)
    /// Held by whoever chooses slices to evict (one at a time); never across their punches or
    /// their index commit (`EngineCore+Eviction`).
    let evictionLock = NSLock()
    /// Eviction rounds whose holes are being punched, which a writer needing room waits for.
    let rounds = EvictionRounds()
    /// Evicted slices whose rows are still to be deleted (their commit failed on a full disk).
    /// A leaf lock: `finishEvictions` takes them out before it commits.
    let unfinishedEvictions = LockedValue<[EvictedSlice]>([])
    /// The oldest slices of eviction's last scan, which its next rounds take from.
    let evictionQueue = EvictionQueue()
    /// How the process before this one left the cache (logged at start).
    let previousStop: CacheIndex.PreviousStop
    /// Points where tests interleave other work deterministically (a removal while a transfer
    /// writes, a write while an eviction commits). Nil outside tests.
    enum Step { case sinkWillWrite(offset: Int64), evictionFreedSlices }
    var testHook: (@Sendable (Step) -> Void)? {
        get { counters.withLock { $0.testHook } }
        set { counters.withLock { $0.testHook = newValue } }
    }
    /// Writes arriving bytes off the fetch thread.
    let writes: WriteQueue
    /// The memory of arriving bytes: what waits for the writer, and what reads hold.
    let memory: MemoryBudget
    /// Bytes transfers may write before the cap and free space are looked at again.
    let space = SpaceAllowance()
    /// Entries with an open reader, which `--cache-max-age` leaves alone.
    let openReaders = OpenReaders()

    init(configuration: CacheConfiguration, source: RangeSource, logger: Logger, metrics: CacheMetrics = CacheMetrics(),
         originHealth: OriginHealthSource? = nil) throws {
        self.metrics = metrics
        self.originHealth = originHealth
        var configuration = configuration
        self.source = source
        self.logger = logger
        let dir = configuration.directory
        do {
            try PrivateDirectory.make(dir, logger: logger)
            try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw CacheError.storage(path: dir, message: "cannot create the cache directory: \((error as? StorageError)?.message ?? error.localizedDescription)")
        }
        // The directory is held open from here on: the lock, the data files and the index's
        // reserve are named relative to it (`HeldDirectory`), and the owner lock outside it
        // keeps a second process off the path even after a delete (`DirectoryLock`).
        let held: HeldDirectory
        do { held = try HeldDirectory(path: dir) } catch {
            throw CacheError.storage(path: dir, message: "cannot open the cache directory: \((error as? StorageError)?.message ?? "\(error)")")
        }
        directoryLock = try DirectoryLock(directory: held, note: { [logger] in logger.notice("\($0)") })
        do { try DataFiles.checkHolePunching(in: held) } catch {
            directoryLock.release()
            throw error
        }
        configuration.keyRules.credentialKey = CredentialKey.load(directory: dir)
        do {
            index = try CacheIndex.openSettingAsideIfDamaged(path: dir + "/index.sqlite", held: held, logger: logger)
        } catch {
            directoryLock.release()
            throw CacheError.storage(path: dir + "/index.sqlite", message: "\(error)")
        }
        do {
            let stored = try index.sliceSize(proposed: configuration.sliceSize)
            if stored != configuration.sliceSize {
                logger.notice("this cache was created with another slice size; keeping it", metadata: [
                    "slice_size": "\(stored)", "requested": "\(configuration.sliceSize)"])
                configuration.sliceSize = stored
            }
        } catch {
            directoryLock.release()
            throw CacheError.storage(path: dir + "/index.sqlite", message: "\(error)")
        }
        do {
            userPins = PinTable(try index.loadPins(), sliceSize: configuration.sliceSize)
        } catch {
            directoryLock.release()
            throw CacheError.storage(path: dir + "/index.sqlite", message: "cannot read the pinned ranges: \(error)")
        }
        try? index.recordCapacity(configuration.capacity)
        previousStop = (try? index.beginUse()) ?? .unknown
        index.onWriteError = { [logger] error in
            logger.error("the cache index could not be written; recent bytes may be fetched again after a restart",
                         metadata: ["error": "\(error)"])
        }
        self.configuration = configuration
        pool = BlockingIOPool(name: "httpcachefs-io", threads: max(1, configuration.blockingIOThreads))
        store = DataFiles(held: held, sliceSize: configuration.sliceSize)
        memory = MemoryBudget(limits: .init(queued: configuration.writeBudget, perTransfer: configuration.writeBudgetPerTransfer,
                                            retained: configuration.readRetentionBudget))
        writes = WriteQueue(lanes: 2, memory: memory)
        shards = (0..<max(1, configuration.shardCount)).map { _ in Shard() }
        try load()
        holdPinsUnderTheCap()
        switch previousStop {
        case .clean: logger.info("cache opened after a clean stop", metadata: ["directory": "\(dir)"])
        case .unclean: logger.notice("cache opened after an unclean stop (the last process did not close it)", metadata: ["directory": "\(dir)"])
        case .unknown: logger.debug("cache opened", metadata: ["directory": "\(dir)"])   // new: nothing to say
        }
        startSweeper()
    }

    func shutdown() {
        sweeper.withLock { $0?.cancel() }
        for shard in shards {
            let (fetches, waiting): ([FetchHandleBox], [Waiter.Completion]) = shard.locked { entries in
                var f: [FetchHandleBox] = [], w: [Waiter.Completion] = []
                for e in entries.all {
                    w += e.waiters.map(\.completion)
                    e.waiters = []
                    for id in e.inflight.removeAll() { if let h = handles.remove(id) { f.append(h) } }
                    if e.isPersisted { e.saveRow(to: index) }   // only those that changed
                }
                return (f, w)
            }
            fetches.forEach { $0.cancel() }
            waiting.forEach { done in pool.submit { done(.failure(.cancelled)) } }
        }
        // Transfers hand their last extent to the index when they finish: wait for them (briefly),
        // or bytes already on disk would not be recorded.
        _ = activeSinks.wait(until: { $0 == 0 }, timeout: 5)
        writes.stop()
        // The cancelled reads' answers run, and so does a maintenance job or a check already
        // queued, while the index is still open; a job submitted later (a transfer's last
        // callback) runs on its caller's thread.
        pool.finish()
        do {
            try index.close()
        } catch {
            index.flush()
            logger.warning("the cache index could not be closed; the next start will check the cache as after a crash",
                           metadata: ["error": "\(error)"])
        }
        directoryLock.release()
    }

    // MARK: Ids, shards, counters

    func makeID() -> Int {
        counters.withLock { c in
            c.nextID += 1
            return c.nextID
        }
    }

    /// A generation no reader in this process was ever bound to.
    func makeGeneration() -> Int64 {
        counters.withLock { c in
            c.lastGeneration += 1
            return c.lastGeneration
        }
    }

    func shard(for key: CacheKey) -> Shard { shards[Int(key.stableHash % UInt64(shards.count))] }

    var totalBytes: Int64 { counters.withLock { $0.totalBytes } }

    func addBytes(_ n: Int64) {
        counters.withLock { $0.totalBytes += n }
    }

    /// Running transfers' handles, by fetch id (the table itself is pure state).
    let handles = HandleTable()

    /// True at most once a minute: whether a full disk is worth a warning now.
    func shouldWarnNoRoom(now: Double) -> Bool {
        return counters.withLock { c in
            guard now - c.lastNoRoomWarning >= 60 else { return false }
            c.lastNoRoomWarning = now
            return true
        }
    }

    // MARK: Metadata

    func cachedInfo(url: String) -> EntryInfo? {
        guard let key = try? configuration.keyRules.key(for: url) else { return nil }
        let shard = shard(for: key)
        return shard.locked { $0[key].flatMap { $0.isPersisted ? $0.info : nil } }
    }

    func addChangeObserver(_ h: @escaping @Sendable (EntryInfo) -> Void) {
        counters.withLock { $0.observers.append(h) }
    }

    func notifyChanged(_ info: EntryInfo) {
        let obs = counters.withLock { $0.observers }
        pool.submit { obs.forEach { $0(info) } }
    }

    /// Resolves metadata: fresh entries answer at once (on the caller's thread with
    /// `answerFreshInline`, else as a job of `pool`); unknown or stale ones start a probe (a
    /// small ranged GET whose head carries the validators and whose bytes are cached).
    func open(url: String, maxAge: TimeInterval, takeFirstBytes: Bool = true, answerFreshInline: Bool = false,
              unknownLengthLimit: Int64? = nil, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        let key: CacheKey
        do { key = try recentKeys.value(for: url) { try configuration.keyRules.key(for: $0) } } catch {
            let e = error as? CacheError ?? .invalidURL(url, reason: "\(error)")
            pool.submit { completion(.failure(e)) }
            return
        }
        let shard = shard(for: key)
        let originDown = originHealth?.isDown(url: url) ?? false
        let (answer, probe, skipped) = shard.locked { entries -> (Result<EntryInfo, CacheError>?, Launch?, Bool) in
            // The clock is read under the lock: a transfer may confirm the entry (validatedAt)
            // just before, and an age read earlier would come out negative, hence "fresh".
            let now = configuration.clock()
            let entry: EntryState
            if let existing = entries[key] {
                entry = existing
            } else {
                let info = EntryInfo(key: key, url: url, finalURL: url, length: nil, contentType: nil, etag: nil,
                                     lastModified: nil, acceptsRanges: true, generation: makeGeneration(),
                                     validatedAt: .distantPast)
                entry = EntryState(id: -1, info: info, lastAccess: now.timeIntervalSince1970)
                entries.add(entry)
            }
            if let limit = unknownLengthLimit { entry.unknownLengthLimit = min(limit, entry.unknownLengthLimit ?? limit) }
            let freshness = EntryMachine.Freshness(maxAge: maxAge, lengthKnown: entry.info.length != nil,
                                                   age: now.timeIntervalSince(entry.info.validatedAt),
                                                   originDown: originDown, live: entry.isPersisted)
            switch entry.machine.openRequested(completion, fresh: freshness.fresh, makeFetchID: makeID) {
            case .answer:
                return (.success(entry.info), nil, freshness.offline)
            case .cancel:
                return (.failure(.cancelled), nil, false)
            case .wait:
                return (nil, nil, false)
            case let .startProbe(id):
                entry.info.url = url
                let fetch = EntryMachine.probeFetch(takeFirstBytes: takeFirstBytes, coverage: entry.coverage,
                                                    length: entry.info.length, probeLength: probeLength)
                entry.inflight.start(id: id, generation: entry.info.generation, start: 0, end: fetch.end, reader: nil, pinned: true,
                                     priority: .waiting, now: now.timeIntervalSince1970)
                return (nil, Launch(entry: entry.handle, fetch: fetch, id: id), false)
            }
        }
        if skipped {
            logger.info("origin down: revalidation skipped, serving the cached copy", metadata: ["url": "\(DisplayURL.redacted(url))"])
        }
        if let answer {
            if answerFreshInline, case .success = answer { completion(answer) } else { pool.submit { completion(answer) } }
            return
        }
        if let probe { launch(probe) }
    }

    /// Answers opens (call under the shard lock); completions run later.
    func answer(_ opens: [EntryState.OpenCompletion], _ result: Result<EntryInfo, CacheError>) {
        guard !opens.isEmpty else { return }
        pool.submit { opens.forEach { $0(result) } }
    }

    /// Answers opens as the entry's state machine said (call under the shard lock).
    func answer(_ answer: EntryStateMachine<EntryState.OpenCompletion>.Answer?, entry: EntryState, url: String) {
        guard let answer else { return }
        switch answer.with {
        case .info:
            self.answer(answer.opens, .success(entry.info))
        case let .staleCopy(cause):
            logger.warning("origin unavailable; serving the cached copy", metadata: ["url": "\(url)", "error": "\(cause)"])
            self.answer(answer.opens, .success(entry.info))
        case let .failure(cause):
            self.answer(answer.opens, .failure(cause))
        case .noLength:
            self.answer(answer.opens, .failure(.badResponse(url: url, message: "no length")))
        }
    }

    /// True when `head` describes a different version than `info` (call with a known info). An
    /// ETag that changed alone (same length and Last-Modified) with evidence that the origin's
    /// ETags rotate (`ResponseHead.etagRotating`) marks the origin: logged once, its versions then
    /// compared without ETags, and its entries' `If-Range` carries Last-Modified. Without such
    /// evidence it is a change, as any other.
    func differs(_ info: EntryInfo, _ head: ResponseHead) -> Bool {
        var ignoreETag = ignoresETag(url: info.url)
        if !ignoreETag, head.etagRotating,
           RemoteVersion.etagRotated(etag: info.etag, lastModified: info.lastModified, length: info.length,
                                     to: head.etag, head.lastModified, head.totalLength) {
            noteRotatingETags(info.url)
            ignoreETag = true
        }
        return RemoteVersion.changeReason(etag: info.etag, lastModified: info.lastModified, length: info.length,
                                          to: head.etag, head.lastModified, head.totalLength, ignoringETag: ignoreETag) != nil
    }

    /// A probe's whole answer that names no version and no length (nginx's chunked autoindex
    /// page) cannot show that the cached version is still the origin's: taken as the same, its
    /// bytes were written over the cached copy while the entry kept the old length, so a listing
    /// that grew was read cut at the old length (`refresh` never showed a new file) and one that
    /// shrank kept the old copy's tail. The probe starts a new version, whose length its end
    /// gives. (Only a probe: a read's transfer of such a file is the version the probe bound.)
    ///
    /// A listing page's probe (`EntryState.isListingPage`: a refresh, a listing past its TTL)
    /// that names no version cannot confirm it either, length or not: a page changed to one of
    /// the same length (a size "300" become "400", a name swapped for one as long) looked like
    /// the same version, the whole answer's bytes were dropped as cached already, and the
    /// refresh served the old page as a success. Its answer is the page's new version, read
    /// anew (a 206 of it is asked again as a new version's).
    static func cannotConfirm(_ head: ResponseHead, listingPage: Bool = false) -> Bool {
        guard head.etag == nil, head.lastModified == nil else { return false }
        if listingPage { return head.status == 200 || head.status == 206 }
        return head.status == 200 && head.totalLength == nil
    }

    /// Versions of this entry are compared without ETags (`--ignore-etag`, or its origin's ETags rotate).
    func ignoresETag(url: String) -> Bool {
        configuration.ignoreETag || hasRotatingETags(url)
    }

    /// The `If-Range` validator for the entry's version: Last-Modified where ETags are ignored.
    func ifRangeValidator(_ info: EntryInfo) -> String? {
        ignoresETag(url: info.url) ? info.lastModified : info.ifRangeValidator
    }

    /// "scheme://host:port" of a URL: what "an origin" is for rotating ETags.
    static func originName(_ url: String) -> String {
        recentOriginNames.value(for: url) { url in
            guard let c = URLComponents(string: url), let host = c.host else { return url }
            return "\(c.scheme ?? "http")://\(host.lowercased())" + (c.port.map { ":\($0)" } ?? "")
        }
    }

    /// `originName` is asked several times per fetch (health, rotating ETags, If-Range).
    private static let recentOriginNames = RecentResults<String>()

    func hasRotatingETags(_ url: String) -> Bool {
        let origin = Self.originName(url)
        return counters.withLock { $0.rotatingETagOrigins.contains(origin) }
    }

    private func noteRotatingETags(_ url: String) {
        let origin = Self.originName(url)
        let first = counters.withLock { $0.rotatingETagOrigins.insert(origin).inserted }
        if first {
            logger.notice("the origin's ETags change on every answer; using length and Last-Modified", metadata: [
                "origin": "\(origin)", "url": "\(url)"])
        }
    }

    /// Copies what the origin said into the entry (call under the shard lock).
    func adopt(_ head: ResponseHead, into entry: EntryState) {
        entry.info.finalURL = head.finalURL
        if let length = head.totalLength { entry.info.length = length }
        entry.info.contentType = head.contentType
        entry.info.etag = head.etag
        entry.info.lastModified = head.lastModified
        entry.info.acceptsRanges = head.acceptsRanges || head.status == 206
        entry.info.validatedAt = Date()
        noteDAV(head.webDAV, key: entry.info.key)
    }

    /// Records whether `key`'s last answer carried a `DAV:` header. Bounded: forgetting only
    /// costs a folder its PROPFIND until its next answer.
    private func noteDAV(_ webDAV: Bool, key: CacheKey) {
        counters.withLock { c in
            if webDAV {
                if c.davEntries.count > 100_000 { c.davEntries.removeAll() }
                c.davEntries.insert(key)
            } else {
                c.davEntries.remove(key)
            }
        }
    }

    /// True when `url`'s last answer (in this process) carried a `DAV:` header.
    func answeredDAV(url: String) -> Bool {
        guard let key = try? configuration.keyRules.key(for: url) else { return false }
        return counters.withLock { $0.davEntries.contains(key) }
    }

    /// The remote file changed: start a new generation. Old slices are dropped (rows first, files
    /// after), running fetches of the old generation are cancelled, and reads still waiting for
    /// the old version fail (their readers are bound to it). Call under the shard lock.
    func startNewGeneration(_ entry: EntryState, head: ResponseHead, keeping fetchID: Int) -> [FetchHandleBox] {
        let old = entry.info.generation
        // A listing page that changed (an autoindex page has no validators, so every re-read is a
        // new version) is told at debug level only and counted nowhere: changes count files.
        let isFile = !entry.isListingPage
        logger.log(level: isFile ? .notice : .debug,
                   isFile ? "remote file changed; dropping cached bytes" : "listing page changed; dropping its cached copy", metadata: [
            "url": "\(entry.info.url)", "etag": "\(entry.info.etag ?? "-") -> \(head.etag ?? "-")",
            "length": "\(entry.info.length.map(String.init) ?? "?") -> \(head.totalLength.map(String.init) ?? "?")"])
        entry.info.generation = makeGeneration()
        entry.info.length = nil
        adopt(head, into: entry)
        addBytes(-entry.coverage.count)
        entry.coverage = RangeSet()
        entry.unreadAhead = RangeSet()
        entry.unverified = []
        entry.verifyQueued = []
        entry.pending.removeAll()
        entry.sliceBytes = [:]
        entry.sliceAccess = [:]
        entry.resetPins()
        idleFiles.dropAll(of: entry.handle)
        failStaleWaiters(entry)
        let cancelled = entry.inflight.removeAll(generation: old, keeping: fetchID).compactMap { handles.remove($0) }
        let id = entry.id, store = store, newGen = entry.info.generation
        if entry.isPersisted {
            entry.saveRow(to: index)
            index.deleteOtherGenerations(entryID: id, keep: newGen) {
                store.remove(entry: id, generation: old)
            }
        }
        if isFile { notifyChanged(entry.info) }
        return cancelled
    }

    // MARK: Startup

    /// Loads the index into memory, dropping extents whose files are gone or were being evicted
    /// when a previous process died, and deleting data files (and punching slices) that no row
    /// describes; what cannot be checked is kept (`StartupCheck`).
    private func load() throws {
        let loaded: (entries: [CacheIndex.EntryRow], extents: [CacheIndex.ExtentRow])
        do { loaded = try index.loadAll() } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "\(error)")
        }
        // Each entry is made in its shard's table, under its lock (the table is a `LockedValue`):
        // what the steps below need of it is its key and version, by row id.
        var byID: [Int64: (key: CacheKey, generation: Int64)] = [:]
        for r in loaded.entries {
            let info = r.info
            shard(for: info.key).locked { entries in
                let e = EntryState(id: r.id, info: info, lastAccess: r.lastAccess)
                e.hits = r.hits; e.misses = r.misses; e.bytesFromCache = r.bytesFromCache; e.bytesFromOrigin = r.bytesFromOrigin
                if let err = r.lastError { e.recentErrors = [err] }
                e.savedRow = e.row()
                entries.add(e)
            }
            byID[r.id] = (info.key, info.generation)
            counters.withLock { $0.lastGeneration = max($0.lastGeneration, info.generation) }
        }
        // Slice files of the layout before data files are moved in first.
        let check = StartupCheck(store: store, logger: logger, open: configuration.openDataFileForCheck)
        for bucket in check.listed(store.dataDirectory) ?? [] {
            let dir = store.dataDirectory + "/" + bucket
            for name in check.listed(dir) ?? [] {
                if let p = DataFiles.parseLegacySlice(fileName: name) {
                    migrate(slice: dir + "/" + name, p.slice, into: p.entry, p.generation)
                } else if name.hasSuffix(".evicting") {
                    unlink(dir + "/" + name)   // an eviction of the old layout that did not finish
                }
            }
        }
        var extentsBySlice: [CacheIndex.SliceID: [CacheIndex.ExtentRow]] = [:]
        for x in loaded.extents {
            extentsBySlice[.init(entryID: x.entryID, generation: x.generation, slice: x.slice), default: []].append(x)
        }
        let outcome = check.run(extents: extentsBySlice) { file in byID[file.entry]?.generation == file.generation }
        for (entryID, kept) in Dictionary(grouping: outcome.kept, by: \.entryID) {
            guard let key = byID[entryID]?.key else { continue }
            shard(for: key).locked { entries in
                guard let e = entries[key] else { return }
                for sid in kept {
                    for x in extentsBySlice[sid] ?? [] {
                        let added = e.coverage.insert(x.start..<x.end)
                        e.sliceBytes[x.slice, default: 0] += added
                        addBytes(added)
                    }
                    e.sliceAccess[sid.slice] = e.lastAccess
                    e.unverified.insert(sid.slice)
                }
            }
        }
        let stale = outcome.stale, orphans = outcome.orphans
        if !stale.isEmpty || !orphans.isEmpty || outcome.unusedSlices > 0 {
            logger.info("cleaning the cache: dropping rows whose bytes are gone, deleting what no row describes", metadata: [
                "stale_slices": "\(stale.count)", "orphan_files": "\(orphans.count)", "unused_slices": "\(outcome.unusedSlices)"])
            try? index.deleteSlices(Array(stale)) {
                for f in orphans { store.remove(entry: f.entry, generation: f.generation) }
            }
        }
        if outcome.unchecked > 0 {
            logger.warning("some cached files could not be checked at start and were kept as they were",
                           metadata: ["unchecked": "\(outcome.unchecked)"])
        }
    }

    /// Moves a slice file of the layout before data files into its data file (start only). The
    /// slice file is gone afterwards; bytes that did not make it read as a hole, whose rows are
    /// then dropped (and the bytes fetched again).
    private func migrate(slice path: String, _ slice: Int64, into entry: Int64, _ generation: Int64) {
        defer { unlink(path) }
        let from = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard from >= 0 else { return }
        defer { Glibc.close(from) }
        guard let to = try? store.openForWriting(entry: entry, generation: generation) else { return }
        defer { Glibc.close(to) }
        var st = stat()
        guard fstat(from, &st) == 0 else { return }
        var inOffset = off_t(0), outOffset = off_t(slice * configuration.sliceSize)
        var left = Int(st.st_size)
        while left > 0 {
            let n = LinuxFileCalls.copyFileRange(from: from, at: &inOffset, to: to, at: &outOffset, length: left)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            left -= n
        }
    }

    // MARK: Read timeouts

    /// The sweeper: a GCD timer at 4 Hz that fails reads past their deadline (shard locks only,
    /// microseconds; their answers are submitted to `pool`) and, once a second, submits one
    /// maintenance job to `pool` (`sweep`), skipped while the last one has not finished. It does
    /// no disk I/O on the timer's thread.
    private func startSweeper() {
        // Made under the lock that keeps it: the timer and its handler never leave it.
        sweeper.withLock { sweeper in
            let t = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "httpcachefs.cache.sweeper"))
            t.schedule(deadline: .now() + 0.25, repeating: 0.25)
            var ticks = 0
            t.setEventHandler { [weak self] in
                guard let self else { return }
                self.expireWaiters()
                self.expireOpens()
                ticks += 1
                if ticks % 4 == 0, !self.sweeping.exchange(true, ordering: .acquiring) {
                    let writeStats = ticks % 20 == 0
                    self.pool.submit { [weak self] in
                        guard let self else { return }
                        self.sweep(writeStats: writeStats)
                        self.sweeping.store(false, ordering: .releasing)
                    }
                }
            }
            t.resume()
            sweeper = t
        }
    }

    /// The sweeper's second: eviction at the cap and the free-space floor (the floor can be
    /// crossed by other programs' files, so it is looked at even while nothing is written),
    /// `--cache-max-age`, evictions whose index commit failed, the index's reserve once a full
    /// disk has room for it again, the scrub's next slice, and every fifth second the read
    /// statistics rows. A job of `pool`.
    func sweep(writeStats: Bool) {
        evictIfNeeded()
        evictExpired(now: configuration.clock())
        scrubOne()
        finishEvictions()
        if !index.hasReserve, roomLeft() > 2 * Int64(CacheIndex.reserveSize) { index.makeReserve() }
        if writeStats {
            writeReadStats()
            checkDirectory()
        }
    }

    /// Set once the cache directory was found deleted or replaced (`checkDirectory`).
    let directoryLost = ManagedAtomic<Bool>(false)

    /// Says once, as an error, that the cache directory was deleted or replaced under the running
    /// engine; returns why (nil while it is in place). Every five seconds, from the sweeper.
    @discardableResult
    func checkDirectory() -> String? {
        guard let why = directoryLock.displaced() else { return nil }
        if !directoryLost.exchange(true, ordering: .relaxed) {
            logger.error("the cache directory was deleted or replaced while this daemon runs: files already open are still read, but nothing new is kept, and 'httpcachefs status' no longer finds this daemon; stop it and start it again", metadata: [
                "directory": "\(configuration.directory)", "why": "\(why)",
            ])
        }
        return why
    }

    /// At start: the pins learn their files' lengths (a pin's last slice ends at its file's
    /// end), and pins that keep more than half the cap (pinned under a larger cap, a restart with
    /// a smaller `--cache-size`) are released, whole files at a time, until they fit, so the cap
    /// holds with pins in every case. Said as a warning, with the way to pin again.
    func holdPinsUnderTheCap() {
        for (key, set) in userPins.all() {
            if let length = shard(for: key).locked({ $0[key]?.info.length }) { userPins.set(key, set, length: length) }
        }
        let limit = configuration.capacity / 2
        guard userPins.totalBytes > limit else { return }
        var released: [String] = []
        for key in userPins.all().keys.sorted(by: { $0.string > $1.string }) where userPins.totalBytes > limit {
            do { try index.setPins(key: key.string, []) } catch { break }
            userPins.set(key, RangeSet())
            released.append(key.string)
        }
        logger.warning("pins kept more than half the cache's cap; released the pins of some files so that the cap holds (pin them again with a larger --cache-size)", metadata: [
            "released": "\(released.count)", "pinned": "\(userPins.totalBytes)", "limit": "\(limit)"])
    }

    /// Hands the rows of entries read since the last call to the index (batched behind, as every
    /// index write): last access and hit counts would otherwise reach it only with the next fetch.
    func writeReadStats() {
        for shard in shards {
            let rows: [CacheIndex.EntryRow] = shard.locked { entries in
                var out: [CacheIndex.EntryRow] = []
                for e in entries.all where e.readStatsDirty {
                    e.readStatsDirty = false
                    if e.isPersisted { out.append(e.row()) }
                }
                return out
            }
            rows.forEach(index.updateEntry)
        }
    }

    /// Opens not answered yet (`CacheEngine.open`), each with its deadline: the sweeper fails
    /// those past it with `.timeout` and drops those answered meanwhile.
    let waitingOpens = LockedValue<[(deadline: Double, url: String, answer: AnswerOnce<Result<EntryInfo, CacheError>>)]>([])

    /// Entries whose every open timed out, each with the URL last asked and the time its
    /// transfer is stopped if no open comes for it meanwhile (`expireOpens`). By key, not URL: an
    /// open of another URL of the same file (a rotating token left out with `--ignore-query`)
    /// waits on the same transfer.
    let abandonedOpens = LockedValue<[CacheKey: (url: String, at: Double)]>([:])

    /// How long a transfer whose opens all timed out goes on without anyone waiting. An open
    /// waits for the end of a body without a length, so a slow one (a generated file) fails
    /// its first open while its download goes on, and an open again within this time finds it
    /// done or nearer; an endless one (a radio station) is stopped, instead of downloading up
    /// to half the cache's capacity for nobody.
    static let abandonedTransferGrace: Double = 60

    /// Fails opens past their deadline (`waitingOpens`); their answers are submitted to `pool`.
    /// A URL left with no open waiting has its transfer without a length stopped
    /// `abandonedTransferGrace` later, unless an open for it comes meanwhile (`OpenDeadlines`).
    func expireOpens(now: Double = Date().timeIntervalSince1970) {
        let (late, stop) = waitingOpens.withLock { opens in
            // Under the same lock as the opens: an open registered meanwhile is seen here.
            abandonedOpens.withLock { abandoned in
                OpenDeadlines.tick(opens: &opens, abandoned: &abandoned, now: now, grace: Self.abandonedTransferGrace,
                                   isAnswered: { $0.isAnswered },
                                   key: { try? self.recentKeys.value(for: $0) { try self.configuration.keyRules.key(for: $0) } })
            }
        }
        for (url, answer) in late {
            // An open of a file the cache holds that timed out waiting on its check (an origin
            // that accepts and never answers) gets the cached copy, as for an origin known to be
            // down: it failed with EIO, because the transfer's own timeout (the same length)
            // came a moment after the open's, and only then was the origin marked down.
            if let info = cachedInfo(url: url), info.length != nil {
                logger.warning("the origin did not answer the open's check in time; serving the cached copy",
                               metadata: ["url": "\(DisplayURL.redacted(url))"])
                pool.submit { answer.fire(.success(info)) }
                continue
            }
            logger.warning("open timed out", metadata: ["url": "\(DisplayURL.redacted(url))"])
            pool.submit { answer.fire(.failure(.timeout(url: url))) }
        }
        for url in stop { stopTransfersWithoutLength(url: url) }
    }

    /// Cancels the transfers of `url`'s entry while its length is unknown: no open was answered
    /// (an open waits for the end of such a body), so no reader reads it and nobody waits.
    func stopTransfersWithoutLength(url: String) {
        guard let key = try? configuration.keyRules.key(for: url) else { return }
        let ids: [Int] = shard(for: key).locked { entries in
            guard let entry = entries[key], entry.info.length == nil else { return [] }
            return Array(entry.inflight.fetches.keys)
        }
        let running = ids.compactMap { handles.existing($0) }
        guard !running.isEmpty else { return }
        logger.warning("stopped a download without a length that nobody waits for", metadata: [
            "url": "\(DisplayURL.redacted(url))", "after": "\(Int(Self.abandonedTransferGrace))s without an open",
        ])
        running.forEach { $0.cancel() }
    }

    /// Fails reads that waited longer than `readTimeout`, and remembers them for a moment: the
    /// kernel asks a failed read-ahead again at once, and that retry fails now instead of
    /// waiting a second `readTimeout` (`EntryStateMachine.tick`). `now`: the injected clock's.
    func expireWaiters(now: Double? = nil) {
        let now = now ?? configuration.clock().timeIntervalSince1970
        for shard in shards {
            let expired: [(done: Waiter.Completion, range: Range<Int64>, url: String)] = shard.locked { entries in
                var out: [(done: Waiter.Completion, range: Range<Int64>, url: String)] = []
                for e in entries.all where !e.waiters.isEmpty {
                    for w in e.machine.tick(now: now) {
                        e.unpin(slices(of: w.range), generation: w.generation)
                        e.noteError("read \(w.range.lowerBound)-\(w.range.upperBound - 1) timed out")
                        out.append((w.completion, w.range, e.info.url))
                    }
                }
                return out
            }
            for (done, range, url) in expired {
                logger.warning("read timed out", metadata: ["url": "\(url)", "range": "\(range.lowerBound)-\(range.upperBound - 1)"])
                pool.submit { done(.failure(.timeout(url: url))) }
            }
        }
    }
}

/// Handles of running transfers by fetch id, kept apart from the pure in-flight table.
final class HandleTable: Sendable {
    private let boxes = LockedValue<[Int: FetchHandleBox]>([:])

    func box(_ id: Int) -> FetchHandleBox {
        boxes.withLock { boxes in
            if let b = boxes[id] { return b }
            let b = FetchHandleBox()
            boxes[id] = b
            return b
        }
    }

    /// The box of a transfer still running, without creating one.
    func existing(_ id: Int) -> FetchHandleBox? {
        boxes.withLock { $0[id] }
    }

    func remove(_ id: Int) -> FetchHandleBox? {
        boxes.withLock { $0.removeValue(forKey: id) }
    }
}

/// The handle of one transfer, which may be asked to cancel or resume before `start` has
/// returned it (its first bytes can arrive, and pause it, before that).
final class FetchHandleBox: Sendable {
    private struct State {
        var handle: FetchHandle?
        var cancelled = false
        var resumed = false
        /// The last class asked for before the handle was there.
        var priority: (FetchPriority, Double)?
    }
    private let state = LockedValue(State())

    var handle: FetchHandle? { state.withLock { $0.handle } }

    func set(_ h: FetchHandle) {
        let (c, r, p) = state.withLock { s in
            s.handle = h
            return (s.cancelled, s.resumed, s.priority)
        }
        if c { h.cancel() }
        if r { h.resume() }
        if let (p, waited) = p { h.setPriority(p, waitedSeconds: waited) }
    }

    /// Passed on in the order asked (callers hold the entry's shard lock).
    func setPriority(_ p: FetchPriority, waitedSeconds: Double) {
        let h = state.withLock { s in
            if s.handle == nil { s.priority = (p, waitedSeconds) }
            return s.handle
        }
        h?.setPriority(p, waitedSeconds: waitedSeconds)
    }

    func resume() {
        state.withLock { s in
            s.resumed = true
            return s.handle
        }?.resume()
    }

    func cancel() {
        state.withLock { s in
            s.cancelled = true
            return s.handle
        }?.cancel()
    }
}
