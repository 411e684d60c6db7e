import Foundation

/// The read path.
///
/// Owns: planning a read against the entry's coverage and fetches in flight (pure
/// `ReadPlanner`), the waiters of reads still missing bytes, and the answer, a `ReadLease`.
/// Runs on the caller's thread (a FUSE worker, a proxy event loop, a CLI thread) under the
/// entry's shard lock for the planning only; the lease is made outside it. A hit does no disk
/// I/O: it hands out descriptors the reader keeps open (opening the data file at most once per
/// reader); the disk is read when the front door sends the bytes (FUSE splices them, the proxy
/// sends the file), with the kernel's own read-ahead on that descriptor, as for any file read
/// in order. Waiters are answered by jobs on `pool` (or inline on the fetch thread when memory
/// covers them), from the bytes that arrived for them (held in the chunks they landed in, within
/// the `MemoryBudget`'s retained share), bytes still queued for the writer (the same chunks) and
/// the data file for the rest: a miss's bytes are never copied in user space here. It may block
/// on nothing but the shard lock.
///
/// Every decision is the entry's state machine's (`EntryStateMachine+Read`, `+Waiters`, `+Tick`):
/// under the shard lock the engine gathers what the machine reads (`ReadFacts`), calls it, and
/// carries out under the lock only what must stay in order with it (pins, slice access times,
/// classes passed on to transfers); launches, cancels, checks, opens of the data file and
/// answers happen after.
///
/// Map of this folder (`Read/`): a read, from the range asked to the lease that answers it.
/// - `Reader.swift` (this file): the read path: plan under the shard lock, lease outside.
/// - `ReadAnswers.swift`: leases, and the waiting reads woken, planned again or failed.
/// - `ReadLease.swift`: the answer: descriptors and pooled chunks, not copies.
/// - `ChunkedRead.swift`: `LeaseReading` and the chunked read of a lease into its consumer.
/// - `ReadFully.swift`: the one `pread` loop of data files and served files.
/// - `ReadAccounting.swift`: one reader's counts (hit or miss, latency, failures).
/// - `WholeFile.swift`: a fully cached version held whole for the kernel (FUSE passthrough).
/// The pure parts (the planner, reader class, pace, tempo, earned read-ahead) are the EntryMachine
/// module's (`ReadPlanner.swift`, `ReaderClass.swift`, `ReaderPace.swift`, `ReaderTempo.swift`,
/// `EarnedReadAhead.swift`).
/// Neighbours: asks the entry's machine (`readRequested` and waiters) and starts fetches through
/// `Fetch/`; leases hold `Storage/` descriptors and `Memory/` chunks; counts go to `Status/`.
/// Called by the front doors through `CacheReader` (`Engine/`); `Fetch/` answers its waiting
/// reads when bytes land.
final class Reader: Sendable {
    private let configuration: CacheConfiguration
    private let shards: [Shard]
    private let store: SliceStore
    private let evictor: Evictor
    private let fetches: FetchCoordinator
    private let ids: EngineIDs
    private let pool: BlockingIOPool
    private let metrics: CacheMetrics
    /// Origins whose ranges were lately answered 200: their reads ask for less (`RangeReliability`).
    let originRanges: OriginRangeMemory
    private let answers: ReadAnswers
    private let verifier: SliceVerifier
    private let loader: EntryLoader
    private let transfers: TransferStarts

    init(configuration: CacheConfiguration, shards: [Shard], store: SliceStore, evictor: Evictor, fetches: FetchCoordinator,
         ids: EngineIDs, pool: BlockingIOPool, metrics: CacheMetrics, originRanges: OriginRangeMemory, answers: ReadAnswers,
         verifier: SliceVerifier, loader: EntryLoader, transfers: TransferStarts) {
        self.configuration = configuration
        readTimeout = .seconds(configuration.readTimeout)
        self.shards = shards
        self.store = store
        self.evictor = evictor
        self.fetches = fetches
        self.ids = ids
        self.pool = pool
        self.metrics = metrics
        self.originRanges = originRanges
        self.answers = answers
        self.verifier = verifier
        self.loader = loader
        self.transfers = transfers
    }

