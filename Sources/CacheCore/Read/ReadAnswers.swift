import Foundation
import Logging

/// The answers of reads: leases over cached bytes, and the reads waiting for bytes, woken when
/// they land, planned again when a transfer ends, failed when their version is left.
///
/// *What it owns.* Nothing of its own: it carries out, for `Reader`, the sinks (`Fetch/`), the
/// version part and the checks, what the entry's machine says of its waiters
/// (`waitersWoken`, `waitersReplanned`, `staleWaitersRemoved`) and makes the leases that answer
/// reads (`lease`: descriptors of the reader's data file and pooled chunks, never copies).
///
/// *Which thread runs it.* The caller's: a reader's, the fetch thread, a job of `pool`; every
/// function marked so runs under the entry's shard lock. Answers that open a data file run as
/// jobs of `pool`; the fetch thread runs those wholly from memory itself, after the lock.
///
/// *What it may block on.* The shard lock (`forget`, and a lease's release), and the open of
/// a data file in `lease`, with no lock held.
final class ReadAnswers: Sendable {
    typealias EntryMachine = EntryStateMachine<EntryState.OpenCompletion>
    private let configuration: CacheConfiguration
    private let store: SliceStore
    private let fetches: FetchCoordinator
    private let evictor: Evictor
    private let ids: EngineIDs
    private let pool: BlockingIOPool
    private let metrics: CacheMetrics
    private let logger: Logger

    init(configuration: CacheConfiguration, store: SliceStore, fetches: FetchCoordinator, evictor: Evictor, ids: EngineIDs,
         pool: BlockingIOPool, metrics: CacheMetrics, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.fetches = fetches
        self.evictor = evictor
        self.ids = ids
        self.pool = pool
        self.metrics = metrics
        self.logger = logger
    }

    /// How a hit on `range` is answered (`EntryReads.runs`). Call under the shard lock.
    func runs(_ range: Range<Int64>, pending: PendingBytes) -> [ReadRun] { ReadRun.of(EntryReads.runs(range, pending: pending)) }

    /// A lease over `range`, whose slices the caller pinned: memory runs as the chunks they are in, the rest from
    /// the reader's open data file (opened here if needed: no lock is held). Releasing it
    /// unpins. A data file that cannot be opened is forgotten (fetched again), never served.
    func lease(entry: EntryHandle, shard: Shard, id: Int64, generation: Int64, files: ReaderFiles,
               range: Range<Int64>, runs: [ReadRun],
               originBytes: Int? = nil) -> Result<ReadLease, CacheError> {
        let pinned = slices(of: range)
        let unpin: @Sendable () -> Void = { shard.locked { $0[entry]?.unpin(pinned, generation: generation) } }
        var pieces: [ReadLease.Piece] = []
        var file: DataFile?
        for r in runs {
            let run = r.range
            switch r.source {
            case let .bytes(bytes):
                pieces.append(.chunk(bytes))
                continue
            case let .pending(view):
                pieces.append(.chunk(view.retained()))
                continue
            case .disk:
                break
            }
            do {
                let f = try file ?? files.file { try store.readFile(of: entry, id: id, generation: generation) }
                file = f
                pieces.append(.file(fd: f.fd, offset: run.lowerBound, count: run.count))
            } catch {
                unpin()
                logUnreadable(error)
                forget(entry: entry, shard: shard, range: run, generation: generation)
                return .failure((error as? StorageError)?.cacheError ?? .storage(path: configuration.directory, message: "\(error)"))
            }
        }
        let open = file.map { [$0] } ?? []
        return .success(ReadLease(pieces: pieces, files: open, originBytes: originBytes, onRelease: unpin))
    }

    /// How a sequential reader's read-ahead is split into parallel streams. A stream should carry
    /// about `streamSeconds` of transfer at the rate one connection was measured to get: on a link
    /// that caps each connection, several streams together fill it; where one connection is
    /// fast (a LAN, loopback), one stream does, and more would only cost requests. Read-ahead is

    func slices(of range: Range<Int64>) -> ClosedRange<Int64> { store.slices(of: range) }

    func touch(_ entry: EntryState, _ range: Range<Int64>, _ now: Double) {
        entry.machine.slicesTouched(slices(of: range), now: now)
    }

    /// Says that cached bytes turned out unreadable (a read, a check, `cache verify`), once.
    func logUnreadable(_ error: Error) {
        logger.error("cached bytes unreadable; they will be fetched again", metadata: ["error": "\(error)"])
    }

    /// Drops bytes from coverage whose data file turned out to be unreadable.
    func forget(entry: EntryHandle, shard: Shard, range: Range<Int64>, generation: Int64) {
        shard.locked { entries in
            guard let entry = entries[entry], entry.info.generation == generation else { return }
            for s in slices(of: range) {
                evictor.addBytes(-evictor.countingScanBytes(entry) { entry.machine.sliceDropped(s, range: store.sliceRange(s)) })
            }
            metrics.noteWasted(entry.machine.takeWasted())
        }
    }

