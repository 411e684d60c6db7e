import Foundation
import Logging

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
/// Files: this one holds the shards, the parts and their wiring; `+Deadlines` opens and reads
/// past their deadlines; `CacheLoad.swift` the start. Parts that own their state, each with
/// its design note: `SliceStore` (data files, index, writer lanes, kept descriptors; extents with
/// their checksums), `FetchCoordinator` (launches, running handles, cancels, priorities, the
/// tracked source, the sinks shutdown waits for), `Evictor` (the cap, the free-space floor,
/// eviction rounds), `Maintenance` (the sweeper, max age, the scrub, read statistics, the
/// directory check), `EntryLoader` (which entries are in memory), `EngineClock` (time, injected
/// by tests). Parts that carry out the entries' machines' decisions, each holding only the parts
/// it uses: `EntryOpener` and `Versions` (`Version/`: opens, what a head means, new
/// generations), `Reader` and `ReadAnswers` (`Read/`: reads, leases, waiting reads),
/// `TransferStarts` (`Fetch/`: launches, and what sinks reach of the engine, `TransferEngine`),
/// `SliceVerifier` (`Maintenance/`: checksums of slices from before the start), `CacheCommands`
/// (`cache ls/info/rm/clear/verify`). An entry's decisions are its `EntryStateMachine`'s; the
/// engine keeps the shards and wires the parts, in the order they depend on one another.
///
/// Map of this folder (`Engine/`): the engine's public face and the core that wires its parts.
/// - `CacheEngine.swift`: the public face the front doors hold (readers, opens, shutdown).
/// - `CacheEngine+Document.swift`: small documents read whole (WebDAV `PROPFIND`), kept or not.
/// - `CacheEngine+Pins.swift`: `preload --pin` ranges and their limit (half the cap).
/// - `EngineCore.swift` (this file): the shards, the pool, and the wiring of the parts.
/// - `CacheCommands.swift`: `cache ls/info/rm/clear/verify` over the shards and the index.
/// - `EngineCore+Deadlines.swift`: opens and reads past their deadlines (the sweeper's `expireLate`).
/// - `EngineCore+TestAccess.swift`: the parts' pieces as tests reach them (never the engine's code).
/// - `CacheConfiguration.swift`: where and how to cache; every knob the engine reads.
/// - `CacheLoad.swift`: the start: the index's summaries (bytes, scan share, last generation).
/// - `StartCleanUp.swift`: the background clean-up after it (old versions, files no row
///   describes), stoppable, skipped after a clean stop.
/// - `EntryLoader.swift`: entries loaded from the index when looked up (one load per key), idle
///   ones let go past `entryMemoryBudget`; each loaded file checked by `StartupCheck.swift`.
/// - `EngineClock.swift`: the one clock CacheCore reads (tests inject it).
/// - `EngineIDs.swift`: ids and generations handed out. `ChangeObservers.swift`: who hears of a
///   remote change. `DAVAnswers.swift`: entries whose origin answered with `DAV:` (both held by
///   `Versions`).
/// - `HandleTable.swift`: running transfers' handles by fetch id (the `FetchCoordinator`'s),
///   apart from the pure tables.
/// Neighbours: drives `Entry/` (each entry's machine), `Read/`, `Fetch/`, `Storage/`,
/// `Eviction/`, `Maintenance/` and `Status/`; called by the front doors (FuseMount, Proxy, the
/// executable) through `CacheEngine`. Its parts reach one another through the references it
/// gives them, never through `EngineCore` (but the sweeper's `expireLate`, `+Deadlines`).
final class EngineCore: Sendable {
    /// The configuration in force; `sliceSize` is the one the cache was created with.
    let configuration: CacheConfiguration
    /// Every transfer: launches, running handles, cancels, priorities, the source they start on
    /// (`FetchCoordinator`).
    let fetches: FetchCoordinator
    /// Which origins are down (`FetchLayers`); nil for an engine without offline mode.
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
    /// Checks of slices from before this start run one at a time, in the order asked
    /// (`Maintenance.verifyKey`).
    static let verifyKey = Maintenance.verifyKey