    private var initialReadAhead: Int64 { configuration.initialReadAhead }
    /// `--read-timeout` as the machine takes it, converted once rather than at every read.
    private let readTimeout: Duration

    func makeReaderState(entry: EntryInfo, end: Int64?, door: ReadDoor = .cli, readerClass: ReaderClass = .player,
                         scanShare: Bool = false) -> ReaderState {
        ReaderState(id: ids.makeID(), entry: entry, end: end, door: door, initialReadAhead: initialReadAhead, readerClass: readerClass,
                    fillsScanShare: evictor.scanShare.isOn && (scanShare || readerClass == .scanner))
    }

    /// Plans one read. A hit is answered right here on the caller's thread with a lease on the
    /// data file; missing bytes start (or join) fetches and the read completes once they land,
    /// from the arriving bytes themselves where they cover it.
    ///
    /// A reader is bound to the version it was made for: once the entry moved to another
    /// generation its reads fail with `.remoteChanged`, never answer with the other version.
    ///
    /// An entry let go while idle (`EntryLoader`) is loaded again first (`loaded`: it was).
    func read(reader: ReaderState, offset: Int64, length: Int, loaded: Bool = false,
              completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void) {
        let key = reader.entry.key
        let generation = reader.entry.generation
        let shard = shards.of(key)
        let now = configuration.clock().timeIntervalSince1970
        let rangesUnreliable = originRanges.unreliable(url: reader.entry.url)   // one atomic load while no origin is
        // Watched or bulk (`ReaderTempo`) is judged by when reads are asked and answered.
        let judged = reader.readerClass.fixedFetchClass == nil
        let completion = judged ? answerNoted(reader, completion) : completion
        var request = EntryMachine.ReadRequest(reader: reader.id, readerClass: reader.readerClass, readerEnd: reader.end,
                                               door: reader.door, waitClass: reader.readerClass.waitedFetchClass,
                                               generation: generation, offset: offset, length: length)
        // The machine decides; under the lock the engine only pins, touches and passes on classes.
        let (action, entry, id, failure, verifyAhead) = shard.locked { entries
            -> (EntryMachine.ReadAction, EntryHandle?, Int64, CacheError?, [Int64]) in
            guard let entry = entries[key] else {
                let why: EntryMachine.ReadFailure = reader.progress.withLock { $0.closed } ? .cancelled : .removed
                if why == .removed && !loaded { return (EntryMachine.ReadAction(.wait(offset..<offset)), nil, -1, nil, []) }
                return (EntryMachine.ReadAction(.fail(why)), nil, -1, readFailure(why, key: key, entry: nil), [])
            }
            let facts = readFacts(entry)
            let monotonic = configuration.engineClock.monotonic
            let uptime = monotonic.seconds
            let action = reader.progress.withLock { p in
                if judged { request.bulk = Self.judge(&p.tempo, now: uptime) }
                return entry.machine.readRequested(request, facts: facts, progress: &p, now: now, monotonic: monotonic,
                                            readAheadRule: { p, request, present, othersWant in
                                                updateReadAhead(&p, readerClass: reader.readerClass, request: request,
                                                                cached: present, running: othersWant, now: uptime,
                                                                rangesUnreliable: rangesUnreliable)
                                            },
                                            streamSize: streamSize, makeFetchID: ids.makeID,
                                            makeReply: { WaitingRead(files: reader.files, range: $0, completion: completion) })
            }
            // The new waiter holds the bytes of its range pending for the writer (their memory
            // counted in the budget's retained share), so they reach it even if the disk refuses them.
            if !action.holdPending.isEmpty, let w = entry.waiters.last {
                for v in action.holdPending { w.fill(v.range, in: v.chunk.chunkStorage, at: v.storageOffset) }
            }
            // Marked queued, so that no other read queues them again.
            let verifyAhead = action.verifyAhead.map { verifier.slicesToVerifyAhead(entry, after: $0) } ?? []
            if let pinned = action.pinned {
                // Pinned while it reads or waits, so eviction cannot take bytes it needs.
                entry.pin(store.slices(of: pinned), generation: generation)
            }
            if case let .hit(range, _) = action.answer { answers.touch(entry, range, now) }
            if reader.fillsScanShare, entry.isPersisted { markScanned(entry, offset: offset, length: length) }
            answers.pass(action.priorities)
            guard case let .fail(why) = action.answer else { return (action, entry.handle, entry.id, nil, verifyAhead) }
            return (action, entry.handle, entry.id, readFailure(why, key: key, entry: entry), verifyAhead)
        }
        if entry == nil, !loaded, case .wait = action.answer {
            _ = loader.loadInline(key)
            return read(reader: reader, offset: offset, length: length, loaded: true, completion: completion)
        }
        fetches.cancel(action.cancel)
        if action.readAheadRead > 0 { metrics.readAheadReadBytes.add(action.readAheadRead) }
        if case let .verifyFirst(unchecked) = action.answer, let entry {
            pool.submit(key: EngineCore.verifyKey) { [self] in
                verifier.verify(entry, shard: shard, slices: unchecked, generation: generation)
                read(reader: reader, offset: offset, length: length, completion: completion)
            }
        }
        if !verifyAhead.isEmpty, let entry {
            // After the read's own check (jobs of one key run in order).
            pool.submit(key: EngineCore.verifyKey) { [self] in
                verifier.verify(entry, shard: shard, slices: verifyAhead, generation: generation)
            }
        }
        for f in action.launches {
            metrics.noteFetch(readerClass: reader.readerClass, bytes: f.bytes)
            if let entry { transfers.launch(Launch(entry: entry, fetch: f.fetch, id: f.id)) }
        }
        switch action.answer {
        case .fail:
            completion(.failure(failure ?? .cancelled))
        case .empty:
            completion(.success(.empty))
        case let .hit(range, runs):
            guard let entry else { return }
            completion(answers.lease(entry: entry, shard: shard, id: id, generation: generation, files: reader.files,
                             range: range, runs: ReadRun.of(runs), originBytes: 0))   // a hit: nothing waited for
        case .verifyFirst, .wait:
            break
        }
    }

