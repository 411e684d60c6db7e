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
/// memory, its row written behind), nor under the evictor's lock, which guards only the choice
/// of slices to evict. Threads (docs/threads.md): completions of reads that waited, checksum checks,
/// chunked reads, the sweeper's eviction and removals run as jobs on `pool`, the engine's one
/// bounded pool for blocking I/O (not Swift's cooperative pool, not a thread per call); slice
/// writes run on the pool's `writer` lane (`SliceStore.submit`, keyed by data file), never on the
/// fetch thread, and index writes nobody waits for on its `index` lane; the sweeper (`Maintenance`)
/// is a timer of the one `Scheduler` that fails late reads and submits the rest. No job of `pool`
/// waits for a job of its own lane: each hands its result on by calling or submitting, never by
/// blocking (the one wait across lanes, a writer's on the index lock, is docs/threads.md's).
///
/// Files: this one holds the shards, the wiring and metadata (open, probe, remote change);
/// `+Deadlines` opens and reads past their deadlines; `+Read` the read path; `+Fetch` the
/// hand-off of a launch to the coordinator; `+Commands` list/remove/verify (`cache
/// ls/rm/verify`); `+Verify` the checksum check of slices from before the start.
/// Parts that own their state, each with its design note: `SliceStore` (data files, index,
/// writer lanes, kept descriptors; extents with their checksums), `FetchCoordinator` (launches,
/// running handles, cancels, priorities, the tracked source, the sinks shutdown waits for),
/// `Evictor` (the cap, the free-space floor, eviction rounds), `Maintenance` (the sweeper, max
/// age, the scrub, read statistics, the directory check), `CacheLoad` (the start), `EntryLoading`
/// (which entries are in memory), `EngineClock`
/// (time, injected by tests). An entry's decisions are its `EntryStateMachine`'s; the engine
/// keeps the shards, the metadata path and the wiring of the parts.
///
/// Map of this folder (`Engine/`): the engine's public face and the core that wires its parts.
/// - `CacheEngine.swift`: the public face the front doors hold (readers, opens, shutdown).
/// - `CacheEngine+Document.swift`: small documents read whole (WebDAV `PROPFIND`), kept or not.
/// - `CacheEngine+Pins.swift`: `preload --pin` ranges and their limit (half the cap).
/// - `EngineCore.swift` (this file): the shards, the pool, and the wiring of the parts below.
/// - `EngineCore+Commands.swift`: `cache ls/info/rm/clear/verify` over the shards and the index.
/// - `EngineCore+Deadlines.swift`: opens and reads past their deadlines (the sweeper's `expireLate`).
/// - `EngineCore+TestAccess.swift`: the parts' pieces as tests reach them (never the engine's code).
/// - `CacheConfiguration.swift`: where and how to cache; every knob the engine reads.
/// - `CacheLoad.swift`: the start: the index's summaries (bytes, scan share, last generation);
///   the background clean-up of old versions and files no row describes after it.
/// - `EntryLoading.swift`: entries loaded from the index when looked up (one load per key), idle
///   ones let go past `entryMemoryBudget`; each loaded file checked by `StartupCheck.swift`.
/// - `EngineClock.swift`: the one clock CacheCore reads (tests inject it).
/// - `EngineIDs.swift`: ids and generations handed out. `ChangeObservers.swift`: who hears of a
///   remote change. `OriginVersions.swift`: how versions are told apart (rotating ETags).
///   `DAVAnswers.swift`: entries whose origin answered with `DAV:`.
/// - `HandleTable.swift`: running transfers' handles by fetch id (the `FetchCoordinator`'s),
///   apart from the pure tables.
/// Neighbours: drives `Entry/` (each entry's machine), `Read/`, `Fetch/`, `Storage/`,
/// `Eviction/`, `Maintenance/` and `Status/`; called by the front doors (FuseMount, Proxy, the
/// executable) through `CacheEngine`, and back by its parts through `EngineCore`.
final class EngineCore: Sendable {
    /// The configuration in force; `sliceSize` is the one the cache was created with.
    let configuration: CacheConfiguration
    /// Every transfer: launches, running handles, cancels, priorities, the source they start on
    /// (`FetchCoordinator`).
    let fetches: FetchCoordinator
    /// Which origins are down: an entry of one is served as cached, not revalidated.
    /// Nil: an engine without offline mode (`FetchLayers.none`).
    let originHealth: (any OriginHealthReporting)?
    let logger: Logger
    let metrics: CacheMetrics
    /// The bytes on disk and what is known of them: data files, index, writer lanes, kept
    /// descriptors (`SliceStore`); the engine's parts reach the disk only through it.
    let store: SliceStore
    /// Ranges the user pinned (`preload --pin`), which eviction leaves alone.
    let userPins: PinTable
    let directoryLock: DirectoryLock
    let shards: [Shard]
    /// The engine's one pool for blocking I/O (`CacheConfiguration.blockingIOThreads`): answers
    /// of reads that waited (they open the data file), failures of reads, open answers, checksum
    /// checks (`verifyKey`: one at a time, in order), chunked reads (`ChunkedRead`), the
    /// sweeper's maintenance (one at a time: `Maintenance.sweeping`) and removals. Its jobs never wait for
    /// one another.
    let pool: BlockingIOPool
    /// The keys of the URLs opened lately: the proxy opens its entry on every request, and a key
    /// is a function of the URL and the rules, which change only with the process's S3 buckets
    /// (a mount that named one ends: `S3Buckets.generation`).
    let recentKeys = RecentResults<CacheKey>(capacity: 256)

