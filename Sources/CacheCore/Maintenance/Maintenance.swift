import Foundation
import Atomics
import Logging

/// Maintenance: what the engine does by the clock rather than because someone read or wrote.
/// A part of the engine that owns its state (`EngineCore` wires it and starts it).
///
/// *What it owns.* The sweeper (a timer of the engine clock's scheduler) and the flags that keep its work one at a time
/// (`sweeping`), the scrub's progress (`scrubbing`, `scrubDone`), whether the cache directory was
/// found gone (`directoryLost`), and the serial queue of checksum checks (`verifyKey`, a key of
/// the engine's pool). Each second's job: eviction at the cap and the floor (`Evictor`),
/// `--cache-max-age` (`Maintenance+MaxAge`), the scrub's next slice, evictions whose commit
/// failed, the index's reserve, and every fifth second the read statistics rows and the
/// directory check.
///
/// *Which thread runs it.* The sweeper's timer thread, four times a second, only for what is
/// microseconds under shard locks (the engine's `expireLate`: reads and opens past their
/// deadline); everything else in one job at a time on the engine's pool (`sweep`), and the
/// checks of the scrub as jobs of `verifyKey`. Tests call each step directly.
///
/// *What it may block on.* In the pool's job: the evictor (its lock, punches, the index commit),
/// a shard lock at a time, `statvfs` and the index's queue; never on another job of the pool.
/// Time and the sweeper's timer come from the engine's clock (`CacheConfiguration.engineClock`:
/// its clocks and scheduler), which tests inject.
///
/// Map of this folder (`Maintenance/`): work done by the clock.
/// - `Maintenance.swift` (this file): the sweeper and its one-at-a-time flags, the scrub.
/// - `Maintenance+MaxAge.swift`: `--cache-max-age`, through eviction.
/// - `Maintenance/SliceVerifier.swift`: slices from before this start checked against their XXH64.
/// Neighbours: its tick has `Engine/` expire late reads and opens (`Entry/`'s `tick`,
/// `OpenDeadlines`); calls `Eviction/`, and reads and drops through `Storage/`. `Engine/`
/// wires and starts it; `Read/` asks it to verify ahead of a reader.
final class Maintenance: Sendable {
    let configuration: CacheConfiguration
    let shards: [Shard]
    let index: CacheIndex
    let pool: BlockingIOPool
    let evictor: Evictor
    let directoryLock: DirectoryLock
    /// Entries with an open reader, which `--cache-max-age` leaves alone.
    let openReaders: OpenReaders
    let logger: Logger

    /// Checks of slices from before this start run one at a time, in the order asked
    /// (`SliceVerifier`): the serial queue they had, as a key of `pool`.
    static let verifyKey: UInt64 = 1
    /// The sweeper's once-a-second maintenance job (eviction, max age, index rows) is queued or
    /// running: the next tick skips it rather than pile up behind a slow disk, so there is one
    /// at a time.
    let sweeping = ManagedAtomic<Bool>(false)
    /// The scrub has a check queued or running.
    let scrubbing = ManagedAtomic<Bool>(false)
    /// The scrub found nothing left to check.
    let scrubDone = ManagedAtomic<Bool>(false)
    /// Set once the cache directory was found deleted or replaced (`checkDirectory`).
    let directoryLost = ManagedAtomic<Bool>(false)
    private let sweeper = LockedValue<Scheduler.Timer?>(nil)
    /// Where the sweeper's timer runs: the engine's clock's (`EngineClock.scheduler`).
    var scheduler: Scheduler { configuration.engineClock.scheduler }

    /// What maintenance asks of the engine's other parts, given once by `start`.
    struct EngineCalls: Sendable {
        /// Fails reads and opens past their deadline at `now` (seconds since 1970, the engine's
        /// clock). Shard locks only; answers are submitted to the pool.
        var expireLate: @Sendable (_ now: MonotonicInstant) -> Void
        /// Checks one slice of an entry at a generation against its checksums. Blocking: runs
        /// as a job of `verifyKey`.
        var check: @Sendable (_ shard: Shard, _ entry: EntryHandle, _ slice: Int64, _ generation: Int64) -> Void
        /// Lets idle entries go down to the entry budget (`EntryLoader`).
        var trim: @Sendable () -> Void = {}
        /// Loads entries the index says were last read before a time (seconds since 1970), a
        /// round's worth, so that `--cache-max-age` finds them in memory (`EntryLoader`).
        var loadReadBefore: @Sendable (_ cutoff: Double) -> Void = { _ in }
        /// Loads the next entries of the index (in row order) whose data files were not checked
        /// in this process, until one has unchecked slices; false once the walk reached the end.
        var loadNextToScrub: @Sendable () -> Bool = { false }
    }
    private let engine = LockedValue<EngineCalls?>(nil)