    typealias EntryMachine = EntryStateMachine<EntryState.OpenCompletion>

    /// `completion`, which first tells the reader's `ReaderTempo` that its read was answered.
    private func answerNoted(_ reader: ReaderState, _ completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void)
        -> @Sendable (Result<ReadLease, CacheError>) -> Void {
        { [self] result in
            let now = answers.uptime
            reader.progress.withLock { $0.tempo?.answered(now: now) }
            completion(result)
        }
    }

    /// A read of a judged reader is asked (`ReaderTempo`): whether it reads in bulk.
    static func judge(_ tempo: inout ReaderTempo?, now: Double) -> Bool {
        if tempo == nil { tempo = ReaderTempo(now: now) }
        return tempo!.asked(now: now) == .bulk
    }

    /// What a read finds of `entry` beside its machine (call under the shard lock).
    private func readFacts(_ entry: EntryState) -> EntryMachine.ReadFacts {
        EntryMachine.ReadFacts(generation: entry.info.generation, length: entry.info.length,
                               acceptsRanges: entry.info.acceptsRanges, coverage: entry.coverage, pending: entry.pending,
                               unverified: entry.unverified, sliceSize: store.sliceSize,
                               readTimeout: readTimeout)
    }

    /// The error a read fails with, as the machine said (call under the shard lock: a read of an
    /// older version is noted among the entry's errors).
    private func readFailure(_ why: EntryMachine.ReadFailure, key: CacheKey, entry: EntryState?) -> CacheError {
        switch why {
        case .cancelled:
            return .cancelled
        case .removed:
            return .storage(path: configuration.directory, message: "entry was removed from the cache: \(key)")
        case .remoteChanged:
            entry?.noteError("a reader of an older version was refused (the file changed remotely)", at: configuration.clock())
            return .remoteChanged(url: entry?.info.url ?? "")
        case .timedOut:
            return .timeout(url: entry?.info.url ?? "")
        }
    }