    /// `url`'s key, through `recentKeys`.
    func recentKey(for url: String) throws -> CacheKey {
        try recentKeys.value(for: url, generation: configuration.keyRules.s3Buckets?.generation ?? 0) {
            try configuration.keyRules.key(for: $0)
        }
    }
    /// Checks of slices from before this start run one at a time, in the order asked
    /// (`Maintenance.verifyKey`).
    static let verifyKey = Maintenance.verifyKey

    var initialReadAhead: Int64 { configuration.initialReadAhead }
    /// Bytes fetched ahead of time when an entry is first opened (file headers, a moov atom start).
    let probeLength: Int64 = 256 << 10
    /// How far a body without a length may run before it is taken for an endless stream (an
    /// internet radio station, a hostile origin) and stopped: half the capacity, so such a body
    /// can neither evict more than half of what the cache holds nor download forever.
    var unknownLengthLimit: Int64 { max(configuration.halfCapacity, configuration.sliceSize) }

    /// Ids of readers, fetches and new entries, and versions' generations (`EngineIDs`).
    let ids: EngineIDs
    /// Who hears that a remote file changed (`CacheEngine.onRemoteChange`).
    let changeObservers: ChangeObservers
    /// How versions are told apart, and the origins whose ETags rotate (`OriginVersions`).
    let versions: OriginVersions
    /// Entries whose last answer carried a `DAV:` header (`CacheEngine.answeredDAV`).
    let davAnswers = DAVAnswers()
    /// Origins whose ranges were lately answered 200: their reads ask for less (`RangeReliability`).
    let originRanges = OriginRangeMemory()
    /// The cap and the free-space floor: bytes on disk, room for writes, eviction rounds
    /// (`Evictor`).
    let evictor: Evictor
    /// The sweeper, max age, the scrub, read statistics rows, the directory check (`Maintenance`).
    let maintenance: Maintenance
    /// How the process before this one left the cache (logged at start).
    let previousStop: CacheIndex.PreviousStop
    /// Points where tests interleave other work deterministically (a removal while a transfer
    /// writes, a write while an eviction commits). Nil outside tests.
    enum Step { case sinkWillWrite(offset: Int64), evictionFreedSlices, entryLoading(CacheKey) }
    var testHook: (@Sendable (Step) -> Void)? {
        get { testHookValue.withLock { $0 } }
        set {
            testHookValue.withLock { $0 = newValue }
            if let hook = newValue {
                evictor.onFreedSlices = { @Sendable in hook(.evictionFreedSlices) }
            } else {
                evictor.onFreedSlices = nil
            }
        }
    }
    private let testHookValue = LockedValue<(@Sendable (Step) -> Void)?>(nil)
    /// The memory of arriving bytes: what waits for the writer, and what reads hold.
    let memory: MemoryBudget
    /// Bytes transfers may write before the cap and free space are looked at again.
    var space: SpaceAllowance { evictor.space }
    /// Entries with an open reader, which `--cache-max-age` leaves alone.
    let openReaders = OpenReaders()
    /// Where the scrub's walk through the index is: the last row id it loaded.
    let scrubCursor = LockedValue<Int64>(0)
    /// True once the background clean-up after the start ran (`cleanUpAfterStart`; tests wait for it).
    let cleanedUpAfterStart = ConditionLock(false)
    /// Sums over the live entries, kept as they change (`RunningTotals`): the status summary
    /// and the metric gauges read these, not every entry.
    let totals: RunningTotals
    /// The start's count of the index into `totals`: asked to stop, and ended (`countIndexEntries`).
    let stopCounting = LockedValue(false)
    let countEnded = ConditionLock(false)

