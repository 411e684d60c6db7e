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
/// the data file for the rest: a miss's bytes are never copied in user space here. Under the lock
/// the engine only decides where each run comes from (`ReadRun`); opens happen after. It may
/// block on nothing but the shard lock.
extension EngineCore {
    func makeReaderState(entry: EntryInfo, end: Int64?, door: ReadDoor = .cli, readerClass: ReaderClass = .player) -> ReaderState {
        ReaderState(id: makeID(), entry: entry, end: end, door: door, initialReadAhead: initialReadAhead, readerClass: readerClass)
    }

    /// Plans one read. A hit is answered right here on the caller's thread with a lease on the
    /// data file; missing bytes start (or join) fetches and the read completes once they land,
    /// from the arriving bytes themselves where they cover it.
    ///
    /// A reader is bound to the version it was made for: once the entry moved to another
    /// generation its reads fail with `.remoteChanged`, never answer with the other version.
    func read(reader: ReaderState, offset: Int64, length: Int,
              completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void) {
        let key = reader.entry.key
        let generation = reader.entry.generation
        let shard = shard(for: key)
        let now = configuration.clock().timeIntervalSince1970
        // entry, range, row id, the runs (bytes still pending for the writer in memory)
        var hit: (EntryHandle, Range<Int64>, Int64, [ReadRun])?
        var toLaunch: [Launch] = []
        var immediate: Result<ReadLease, CacheError>?
        var verifyFirst: (EntryHandle, [Int64])?
        var verifyAhead: (EntryHandle, [Int64])?
        var leftBehind: [FetchHandleBox] = []

        shard.locked { entries in
            guard !reader.progress.withLock({ $0.closed }) else { immediate = .failure(.cancelled); return }
            guard let entry = entries[key], entry.isPersisted else {
                immediate = .failure(.storage(path: configuration.directory, message: "entry was removed from the cache: \(key)"))
                return
            }
            guard entry.info.generation == generation else {
                entry.noteError("a reader of an older version was refused (the file changed remotely)")
                immediate = .failure(.remoteChanged(url: entry.info.url))
                return
            }
            let wanted = offset.addingClamped(Int64(max(0, length)))  // offsets come from clients and the kernel
            let end = entry.info.length.map { min($0, wanted) } ?? wanted
            guard offset >= 0, end > offset else { immediate = .success(.empty); return }
            let request = offset..<end
            // Bytes from before this start are served once their checksums were checked; the
            // slices the reader comes to next are checked meanwhile.
            if !entry.unverified.isEmpty {
                let ahead = slicesToVerifyAhead(entry, after: request)
                if !ahead.isEmpty { verifyAhead = (entry.handle, ahead) }
                let unchecked = unverifiedSlices(entry, in: request)
                if !unchecked.isEmpty {
                    verifyFirst = (entry.handle, unchecked)
                    return
                }
            }
            // The same reader asks again for bytes that just timed out (the kernel retries a
            // failed read-ahead at once): one timeout per read, not one per retry.
            if !entry.timedOut.isEmpty, entry.timedOut.contains(where: {
                $0.reader == reader.id && $0.range.overlaps(request) && now - $0.at <= EntryState.retryWindow
            }), !entry.pending.adding(to: entry.coverage).contains(request) {
                immediate = .failure(.timeout(url: entry.info.url))
                return
            }
            // Bytes waiting for the writer count as present: their transfer has passed them.
            let present = entry.pending.adding(to: entry.coverage)
            let running = entry.inflight.running(generation: generation, now: now)
            // A jump forward over bytes that only this reader's own read-ahead is fetching is a
            // seek; over bytes other readers wait for, the page cache they share skipped them.
            let othersWant = running.filter { f in entry.inflight.fetches[f.id]?.interest.contains { $0 != reader.id } ?? false }
            let uptime = Self.uptime
            var orphaned: [Int] = []
            let (pattern, kind, readAhead, paceClass) = reader.progress.withLock { p in
                let pattern = updateReadAhead(&p, readerClass: reader.readerClass, request: request, cached: present, running: othersWant, now: uptime)
                return (pattern, p.pace.kind(now: uptime), p.readAhead, p.pace.readAheadPriority(now: uptime))
            }
            if pattern == .seek {
                // Bytes ahead of the old position are no longer this reader's concern: its fetches
                // there stop unless someone else (or one of its reads still waiting) needs them.
                let waiting = entry.waiters.filter { $0.reader == reader.id }.map(\.range)
                orphaned = entry.inflight.release(reader: reader.id, keeping: waiting)
            }
            if !entry.unreadAhead.isEmpty {
                let read = entry.unreadAhead.remove(request)
                if read > 0 { metrics.readAheadReadBytes.add(read) }
            }
            entry.lastAccess = now
            entry.readStatsDirty = true
            entry.readsByDoor.add(reader.door)

            // A player's read-ahead is one stream: its rate is small, and parallel streams would
            // share the link with the bytes it waits for.
            let planner = ReadPlanner(readAhead: readAhead, seekThreshold: max(2 << 20, readAhead / 2),
                                      streamSize: kind == .paced || reader.readerClass == .scanner
                                          ? nil : streamSize(readAhead: readAhead, rate: entry.inflight.observedRate),
                                      readerEnd: reader.end)
            let readAheadClass: FetchPriority = reader.readerClass.fixedFetchClass ?? paceClass
            var plan = planner.plan(request: request, length: entry.info.length, cached: present, running: running)
            if !entry.info.acceptsRanges { wholeBodyOnly(&plan, running: running) }
            for t in plan.truncations { entry.inflight.truncate(t.fetch, at: t.end) }
            for step in plan.steps { if case let .wait(_, id) = step { entry.inflight.addInterest(reader.id, in: id) } }
            for f in plan.fetches {
                let id = makeID()
                entry.inflight.start(id: id, generation: generation, start: f.start, end: f.end,
                                     reader: reader.id, pinned: !entry.info.acceptsRanges, priority: readAheadClass, now: now)
                toLaunch.append(Launch(entry: entry.handle, fetch: f, id: id))
                metrics.noteFetch(readerClass: reader.readerClass, bytes: (f.end ?? entry.info.length).map { $0 - f.start })
            }
            reader.progress.withLock { $0.pace.note(readEnd: request.upperBound, missed: !plan.isHit, now: uptime) }
            // Pinned while it reads or waits, so eviction cannot take bytes it needs.
            entry.pin(slices(of: request), generation: generation)
            if plan.isHit {
                entry.hits += 1
                entry.bytesFromCache += request.length
                touch(entry, request, now)
                hit = (entry.handle, request, entry.id, runs(request, pending: entry.pending))
            } else {
                entry.misses += 1
                let waiter = Waiter(reader: reader.id, files: reader.files, range: request, generation: generation,
                                    deadline: now + configuration.readTimeout, completion: completion)
                waiter.background = reader.yieldsWhenWaiting
                for v in entry.pending.views(in: request) { waiter.fill(v.range, in: v.chunk.storage, at: v.storageOffset) }
                entry.waiters.append(waiter)
            }
            reprioritize(entry)
            // What the seek left behind stops now, not at its next bytes: held for the read
            // (paused, so it gets none), it would keep its connection, and the origin would go on
            // filling that connection's buffers from the link the read needs. (Unless this read
            // joined it: a seek forward into a stream's own range waits on that stream.)
            leftBehind = orphaned.filter { entry.inflight.fetches[$0]?.interest.isEmpty ?? false }.compactMap { handles.existing($0) }
        }
        leftBehind.forEach { $0.cancel() }
        if let (entry, unchecked) = verifyFirst {
            pool.submit(key: Self.verifyKey) { [self] in
                verify(entry, shard: shard, slices: unchecked, generation: generation)
                read(reader: reader, offset: offset, length: length, completion: completion)
            }
        }
        if let (entry, ahead) = verifyAhead {
            // After the read's own check (jobs of one key run in order).
            pool.submit(key: Self.verifyKey) { [self] in
                verify(entry, shard: shard, slices: ahead, generation: generation)
            }
        }
        if verifyFirst != nil { return }
        toLaunch.forEach(launch)
        if let immediate { completion(immediate); return }
        if let (entry, range, id, runs) = hit {
            completion(lease(entry: entry, shard: shard, id: id, generation: generation, files: reader.files,
                             range: range, runs: runs, originBytes: 0))   // a hit: nothing waited for
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
        let shard = shard(for: key)
        let now = configuration.clock().timeIntervalSince1970
        var found: (EntryHandle, Range<Int64>, Int64)?
        shard.locked { entries in
            guard !reader.progress.withLock({ $0.closed }), let entry = entries[key], entry.isPersisted,
                  entry.info.generation == generation else { return }
            let wanted = offset.addingClamped(Int64(max(0, length)))
            let end = entry.info.length.map { min($0, wanted) } ?? wanted
            guard offset >= 0, end > offset else { return }
            let range = offset..<end
            // Only a file all on disk: a reader served from the page cache sends no reads, and
            // the engine's read-ahead, which follows them, would take its next read of a file
            // still being fetched for a seek and start over small (seen: a cold GiB over
            // loopback at less than half its speed when a wave of read-ahead had just ended).
            guard let size = entry.info.length, entry.coverage.contains(0..<size), entry.pending.isEmpty,
                  unverifiedSlices(entry, in: range).isEmpty else { return }
            entry.pin(slices(of: range), generation: generation)
            entry.bytesFromCache += range.length
            entry.lastAccess = now
            entry.readStatsDirty = true
            touch(entry, range, now)
            found = (entry.handle, range, entry.id)
        }
        guard let (entry, range, id) = found else { return nil }
        let result = lease(entry: entry, shard: shard, id: id, generation: generation, files: reader.files,
                           range: range, runs: [ReadRun(range: range, source: .disk)], originBytes: 0)
        return try? result.get()
    }

    /// How a hit on `range` is answered: from the data file, except bytes still pending for
    /// the writer, which come from memory (views of their chunks, held by the lease). Call
    /// under the shard lock.
    func runs(_ range: Range<Int64>, pending: PendingBytes) -> [ReadRun] {
        let inMemory = pending.views(in: range)
        guard !inMemory.isEmpty else { return [ReadRun(range: range, source: .disk)] }
        var out: [ReadRun] = []
        var at = range.lowerBound
        for v in inMemory {
            if v.range.lowerBound > at { out.append(ReadRun(range: at..<v.range.lowerBound, source: .disk)) }
            out.append(ReadRun(range: v.range, source: .pending(v)))
            at = v.range.upperBound
        }
        if at < range.upperBound { out.append(ReadRun(range: at..<range.upperBound, source: .disk)) }
        return out
    }

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
                let f = try file ?? files.file {
                    try idleFiles.take(entry, generation: generation)
                        ?? DataFile(fd: store.openForReading(entry: id, generation: generation))
                }
                file = f
                pieces.append(.file(fd: f.fd, offset: run.lowerBound, count: run.count))
            } catch {
                unpin()
                logger.error("cached bytes unreadable; they will be fetched again", metadata: ["error": "\(error)"])
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
    /// fetched in waves of half a window (the planner waits for a gap that large), so a wave, not
    /// the window, is what `maxStreams` streams share: each wave then fills the link by itself.
    func streamSize(readAhead: Int64, rate: Double?) -> Int64? {
        guard let rate, configuration.maxStreams > 1, readAhead >= 2 * configuration.minStreamSize else { return nil }
        let byRate = ReadPlanner.bytes(catchingUpAt: rate, for: configuration.streamSeconds)
        return max(configuration.minStreamSize, byRate, readAhead / Int64(2 * configuration.maxStreams))
    }

    /// An origin that ignores ranges answers every request with the whole body from byte 0, so
    /// one such transfer at a time feeds every reader (single flight), and none is cut short by
    /// a seek: asking again would start over from byte 0.
    private func wholeBodyOnly(_ plan: inout ReadPlanner.Plan, running: [ReadPlanner.RunningFetch]) {
        plan.truncations = []
        guard !plan.fetches.isEmpty else { return }
        if running.isEmpty {
            plan.fetches = [ReadPlanner.Fetch(start: 0, end: nil)]
        } else {
            plan.fetches = []
            plan.steps = running.map { .wait($0.cursor..<($0.end ?? Int64.max), fetch: $0.id) }
        }
    }

    enum AccessPattern { case first, sequential, seek }

    /// Sequential readers get a window that grows fourfold per read up to `maxReadAhead` (a cold
    /// read over a long fat link reaches its parallel streams a few round trips sooner than by
    /// doubling), but never past what the reader consumes in a few seconds (`ReaderPace`): a
    /// player gets read-ahead in proportion to its bitrate, a copy on a fast link the whole
    /// window. A seek resets both. `running`: the fetches other readers wait for.
    ///
    /// A scanner keeps its fixed margin; an unknown reader gets none until it earned it
    /// (`ReaderClass`): `ReaderClass.earnAfter` reads in a row, each continuing the one before,
    /// or a first read only a streaming reader makes (`ReaderClass.earnsAtOnce`).
    private func updateReadAhead(_ reader: inout ReaderState.Progress, readerClass: ReaderClass, request: Range<Int64>,
                                 cached: RangeSet, running: [ReadPlanner.RunningFetch], now: Double) -> AccessPattern {
        if ReadPlanner.continuesSequentially(request, lastEnd: reader.lastEnd, slack: 1 << 20, behind: reader.readAhead,
                                             cached: cached, running: running) {
            reader.inARow += 1
            if reader.inARow >= ReaderClass.earnAfter { reader.earned = true }
            if readerClass != .scanner && reader.earned {
                let grown = min(configuration.maxReadAhead, max(reader.readAhead * 4, initialReadAhead))
                reader.readAhead = min(grown, reader.pace.readAheadBound(now: now, floor: initialReadAhead))
            }
            reader.lastEnd = max(reader.lastEnd, request.upperBound)
            return .sequential
        }
        let first = reader.lastEnd < 0
        if first && ReaderClass.earnsAtOnce(firstRead: request) { reader.earned = true }
        reader.inARow = 0
        reader.readAhead = readerClass == .scanner ? ReaderClass.scanMargin : reader.earned ? initialReadAhead : 0
        reader.lastEnd = request.upperBound
        reader.pace.restart(now: now, at: request.lowerBound)
        return first ? .first : .seek
    }

    func slices(of range: Range<Int64>) -> ClosedRange<Int64> {
        store.sliceIndex(of: range.lowerBound)...store.sliceIndex(of: max(range.lowerBound, range.upperBound - 1))
    }

    func touch(_ entry: EntryState, _ range: Range<Int64>, _ now: Double) {
        for s in slices(of: range) { entry.sliceAccess[s] = now }
    }

    /// Reads bytes that the index says are on disk. A missing or short data file is reported as
    /// an error (and its bytes forgotten by the caller), never served as zeros.
    func readFromDisk(entryID: Int64, generation: Int64, range: Range<Int64>) -> Result<[UInt8], CacheError> {
        guard !range.isEmpty else { return .success([]) }   // the shared empty array is not ours to write
        do {
            let bytes = try [UInt8](unsafeUninitializedCapacity: Int(range.length)) { buf, count in
                try store.read(entry: entryID, generation: generation, range: range,
                               into: UnsafeMutableRawBufferPointer(buf), at: 0)
                count = Int(range.length)
            }
            return .success(bytes)
        } catch let e as StorageError {
            logger.error("cached bytes unreadable; they will be fetched again", metadata: ["error": "\(e)"])
            return .failure(e.cacheError)
        } catch {
            return .failure(.storage(path: configuration.directory, message: "\(error)"))
        }
    }

    /// Drops bytes from coverage whose data file turned out to be unreadable.
    func forget(entry: EntryHandle, shard: Shard, range: Range<Int64>, generation: Int64) {
        shard.locked { entries in
            guard let entry = entries[entry], entry.info.generation == generation else { return }
            for s in slices(of: range) {
                let r = store.sliceRange(s)
                let removed = entry.coverage.remove(r)
                entry.sliceBytes[s] = nil
                addBytes(-removed)
            }
        }
    }

    /// Completes every waiter whose bytes are all here now: in memory (held as they arrived, or
    /// queued for the writer) or on disk. Call under the shard lock. Answers that open the data file run as
    /// jobs of `pool`; with `inline`, answers wholly from memory are returned instead, for
    /// the caller to run once it released the lock (the fetch thread answers a waiting read from
    /// the arriving bytes without a hop to another thread).
    @discardableResult
    func wakeWaiters(_ entry: EntryState, shard: Shard, now: Double, inline: Bool = false) -> [@Sendable () -> Void] {
        guard !entry.waiters.isEmpty else { return [] }
        var inlined: [@Sendable () -> Void] = []
        var still: [Waiter] = []
        for w in entry.waiters {
            let clip = w.range.lowerBound..<max(w.range.lowerBound, min(w.range.upperBound, entry.info.length ?? Int64.max))
            guard w.isComplete(within: clip, cached: entry.coverage, pending: entry.pending.ranges) else {
                still.append(w)
                continue
            }
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
        let answered = still.count < entry.waiters.count
        entry.waiters = still
        if answered { reprioritize(entry) }
        return inlined
    }

    /// Tells the transfers of `entry` whose class changed (a read began or stopped waiting on
    /// them). Under the shard lock, so that the fetcher hears the changes in the order they were
    /// made (the handle only queues them for its loop).
    func reprioritize(_ entry: EntryState) {
        let waiting = entry.waiters.filter { !$0.background }.map { (range: $0.range, since: $0.since) }
        for change in entry.inflight.prioritize(waiting: waiting, now: Self.uptime) {
            handles.existing(change.id)?.setPriority(change.priority, waitedSeconds: change.waitedSeconds)
        }
    }

    /// Seconds since boot: how long reads waited, whatever clock the engine reads dates from.
    static var uptime: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// Fails every waiter of an older generation: its reader is bound to the version it opened.
    func failStaleWaiters(_ entry: EntryState) {
        let stale = entry.waiters.filter { $0.generation != entry.info.generation }
        guard !stale.isEmpty else { return }
        entry.waiters.removeAll { $0.generation != entry.info.generation }
        let error = CacheError.remoteChanged(url: entry.info.url)
        logger.warning("the file changed remotely; reads of the old version fail", metadata: [
            "url": "\(entry.info.url)", "reads": "\(stale.count)"])
        for w in stale { pool.submit { [done = w.completion] in done(.failure(error)) } }
    }

    /// Plans the waiters again after a fetch ended (or the generation changed): starts fetches
    /// for bytes nobody is fetching any more. Call under the shard lock; launch what it returns.
    /// - Parameter endedShort: the transfer that ended delivered less than it promised on its own
    ///   (not stopped by us): waiters that need yet another fetch count it, and give up after 8.
    func replanWaiters(_ entry: EntryState, failed: (range: Range<Int64>, error: CacheError)?,
                       endedShort: Bool = false) -> [Launch] {
        failStaleWaiters(entry)
        var launches: [Launch] = []
        var still: [Waiter] = []
        let planner = ReadPlanner(readAhead: 0)
        let now = Date().timeIntervalSince1970
        for w in entry.waiters {
            // What it has: bytes on disk, bytes queued for the writer (which reach it even if the
            // disk refuses them), and bytes that reached it in memory (a full disk).
            var have = entry.pending.adding(to: entry.coverage)
            for r in w.filled.ranges { have.insert(r) }
            if let failed, w.range.overlaps(failed.range), !have.contains(w.range) {
                entry.unpin(slices(of: w.range), generation: w.generation)
                let err = failed.error
                let done = w.completion; pool.submit { done(.failure(err)) }
                continue
            }
            let running = entry.inflight.running(generation: entry.info.generation, now: now)
            var plan = planner.plan(request: w.range, length: entry.info.length, cached: have, running: running)
            if !entry.info.acceptsRanges { wholeBodyOnly(&plan, running: running) }
            if !plan.fetches.isEmpty && endedShort {
                w.replans += 1
                if w.replans > 8 {
                    entry.unpin(slices(of: w.range), generation: w.generation)
                    let err = CacheError.badResponse(url: entry.info.url, message: "the origin keeps ending transfers early")
                    let done = w.completion; pool.submit { done(.failure(err)) }
                    continue
                }
            }
            for step in plan.steps { if case let .wait(_, id) = step { entry.inflight.addInterest(w.reader, in: id) } }
            for f in plan.fetches {
                let id = makeID()
                entry.inflight.start(id: id, generation: entry.info.generation, start: f.start, end: f.end,
                                     reader: w.reader, pinned: !entry.info.acceptsRanges, now: now)
                launches.append(Launch(entry: entry.handle, fetch: f, id: id))
            }
            still.append(w)
        }
        entry.waiters = still
        reprioritize(entry)
        return launches
    }

    /// The reader is done: fail its pending reads and cancel fetches nobody else wants.
    func close(reader: ReaderState) {
        let key = reader.entry.key
        let shard = shard(for: key)
        let file = reader.files.closeAll()
        var overflow: DataFile?   // a kept descriptor given up for room: closed when this returns, after the lock
        let (waiting, cancels): ([Waiter.Completion], [FetchHandleBox]) = shard.locked { entries in
            reader.progress.withLock { $0.closed = true }
            guard let entry = entries[key] else { return ([], []) }
            if let file, entry.isCurrent(reader.entry.generation) {
                overflow = idleFiles.give(file, of: entry.handle, generation: reader.entry.generation)
            }
            let mine = entry.waiters.filter { $0.reader == reader.id }
            entry.waiters.removeAll { $0.reader == reader.id }
            for w in mine { entry.unpin(slices(of: w.range), generation: w.generation) }
            let orphaned = entry.inflight.release(reader: reader.id)
            if !mine.isEmpty { reprioritize(entry) }
            // Orphaned fetches stop at their next chunk (advance says .stop); cancel them now too.
            return (mine.map(\.completion), orphaned.compactMap { handles.existing($0) })
        }
        cancels.forEach { $0.cancel() }
        for done in waiting { pool.submit { done(.failure(.cancelled)) } }
        withExtendedLifetime(overflow) {}   // its close, here, outside the shard lock
    }
}