    /// A lease on `[offset, offset+length)` (clipped to the end of the file) if the whole file is
    /// on disk, the range is checked, and it is of the reader's version; nil otherwise. Nothing is fetched or waited
    /// for, and the reader's read-ahead and pace stay as they are: the mount puts these bytes
    /// into the kernel's page cache ahead of a sequential reader, who then reads them without
    /// asking us. Counted as bytes served from the cache.
    func cachedLease(reader: ReaderState, offset: Int64, length: Int) -> ReadLease? {
        let key = reader.entry.key
        let generation = reader.entry.generation
        let shard = shards.of(key)
        let now = configuration.clock().timeIntervalSince1970
        let found: (EntryHandle, Range<Int64>, Int64)? = shard.locked { entries in
            guard let entry = entries[key] else { return nil }
            guard let range = entry.machine.cachedReadRequested(offset: offset, length: length, generation: generation,
                                                                closed: reader.progress.withLock({ $0.closed }),
                                                                facts: readFacts(entry), now: now) else { return nil }
            entry.pin(store.slices(of: range), generation: generation)
            answers.touch(entry, range, now)
            return (entry.handle, range, entry.id)
        }
        guard let (entry, range, id) = found else { return nil }
        let result = answers.lease(entry: entry, shard: shard, id: id, generation: generation, files: reader.files,
                           range: range, runs: [ReadRun(range: range, source: .disk)], originBytes: 0)
        return try? result.get()
    }
    /// fetched in waves of half a window (the planner waits for a gap that large), so a wave, not
    /// the window, is what `maxStreams` streams share: each wave then fills the link by itself.
    func streamSize(readAhead: Int64, rate: Double?) -> Int64? {
        guard let rate, configuration.maxStreams > 1, readAhead >= 2 * configuration.minStreamSize else { return nil }
        let byRate = ReadPlanner.bytes(catchingUpAt: rate, for: configuration.streamSeconds)
        return max(configuration.minStreamSize, byRate, readAhead / Int64(2 * configuration.maxStreams))
    }

    /// A player (and the engine's own warm-up) gets a window that grows fourfold per sequential
    /// read up to `maxReadAhead` (a cold read over a long fat link reaches its parallel streams a
    /// few round trips sooner than by doubling), but never past what the reader consumes in a few
    /// seconds (`ReaderPace`): a player gets read-ahead in proportion to its bitrate, a copy on a
    /// fast link the whole window. A seek resets both. `running`: the fetches other readers wait
    /// for.
    ///
    /// Every other reader (a scanner, a program nobody listed, a thumbnailer through the mount)
    /// pays for what it reads: its window is what it earned by reading (`EarnedReadAhead`), at
    /// most half of what it read since its last seek, and within the same bounds; except one
    /// whose first read is a copy's (`ReaderClass.earnsAtOnce`: big blocks from byte 0), which
    /// reads ahead as a player from then on.
    ///
    /// On an origin whose ranges are unreliable (`rangesUnreliable`, `RangeReliability`), a read
    /// that starts anew loses what was earned (`ReaderClass.earnedAfterRestart`).
    private func updateReadAhead(_ reader: inout ReaderState.Progress, readerClass: ReaderClass, request: Range<Int64>,
                                 cached: RangeSet, running: [ReadPlanner.RunningFetch], now: Double,
                                 rangesUnreliable: Bool) -> AccessPattern {
        let sequential = ReadPlanner.continuesSequentially(request, lastEnd: reader.lastEnd, slack: 1 << 20,
                                                           behind: reader.readAhead, cached: cached, running: running)
        if reader.earning != nil, reader.lastEnd < 0, ReaderClass.earnsAtOnce(firstRead: request) {
            // A first read of big blocks from byte 0 is a copy's (a program nobody listed reading
            // a file through): read-ahead as a player's, from this read on.
            reader.earning = nil
        }
        if var earning = reader.earning {
            if sequential {
                earning.continued(by: request, limit: min(configuration.maxReadAhead,
                                                          reader.pace.readAheadBound(now: now, floor: initialReadAhead)))
            } else {
                earning.started(by: request)
            }
            reader.earning = earning
            reader.readAhead = readerClass == .scanner ? Self.scannerWindow(earning.window, request, cached: cached)
                                                       : earning.window
        }
        if sequential {
            reader.inARow += 1
            if reader.inARow >= ReaderClass.earnAfter { reader.earned = true }
            if reader.earning == nil && reader.earned {
                let grown = min(configuration.maxReadAhead, max(reader.readAhead * 4, initialReadAhead))
                reader.readAhead = min(grown, reader.pace.readAheadBound(now: now, floor: initialReadAhead))
            }
            reader.lastEnd = max(reader.lastEnd, request.upperBound)
            return .sequential
        }
        let first = reader.lastEnd < 0
        reader.earned = ReaderClass.earnedAfterRestart(earned: reader.earned, first: first, request: request,
                                                       rangesUnreliable: rangesUnreliable)
        reader.inARow = 0
        if reader.earning == nil { reader.readAhead = reader.earned ? initialReadAhead : 0 }
        reader.lastEnd = request.upperBound
        reader.pace.restart(now: now, at: request.lowerBound, seek: !first)
        return first ? .first : .seek
    }