    init(configuration: CacheConfiguration, source: RangeSource, logger: Logger, metrics: CacheMetrics,
         originHealth: (any OriginHealthReporting)? = nil) throws {
        self.metrics = metrics
        self.originHealth = originHealth
        var configuration = configuration
        fetches = FetchCoordinator(source: source, logger: logger)
        self.logger = logger
        versions = OriginVersions(ignoreETag: configuration.ignoreETag, logger: logger)
        let dir = configuration.directory
        do {
            try PrivateDirectory.make(dir, logger: logger)
            try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw CacheError.storage(path: dir, message: "cannot use the cache directory: \((error as? StorageError)?.message ?? error.localizedDescription)")
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
        let index: CacheIndex
        do {
            index = try CacheIndex.openSettingAsideIfDamaged(path: dir + "/index.sqlite", held: held, logger: logger,
                                                             now: configuration.clock)
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
        var use = (try? index.beginUse()) ?? (stop: .unknown, summary: nil)
        previousStop = use.stop
        if !index.untouchedSinceCleanClose.withLock({ $0 }) { use.summary = nil }   // written since: summed and counted
        index.onWriteError = { [logger] error in
            logger.error("the cache index could not be written; recent bytes may be fetched again after a restart",
                         metadata: ["error": "\(error)"])
        }
        self.configuration = configuration
        totals = RunningTotals(sliceSize: configuration.sliceSize)
        pool = BlockingIOPool(name: "httpcachefs-io", threads: max(1, configuration.blockingIOThreads))
        changeObservers = ChangeObservers(pool: pool)
        index.writeBehind(on: pool, scheduler: configuration.engineClock.scheduler)
        let files = DataFiles(held: held, sliceSize: configuration.sliceSize)
        memory = MemoryBudget(limits: .init(queued: configuration.writeBudget, perTransfer: configuration.writeBudgetPerTransfer,
                                            retained: configuration.readRetentionBudget))
        store = SliceStore(files: files, index: index, writes: WriteQueue(jobs: pool, memory: memory))
        shards = (0..<max(1, configuration.shardCount)).map { _ in Shard() }
        evictor = Evictor(configuration: configuration, shards: shards, store: store, userPins: userPins,
                          logger: logger, metrics: metrics)
        maintenance = Maintenance(configuration: configuration, shards: shards, index: index, pool: pool, evictor: evictor,
                                  directoryLock: directoryLock, openReaders: openReaders, logger: logger)
        let lastGeneration = try CacheLoad(configuration: configuration, store: files, index: index, shards: shards,
                                           evictor: evictor, logger: logger).run(stored: use.summary?.summary)
        ids = EngineIDs(lastGeneration: lastGeneration)
        if let stored = use.summary?.totals {
            totals.restore(stored)   // kept by the clean stop: nothing to count
            countEnded.withLock { $0 = true }
        } else {
            Self.countIndexEntries(index, into: totals, logger: logger, stop: stopCounting, ended: countEnded,
                                   hold: configuration.startCountHook)
        }
        evictor.loadEntry = { [weak self] key in self?.loadNow(key, recent: false) }
        evictor.holdPinsUnderTheCap()
        switch previousStop {
        case .clean: logger.info("cache opened after a clean stop", metadata: ["directory": "\(dir)"])
        case .unclean: logger.notice("cache opened after an unclean stop (the last process did not close it)", metadata: ["directory": "\(dir)"])
        case .unknown: logger.debug("cache opened", metadata: ["directory": "\(dir)"])   // new: nothing to say
        }
        maintenance.start(.init(
            expireLate: { [weak self] now in
                self?.expireWaiters(now: now)
                self?.expireOpens(now: now)
            },
            check: { [weak self] shard, entry, slice, generation in
                self?.verify(entry, shard: shard, slices: [slice], generation: generation)
            },
            trim: { [weak self] in self?.trimEntries() },
            loadReadBefore: { [weak self] cutoff in self?.loadReadBefore(cutoff) },
            loadNextToScrub: { [weak self] in self?.loadNextToScrub() ?? false }))
        let firstNewID = index.newEntryID()
        pool.submit { [weak self] in self?.cleanUpAfterStartThenSay(firstNewID: firstNewID, lastGeneration: lastGeneration) }
    }

    func shutdown() {
        maintenance.stop()
        for shard in shards {
            let (running, waiting): ([FetchHandleBox], [Waiter.Completion]) = shard.locked { entries in
                var f: [FetchHandleBox] = [], w: [Waiter.Completion] = []
                for e in entries.all {
                    let (waiters, ids) = e.machine.stopped(dropBytes: false)
                    w += waiters.map(\.completion)
                    f += fetches.stop(ids)
                    if e.isPersisted { store.save(e) }   // only those that changed
                }
                return (f, w)
            }
            running.forEach { $0.cancel() }
            waiting.forEach { done in pool.submit { done(.failure(.cancelled)) } }
        }
        // Transfers hand their last extent to the index when they finish: wait for them (briefly),
        // or bytes already on disk would not be recorded.
        fetches.waitForSinks(timeout: 5)
        stopCountingIndexEntries()
        store.stopWriting()
        // The cancelled reads' answers run, and so does a maintenance job or a check already
        // queued, while the index is still open; a job submitted later (a transfer's last
        // callback) runs on its caller's thread.
        pool.finish()
        logger.debug("the most jobs each lane of the blocking I/O pool ran at once",
                     metadata: Logger.Metadata(uniqueKeysWithValues: pool.busiestLanes.map { ($0.lane, "\($0.mostRunning)") }))
        do {
            try store.close(totals: totals.stored())
        } catch {
            logger.warning("the cache index could not be closed; the next start will check the cache as after a crash",
                           metadata: ["error": "\(error)"])
        }
        directoryLock.release()
    }

    // MARK: Ids, shards, space

    func makeID() -> Int { ids.makeID() }

    func shard(for key: CacheKey) -> Shard { Self.shard(for: key, in: shards) }

    /// The shard a key's entry lives in (the parts that hold the shards ask the same).
    static func shard(for key: CacheKey, in shards: [Shard]) -> Shard { shards[Int(key.stableHash % UInt64(shards.count))] }

    var totalBytes: Int64 { evictor.totalBytes }

    func addBytes(_ n: Int64) { evictor.addBytes(n) }

    /// Makes room for `bytes` about to be written (`Evictor.makeRoom`).
    func makeRoom(for bytes: Int64) -> Bool { evictor.makeRoom(for: bytes) }



    // MARK: Metadata

    func cachedInfo(url: String) -> EntryInfo? {
        guard let key = try? configuration.keyRules.key(for: url) else { return nil }
        return storedInfo(key)
    }

    /// Resolves metadata: fresh entries answer at once (on the caller's thread with
    /// `answerFreshInline`, else as a job of `pool`); unknown or stale ones start a probe (a
    /// small ranged GET whose head carries the validators and whose bytes are cached).
    func open(url: String, key known: CacheKey? = nil, maxAge: TimeInterval, takeFirstBytes: Bool = true, answerFreshInline: Bool = false,
              unknownLengthLimit: Int64? = nil, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        let key: CacheKey
        do { key = try known ?? recentKey(for: url) } catch {
            let e = error as? CacheError ?? .invalidURL(url, reason: "\(error)")
            pool.submit { completion(.failure(e)) }
            return
        }
        // An entry not in memory is loaded first: on this thread (a FUSE thread, the CLI), or,
        // for a caller that asked for an inline answer (an event loop, which must not wait for
        // the index), as a job of the pool.
        guard answerFreshInline else {
            let asked = loadInline(key)
            return open(key: key, url: url, maxAge: maxAge, takeFirstBytes: takeFirstBytes, answerFreshInline: false,
                        unknownLengthLimit: unknownLengthLimit, askedIndex: asked, completion: completion)
        }
        whenLoaded(key) { [self] asked in
            open(key: key, url: url, maxAge: maxAge, takeFirstBytes: takeFirstBytes, answerFreshInline: answerFreshInline,
                 unknownLengthLimit: unknownLengthLimit, askedIndex: asked, completion: completion)
        }
    }

    /// `open` once the entry is in memory, or the index was asked and has none (`askedIndex`);
    /// an entry let go meanwhile is loaded again first.
    private func open(key: CacheKey, url: String, maxAge: TimeInterval, takeFirstBytes: Bool, answerFreshInline: Bool,
                      unknownLengthLimit: Int64?, askedIndex: Bool,
                      completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        let shard = shard(for: key)
        let originDown = originHealth?.isDown(url: url) ?? false
        let (answer, probe, skipped, notLoaded) = shard.locked { entries -> (Result<EntryInfo, CacheError>?, Launch?, Bool, Bool) in
            // The clock is read under the lock: a transfer may confirm the entry (validatedAt)
            // just before, and an age read earlier would come out negative, hence "fresh".
            let now = configuration.clock()
            let entry: EntryState
            if let existing = entries[key] {
                entry = existing
                entries.touch(key)
            } else if !askedIndex || entries.isLoading(key) {
                // Let go since it was looked up, or being loaded: a new entry here would replace the index's.
                return (nil, nil, false, true)
            } else {
                let info = EntryInfo(key: key, url: url, finalURL: url, length: nil, contentType: nil, etag: nil,
                                     lastModified: nil, acceptsRanges: true, generation: ids.makeGeneration(),
                                     validatedAt: .distantPast)
                entry = EntryState(id: -1, info: info, lastAccess: now.timeIntervalSince1970)
                entry.attach(to: totals)
                entries.add(entry)
            }
            if let limit = unknownLengthLimit { entry.machine.lengthLimitAsked(limit) }
            let freshness = EntryMachine.Freshness(maxAge: maxAge, lengthKnown: entry.info.length != nil,
                                                   age: now.timeIntervalSince(entry.info.validatedAt),
                                                   originDown: originDown, live: entry.isPersisted)
            switch entry.machine.openRequested(completion, fresh: freshness.fresh, makeFetchID: makeID) {
            case .answer:
                return (.success(entry.info), nil, freshness.offline, false)
            case .cancel:
                return (.failure(.cancelled), nil, false, false)
            case .wait:
                return (nil, nil, false, false)
            case let .startProbe(id):
                let fetch = EntryMachine.probeFetch(takeFirstBytes: takeFirstBytes, coverage: entry.coverage,
                                                    length: entry.info.length, probeLength: probeLength)
                entry.machine.probeStarted(id, url: url, end: fetch.end, now: now.timeIntervalSince1970)
                return (nil, Launch(entry: entry.handle, fetch: fetch, id: id), false, false)
            }
        }
        if notLoaded {
            whenLoaded(key) { [self] asked in
                open(key: key, url: url, maxAge: maxAge, takeFirstBytes: takeFirstBytes, answerFreshInline: false,
                     unknownLengthLimit: unknownLengthLimit, askedIndex: asked, completion: completion)
            }
            return
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

    /// Copies what the origin said into the entry (call under the shard lock).
    func adopt(_ head: ResponseHead, into entry: EntryState) {
        entry.machine.headAdopted(head, at: configuration.clock())
        davAnswers.note(head.webDAV, key: entry.info.key)
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
        let dropped = evictor.countingScanBytes(entry) { entry.machine.generationStarted(ids.makeGeneration(), keeping: fetchID) }
        metrics.noteWasted(entry.machine.takeWasted())
        adopt(head, into: entry)
        addBytes(-dropped.droppedBytes)
        store.forgetFiles(of: entry.handle)
        failStaleWaiters(entry)
        let cancelled = fetches.stop(dropped.cancel)
        if entry.isPersisted {
            store.save(entry)
            store.deleteOtherVersions(entryID: entry.id, keep: entry.info.generation, old: old)
        }
        if isFile { changeObservers.notify(entry.info) }
        return cancelled
    }

    // MARK: Deadlines (`EngineCore+Deadlines`)

    /// Opens not answered yet (`CacheEngine.open`), each with its deadline: the sweeper fails
    /// those past it with `.timeout` and drops those answered meanwhile.
    let waitingOpens = LockedValue<[(deadline: Double, url: String, answer: AnswerOnce<Result<EntryInfo, CacheError>>)]>([])

    /// Entries whose every open timed out, each with the URL last asked and the time its
    /// transfer is stopped if no open comes for it meanwhile (`expireOpens`). By key, not URL: an
    /// open of another URL of the same file (a rotating token left out with `--ignore-query`)
    /// waits on the same transfer.
    let abandonedOpens = LockedValue<[CacheKey: (url: String, at: Double)]>([:])
}