    /// What the waiters of `entry` find when they look again (call under the shard lock).
    private func waiterFacts(_ entry: EntryState) -> EntryMachine.WaiterFacts {
        EntryMachine.WaiterFacts(generation: entry.info.generation, length: entry.info.length,
                                 acceptsRanges: entry.info.acceptsRanges, coverage: entry.coverage, pending: entry.pending)
    }

    /// Passes changes of class on to the transfers (call under the shard lock, so that the
    /// fetcher hears them in the order they were made: the handle only queues them for its loop).
    func pass(_ changes: [InFlightTable.PriorityChange]) {
        fetches.prioritize(changes)
    }

    /// Completes every waiter whose bytes are all here now: in memory (held as they arrived, or
    /// queued for the writer) or on disk (`EntryStateMachine.waitersWoken`). Call under the shard
    /// lock. Answers that open the data file run as jobs of `pool`; with `inline`, answers wholly
    /// from memory are returned instead, for the caller to run once it released the lock (the
    /// fetch thread answers a waiting read from the arriving bytes without a hop to another thread).
    @discardableResult
    func wakeWaiters(_ entry: EntryState, shard: Shard, now: Double, inline: Bool = false) -> [@Sendable () -> Void] {
        guard !entry.waiters.isEmpty else { return [] }
        let woken = entry.machine.waitersWoken(waiterFacts(entry))
        guard !woken.isEmpty else { return [] }
        var inlined: [@Sendable () -> Void] = []
        for wake in woken {
            let w = wake.waiter, clip = wake.clip
            if clip.isEmpty {
                entry.unpin(slices(of: w.range), generation: w.generation)
                pool.submit { [done = w.completion] in done(.success(.empty)) }
                continue
            }
            touch(entry, clip, now)
            // The waiter pinned `w.range`; the lease releases those pins.
            // What it holds comes from its chunks, what waits for the writer from the queue's, the
            // rest (bytes it had no room to hold, or that were on disk before it) from the slices.
            let runs = w.runs(of: clip).flatMap { run, bytes in
                bytes.map { [ReadRun(range: run, source: .bytes($0))] } ?? self.runs(run, pending: entry.pending)
            }
            let fromDisk = runs.contains { if case .disk = $0.source { true } else { false } }
            let id = entry.id, handle = entry.handle
            let answer = { @Sendable [self, done = w.completion, generation = w.generation, files = w.files, range = w.range] in
                done(lease(entry: handle, shard: shard, id: id, generation: generation, files: files,
                           range: range, runs: runs))
            }
            if inline, !fromDisk { inlined.append(answer) } else { pool.submit(answer) }
        }
        reprioritize(entry)
        return inlined
    }

    /// Tells the transfers of `entry` whose class changed (a read began or stopped waiting on
    /// them). Under the shard lock, so that the fetcher hears the changes in the order they were
    /// made (the handle only queues them for its loop).
    func reprioritize(_ entry: EntryState) {
        pass(entry.machine.prioritized(uptime: uptime))
    }

    /// Seconds since boot: how long reads waited, whatever clock the engine reads dates from.
    var uptime: Double { configuration.engineClock.uptime }

    /// Fails every waiter of an older generation: its reader is bound to the version it opened.
    func failStaleWaiters(_ entry: EntryState) {
        let stale = entry.machine.staleWaitersRemoved(generation: entry.info.generation)
        guard !stale.isEmpty else { return }
        let error = CacheError.remoteChanged(url: entry.info.url)
        logger.warning("the file changed remotely; reads of the old version fail", metadata: [
            "url": "\(entry.info.url)", "reads": "\(stale.count)"])
        for w in stale { pool.submit { [done = w.completion] in done(.failure(error)) } }
    }

    /// Plans the waiters again after a fetch ended (or the generation changed): starts fetches
    /// for bytes nobody is fetching any more (`EntryStateMachine.waitersReplanned`). Call under
    /// the shard lock; launch what it returns.
    /// - Parameter endedShort: the transfer that ended delivered less than it promised on its own
    ///   (not stopped by us): waiters that need yet another fetch count it, and give up after 8.
    func replanWaiters(_ entry: EntryState, failed: (range: Range<Int64>, error: CacheError)?,
                       endedShort: Bool = false) -> [Launch] {
        failStaleWaiters(entry)
        let action = entry.machine.waitersReplanned(waiterFacts(entry), failedRange: failed?.range, endedShort: endedShort,
                                                    now: configuration.clock().timeIntervalSince1970,
                                                    uptime: uptime, makeFetchID: ids.makeID)
        for (w, why) in action.failed {
            entry.unpin(slices(of: w.range), generation: w.generation)
            let err: CacheError = switch why {
            case .transferFailed: failed?.error ?? .cancelled
            case .endsEarly: .badResponse(url: entry.info.url, message: "the origin keeps ending transfers early")
            }
            let done = w.completion; pool.submit { done(.failure(err)) }
        }
        pass(action.priorities)
        return action.launches.map { Launch(entry: entry.handle, fetch: $0.fetch, id: $0.id) }
    }

}