    init(configuration: CacheConfiguration, shards: [Shard], index: CacheIndex, pool: BlockingIOPool, evictor: Evictor,
         directoryLock: DirectoryLock, openReaders: OpenReaders, logger: Logger) {
        self.configuration = configuration
        self.shards = shards
        self.index = index
        self.pool = pool
        self.evictor = evictor
        self.directoryLock = directoryLock
        self.openReaders = openReaders
        self.logger = logger
    }

    /// Starts the sweeper: a timer of `scheduler` at 4 Hz that fails reads past their deadline (shard locks
    /// only, microseconds; their answers are submitted to `pool`) and, once a second, submits
    /// one maintenance job to `pool` (`sweep`), skipped while the last one has not finished. It
    /// does no disk I/O on the timer's thread.
    func start(_ calls: EngineCalls) {
        engine.withLock { $0 = calls }
        let clock = configuration.engineClock
        // Made under the lock that keeps it: the timer and its handler never leave it.
        sweeper.withLock { sweeper in
            // Its ticks run one at a time, on the scheduler's thread; the count is the timer's alone.
            let ticks = ManagedAtomic<Int>(0)
            sweeper = scheduler.every(.milliseconds(250)) { [weak self] in
                guard let self else { return }
                calls.expireLate(clock.monotonic)
                let tick = ticks.wrappingIncrementThenLoad(ordering: .relaxed)
                if tick % 4 == 0, !self.sweeping.exchange(true, ordering: .acquiring) {
                    let writeStats = tick % 20 == 0
                    self.pool.submit { [weak self] in
                        guard let self else { return }
                        self.sweep(writeStats: writeStats)
                        self.sweeping.store(false, ordering: .releasing)
                    }
                }
            }
        }
    }

    /// Stops the sweeper (a job already submitted still runs: the pool finishes it).
    func stop() {
        sweeper.withLock { $0?.cancel() }
    }

    deinit {
        sweeper.withLock { $0?.cancel() }   // an engine dropped without `shutdown` (tests)
    }

    /// The sweeper's second: eviction at the cap and the free-space floor (the floor can be
    /// crossed by other programs' files, so it is looked at even while nothing is written),
    /// `--cache-max-age`, evictions whose index commit failed, the index's reserve once a full
    /// disk has room for it again, the scrub's next slice, and every fifth second the read
    /// statistics rows. A job of `pool`.
    func sweep(writeStats: Bool) {
        evictor.evictIfNeeded()
        evictExpired(now: configuration.engineClock.wall())
        engine.withLock { $0?.trim }?()
        scrubOne()
        evictor.finishEvictions()
        if !index.hasReserve, evictor.roomLeft() > 2 * Int64(CacheIndex.reserveSize) { index.makeReserve() }
        if writeStats {
            writeReadStats()
            checkDirectory()
        }
    }

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

    /// Hands the rows of entries read since the last call to the index (batched behind, as every
    /// index write): last access and hit counts would otherwise reach it only with the next fetch.
    func writeReadStats() {
        for shard in shards {
            let rows: [CacheIndex.EntryRow] = shard.locked { entries in
                var out: [CacheIndex.EntryRow] = []
                for e in entries.all where e.readStatsDirty {
                    if e.machine.readStatsTaken(), e.isPersisted { out.append(e.row()) }
                }
                return out
            }
            rows.forEach(index.updateEntry)
        }
    }

    /// Entries loaded from the index bring unchecked slices: the scrub looks again.
    func scrubAgain() { scrubDone.store(false, ordering: .relaxed) }

    /// Loads up to a round of entries last read before `cutoff` (`--cache-max-age`).
    func loadReadBefore(_ cutoff: Double) { engine.withLock { $0?.loadReadBefore }?(cutoff) }

    /// The scrub: checks one unverified slice of some entry, if any (the sweeper calls it once a
    /// second, so a cache is checked at about one slice per second besides the reads).
    func scrubOne() {
        // Slices become unverified only at start: once a look finds none, there is nothing more.
        guard let check = engine.withLock({ $0?.check }),
              !scrubDone.load(ordering: .relaxed), !scrubbing.exchange(true, ordering: .acquiring) else { return }
        func inMemory() -> (Shard, EntryHandle, Int64, Int64)? {
            var found: (Shard, EntryHandle, Int64, Int64)?
            for shard in shards where found == nil {
                found = shard.locked { entries in
                    for e in entries.all where e.isPersisted {
                        if let s = e.unverified.first { return (shard, e.handle, s, e.info.generation) }
                    }
                    return nil
                }
            }
            return found
        }
        // Entries not in memory are checked too: the scrub walks the index, loading them.
        var found = inMemory()
        var more = false
        if found == nil, let next = engine.withLock({ $0?.loadNextToScrub }) {
            more = next()
            found = inMemory()
        }
        guard let (shard, entry, slice, generation) = found else {
            if !more { scrubDone.store(true, ordering: .relaxed) }
            scrubbing.store(false, ordering: .releasing)
            return
        }
        pool.submit(key: Self.verifyKey) { [self] in
            check(shard, entry, slice, generation)
            scrubbing.store(false, ordering: .releasing)
        }
    }
}