    /// A scanner's read-ahead past `request`: the window it earned while its reads miss, none
    /// while they are answered from the cache. A re-scan reads what the last scan read (kept in
    /// the scan share): a window past each of its reads would be a request the probe never waits
    /// for, cancelled when it closes, and the only one the re-scan sends.
    static func scannerWindow(_ earned: Int64, _ request: Range<Int64>, cached: RangeSet) -> Int64 {
        cached.contains(request) ? 0 : earned
    }

    /// A scanner (or `preload --head/--tail`) read `length` bytes at `offset`: the slices it
    /// touched, hit or miss, are scan slices (`ScanShare`), marked in the index behind. Call
    /// under the shard lock, on a live entry.
    func markScanned(_ entry: EntryState, offset: Int64, length: Int) {
        let end = min(offset + Int64(max(length, 1)), entry.info.length ?? .max)
        guard offset < end else { return }
        let before = entry.scanBytes
        let marked = entry.machine.slicesScanned(store.slices(of: offset..<end))
        guard !marked.isEmpty else { return }
        evictor.scanShare.add(entry.scanBytes - before)
        for s in marked { store.recordScanSlice(.init(entryID: entry.id, generation: entry.info.generation, slice: s)) }
    }

    /// The reader is done: fail its pending reads and cancel fetches nobody else wants.
    func close(reader: ReaderState) {
        let key = reader.entry.key
        let shard = shards.of(key)
        let file = reader.files.closeAll()
        var overflow: DataFile?   // a kept descriptor given up for room: closed when this returns, after the lock
        let (waiting, cancels): ([Waiter.Completion], [FetchHandleBox]) = shard.locked { entries in
            reader.progress.withLock { $0.closed = true }
            guard let entry = entries[key] else { return ([], []) }
            if let file, entry.isCurrent(reader.entry.generation) {
                overflow = store.keepForNextReader(file, of: entry.handle, generation: reader.entry.generation)
            }
            let (mine, orphaned, priorities) = entry.machine.readerClosed(reader.id, uptime: answers.uptime)
            for w in mine { entry.unpin(store.slices(of: w.range), generation: w.generation) }
            answers.pass(priorities)
            // Orphaned fetches stop at their next chunk (advance says .stop); cancel them now too.
            return (mine.map(\.completion), fetches.running(orphaned))
        }
        cancels.forEach { $0.cancel() }
        for done in waiting { pool.submit { done(.failure(.cancelled)) } }
        withExtendedLifetime(overflow) {}   // its close, here, outside the shard lock
    }
}