    /// Ids of readers, fetches and new entries, and versions' generations (`EngineIDs`).
    let ids: EngineIDs
    /// The version part: differs, adopt, new generations (`Versions`); opens (`EntryOpener`).
    let versions: Versions
    let opener: EntryOpener
    /// Reads (`Reader`) and their answers and waiters (`ReadAnswers`).
    let reader: Reader
    let answers: ReadAnswers
    /// Launches, and what their sinks reach of the engine (`TransferStarts`).
    let transfers: TransferStarts
    /// Checks of slices from before the start (`SliceVerifier`).
    let verifier: SliceVerifier
    /// Which entries are in memory (`EntryLoader`).
    let loader: EntryLoader
    /// `cache ls/info/rm/clear/verify` (`CacheCommands`).
    let commands: CacheCommands
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
    private let testHookValue: LockedValue<(@Sendable (Step) -> Void)?>
    /// The memory of arriving bytes: what waits for the writer, and what reads hold.
    let memory: MemoryBudget
    /// Bytes transfers may write before the cap and free space are looked at again.
    var space: SpaceAllowance { evictor.space }
    /// Entries with an open reader, which `--cache-max-age` leaves alone.
    let openReaders = OpenReaders()
    /// The clean-up after the start: old versions, files no row describes (`StartCleanUp`).
    let startCleanUp: StartCleanUp
    /// True once the background clean-up after the start ran (`StartCleanUp`; tests wait for it).
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
        let (lastStored, filesLeft) = try CacheLoad(configuration: configuration, store: files, index: index, shards: shards,
                                                        evictor: evictor, logger: logger).run(stored: use.summary?.summary)
        startCleanUp = StartCleanUp(from: filesLeft ? use.summary?.cleanUp ?? .none : .done, index: index,
                                    hook: configuration.startCleanUpHook)
        // Generations handed out start above every row's and above the floor an earlier
        // process kept (`CacheIndex.generationFloor`: a clean stop keeps the last it handed
        // out). A crash, or a clean stop of a binary that kept none (its floor below its rows),
        // leaves no floor for what that process handed out after its last commit: the start
        // leaves a gap no process hands out 2^32 generations in, and keeps it as the floor
        // before handing any out. So every file an earlier process wrote is at or below the
        // floor (the clean-up deletes those no row describes), and every file of this process
        // above it: no new version's file takes the name of a killed process's leftover.
        let keptFloor = index.generationFloor()
        var handedOutAbove = max(lastStored, keptFloor)
        if filesLeft && (previousStop != .clean || keptFloor < lastStored) {
            handedOutAbove += EngineIDs.gapAfterACrash
            do { try index.recordGenerationFloor(handedOutAbove) } catch {
                logger.warning("cannot keep the generation floor; a crash of this process may leave files a later one reuses",
                               metadata: ["error": "\(error)"])
            }
        }
        let lastGeneration = handedOutAbove
        ids = EngineIDs(lastGeneration: lastGeneration)
        if let stored = use.summary?.totals {
            totals.restore(stored)   // kept by the clean stop: nothing to count
            countEnded.withLock { $0 = true }
        } else {
            Self.countIndexEntries(index, into: totals, logger: logger, stop: stopCounting, ended: countEnded,
                                   hold: configuration.startCountHook)
        }
        let hooks = LockedValue<(@Sendable (Step) -> Void)?>(nil)
        testHookValue = hooks
        let testHook: @Sendable () -> (@Sendable (Step) -> Void)? = { hooks.withLock { $0 } }
        let loader = EntryLoader(configuration: configuration, shards: shards, store: store, evictor: evictor,
                                 maintenance: maintenance, totals: totals, openReaders: openReaders, pool: pool, logger: logger,
                                 testHook: testHook)
        let answers = ReadAnswers(configuration: configuration, store: store, fetches: fetches, evictor: evictor, ids: ids,
                                  pool: pool, metrics: metrics, logger: logger)
        let versions = Versions(origins: OriginVersions(ignoreETag: configuration.ignoreETag, logger: logger),
                                changeObservers: ChangeObservers(pool: pool), configuration: configuration, ids: ids, store: store,
                                evictor: evictor, fetches: fetches, answers: answers, pool: pool, metrics: metrics, logger: logger)
        let transfers = TransferStarts(configuration: configuration, shards: shards, store: store, fetches: fetches, evictor: evictor,
                                       memory: memory, versions: versions, answers: answers, ids: ids, originRanges: originRanges,
                                       metrics: metrics, logger: logger, testHook: testHook)
        let verifier = SliceVerifier(configuration: configuration, store: store, answers: answers, metrics: metrics, logger: logger)
        (self.loader, self.answers, self.versions, self.transfers, self.verifier) = (loader, answers, versions, transfers, verifier)
        reader = Reader(configuration: configuration, shards: shards, store: store, evictor: evictor, fetches: fetches, ids: ids,
                        pool: pool, metrics: metrics, originRanges: originRanges, answers: answers, verifier: verifier,
                        loader: loader, transfers: transfers)
        opener = EntryOpener(configuration: configuration, shards: shards, ids: ids, totals: totals, originHealth: originHealth,
                             loader: loader, transfers: transfers, pool: pool, logger: logger)
        commands = CacheCommands(configuration: configuration, shards: shards, store: store, evictor: evictor, fetches: fetches,
                                 loader: loader, answers: answers, versions: versions, pool: pool)
        // Weak: the parts hold these closures, and the loader and the verifier hold the parts.
        evictor.loadEntry = { [weak loader] key in loader?.loadNow(key, recent: false) }
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
            check: { [weak verifier] shard, entry, slice, generation in
                verifier?.verify(entry, shard: shard, slices: [slice], generation: generation)
            },
            trim: { [weak loader] in loader?.trimEntries() },
            loadReadBefore: { [weak loader] cutoff in loader?.loadReadBefore(cutoff) },
            loadNextToScrub: { [weak loader] in loader?.loadNextToScrub() ?? false }))
        pool.submit { [weak self] in self?.cleanUpAfterStartThenSay(floor: lastGeneration) }
    }

    func shutdown() {
        startCleanUp.stop()   // seen at its next batch: the pool's finish below waits for no walk
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
        let sinksEnded = fetches.waitForSinks(timeout: 5)
        stopCountingIndexEntries()
        store.stopWriting()
        // The cancelled reads' answers run, and so does a maintenance job or a check already
        // queued, while the index is still open; a job submitted later (a transfer's last
        // callback) runs on its caller's thread.
        pool.finish()
        logger.debug("the most jobs each lane of the blocking I/O pool ran at once",
                     metadata: Logger.Metadata(uniqueKeysWithValues: pool.busiestLanes.map { ($0.lane, "\($0.mostRunning)") }))
        do {
            // A transfer still running may yet write a file whose row it never commits, even of
            // a generation it makes after this: the next start then cleans up whole, above a gap.
            try store.close(totals: totals.stored(), cleanUp: sinksEnded ? startCleanUp.reached : nil,
                            generationFloor: ids.lastHandedOut + (sinksEnded ? 0 : EngineIDs.gapAfterACrash))
        } catch {
            logger.warning("the cache index could not be closed; the next start will check the cache as after a crash",
                           metadata: ["error": "\(error)"])
        }
        directoryLock.release()
    }

    // MARK: Ids, shards, space

    func makeID() -> Int { ids.makeID() }

    /// The shard a key's entry lives in (the parts that hold the shards ask the same: `[Shard].of`).
    func shard(for key: CacheKey) -> Shard { shards.of(key) }

    var totalBytes: Int64 { evictor.totalBytes }

    /// Makes room for `bytes` about to be written (`Evictor.makeRoom`).
    func makeRoom(for bytes: Int64) -> Bool { evictor.makeRoom(for: bytes) }

    func slices(of range: Range<Int64>) -> ClosedRange<Int64> { store.slices(of: range) }

    /// `url`'s key, through the opener's recent keys (`EntryOpener.recentKey`).
    func recentKey(for url: String) throws -> CacheKey { try opener.recentKey(for: url) }

    func cachedInfo(url: String) -> EntryInfo? { opener.cachedInfo(url: url) }

    // MARK: Deadlines (`EngineCore+Deadlines`)

    /// Opens not answered yet (`CacheEngine.open`), each with its deadline (monotonic): the
    /// sweeper fails those past it with `.timeout` and drops those answered meanwhile.
    let waitingOpens = LockedValue<[(deadline: MonotonicInstant, url: String, answer: AnswerOnce<Result<EntryInfo, CacheError>>)]>([])

    /// Entries whose every open timed out, each with the URL last asked and the time its
    /// transfer is stopped if no open comes for it meanwhile (`expireOpens`). By key, not URL: an
    /// open of another URL of the same file (a rotating token left out with `--ignore-query`)
    /// waits on the same transfer.
    let abandonedOpens = LockedValue<[CacheKey: (url: String, at: MonotonicInstant)]>([:])
}
