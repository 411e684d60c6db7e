import Foundation

extension EngineCore {
    func makeReaderState(entry: EntryInfo) -> ReaderState {
        ReaderState(id: makeID(), entry: entry, initialReadAhead: initialReadAhead)
    }

    /// Plans one read. Bytes on disk are read right here on the caller's thread; missing bytes
    /// start (or join) fetches and the read completes once they land.
    func read(reader: ReaderState, offset: Int64, length: Int,
              completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        let key = reader.entry.key
        let shard = shard(for: key)
        let now = Date().timeIntervalSince1970
        var hit: (EntryState, Range<Int64>, Int64, Int64)?   // entry, range, generation, id
        var toLaunch: [(EntryState, ReadPlanner.Fetch, Int)] = []
        var immediate: Result<[UInt8], CacheError>?

        shard.locked {
            guard !reader.closed else { immediate = .failure(.cancelled); return }
            guard let entry = shard.entries[key], entry.isPersisted else {
                immediate = .failure(.storage(path: configuration.directory, message: "entry was removed from the cache: \(key)"))
                return
            }
            if reader.entry.generation != entry.info.generation { reader.entry = entry.info }
            let wanted = offset.addingClamped(Int64(length))  // offsets come from clients and the kernel
            let end = entry.info.length.map { min($0, wanted) } ?? wanted
            guard offset >= 0, end > offset else { immediate = .success([]); return }
            let request = offset..<end
            if updateReadAhead(reader, request: request) == .seek {
                // Bytes ahead of the old position are no longer this reader's concern: its fetches
                // there stop unless someone else (or one of its reads still waiting) needs them.
                let waiting = entry.waiters.filter { $0.reader == reader.id }.map(\.range)
                _ = entry.inflight.release(reader: reader.id, keeping: waiting)
            }
            entry.lastAccess = now

            let planner = ReadPlanner(readAhead: reader.readAhead, seekThreshold: max(2 << 20, reader.readAhead / 2))
            let plan = planner.plan(request: request, length: entry.info.length, cached: entry.coverage,
                                    running: entry.inflight.running(generation: entry.info.generation, now: now))
            for t in plan.truncations { entry.inflight.truncate(t.fetch, at: t.end) }
            for step in plan.steps { if case let .wait(_, id) = step { entry.inflight.addInterest(reader.id, in: id) } }
            for f in plan.fetches {
                let id = makeID()
                entry.inflight.start(id: id, generation: entry.info.generation, start: f.start, end: f.end,
                                     reader: reader.id, now: now)
                toLaunch.append((entry, f, id))
            }
            if plan.isHit {
                entry.hits += 1
                entry.bytesFromCache += request.length
                entry.pin(slices(of: request))
                touch(entry, request, now)
                hit = (entry, request, entry.info.generation, entry.id)
            } else {
                entry.misses += 1
                // Pinned while it waits, so eviction cannot take bytes that already arrived for it.
                entry.pin(slices(of: request))
                entry.waiters.append(Waiter(reader: reader.id, range: request,
                                            deadline: now + configuration.readTimeout, completion: completion))
            }
        }
        for (entry, f, id) in toLaunch { launch(fetchID: id, entry: entry, key: key, fetch: f, isProbe: false) }
        if let immediate { completion(immediate); return }
        if let (entry, range, generation, id) = hit {
            let result = readFromDisk(entryID: id, generation: generation, range: range)
            shard.locked { entry.unpin(slices(of: range)) }
            if case .failure = result { forget(entry: entry, shard: shard, range: range, generation: generation) }
            completion(result)
        }
    }

    enum AccessPattern { case first, sequential, seek }

    /// Sequential readers get a window that doubles up to `maxReadAhead`; a seek resets it.
    private func updateReadAhead(_ reader: ReaderState, request: Range<Int64>) -> AccessPattern {
        // The kernel and players issue several reads at once, slightly out of order: a read that
        // starts near where the last one ended still counts as sequential.
        let slack: Int64 = 1 << 20
        let sequential = reader.lastEnd >= 0 && abs(request.lowerBound - reader.lastEnd) <= slack
        if sequential {
            reader.readAhead = min(configuration.maxReadAhead, max(reader.readAhead * 2, initialReadAhead))
            reader.lastEnd = max(reader.lastEnd, request.upperBound)
            return .sequential
        }
        let first = reader.lastEnd < 0
        reader.readAhead = initialReadAhead
        reader.lastEnd = request.upperBound
        return first ? .first : .seek
    }

    func slices(of range: Range<Int64>) -> ClosedRange<Int64> {
        store.sliceIndex(of: range.lowerBound)...store.sliceIndex(of: max(range.lowerBound, range.upperBound - 1))
    }

    func touch(_ entry: EntryState, _ range: Range<Int64>, _ now: Double) {
        for s in slices(of: range) { entry.sliceAccess[s] = now }
    }

    /// Reads bytes that the index says are on disk. A missing or short slice file is reported as
    /// an error (and its bytes forgotten by the caller), never served as zeros.
    func readFromDisk(entryID: Int64, generation: Int64, range: Range<Int64>) -> Result<[UInt8], CacheError> {
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

    /// Drops bytes from coverage whose slice files turned out to be unreadable.
    func forget(entry: EntryState, shard: Shard, range: Range<Int64>, generation: Int64) {
        shard.locked {
            guard entry.info.generation == generation else { return }
            for s in slices(of: range) {
                let r = store.sliceRange(s)
                let removed = entry.coverage.remove(r)
                entry.sliceBytes[s] = nil
                addBytes(-removed)
            }
        }
    }

    /// Completes every waiter whose bytes are all on disk now (call under the shard lock; the
    /// reads themselves run on the completion queue).
    func wakeWaiters(_ entry: EntryState, shard: Shard, now: Double) {
        guard !entry.waiters.isEmpty else { return }
        var still: [Waiter] = []
        for w in entry.waiters {
            let range = entry.info.length.map { w.range.clamped(to: w.range.lowerBound..<max($0, w.range.lowerBound)) } ?? w.range
            if range.isEmpty {
                entry.unpin(slices(of: w.range))
                completionQueue.async { w.completion(.success([])) }
            } else if entry.coverage.contains(range) {
                touch(entry, range, now)
                let id = entry.id, gen = entry.info.generation
                completionQueue.async { [self] in
                    let result = readFromDisk(entryID: id, generation: gen, range: range)
                    shard.locked { entry.unpin(slices(of: w.range)) }
                    if case .failure = result { forget(entry: entry, shard: shard, range: range, generation: gen) }
                    w.completion(result)
                }
            } else {
                still.append(w)
            }
        }
        entry.waiters = still
    }

    /// Plans the waiters again after a fetch ended (or the generation changed): starts fetches
    /// for bytes nobody is fetching any more. Call under the shard lock; launch what it returns.
    /// - Parameter endedShort: the transfer that ended delivered less than it promised on its own
    ///   (not stopped by us): waiters that need yet another fetch count it, and give up after 8.
    func replanWaiters(_ entry: EntryState, failed: (range: Range<Int64>, error: CacheError)?,
                       endedShort: Bool = false) -> [(EntryState, ReadPlanner.Fetch, Int)] {
        var launches: [(EntryState, ReadPlanner.Fetch, Int)] = []
        var still: [Waiter] = []
        let planner = ReadPlanner(readAhead: 0)
        for var w in entry.waiters {
            if let failed, w.range.overlaps(failed.range), !entry.coverage.contains(w.range) {
                entry.unpin(slices(of: w.range))
                let err = failed.error
                let done = w.completion; completionQueue.async { done(.failure(err)) }
                continue
            }
            let plan = planner.plan(request: w.range, length: entry.info.length, cached: entry.coverage,
                                    running: entry.inflight.running(generation: entry.info.generation, now: Date().timeIntervalSince1970))
            if !plan.fetches.isEmpty && endedShort {
                w.replans += 1
                if w.replans > 8 {
                    entry.unpin(slices(of: w.range))
                    let err = CacheError.badResponse(url: entry.info.url, message: "the origin keeps ending transfers early")
                    let done = w.completion; completionQueue.async { done(.failure(err)) }
                    continue
                }
            }
            for step in plan.steps { if case let .wait(_, id) = step { entry.inflight.addInterest(w.reader, in: id) } }
            for f in plan.fetches {
                let id = makeID()
                entry.inflight.start(id: id, generation: entry.info.generation, start: f.start, end: f.end, reader: w.reader, now: Date().timeIntervalSince1970)
                launches.append((entry, f, id))
            }
            still.append(w)
        }
        entry.waiters = still
        return launches
    }

    /// The reader is done: fail its pending reads and cancel fetches nobody else wants.
    func close(reader: ReaderState) {
        let key = reader.entry.key
        let shard = shard(for: key)
        let (waiters, cancels): ([Waiter], [FetchHandleBox]) = shard.locked {
            reader.closed = true
            guard let entry = shard.entries[key] else { return ([], []) }
            let mine = entry.waiters.filter { $0.reader == reader.id }
            entry.waiters.removeAll { $0.reader == reader.id }
            for w in mine { entry.unpin(slices(of: w.range)) }
            let orphaned = entry.inflight.release(reader: reader.id)
            // Orphaned fetches stop at their next chunk (advance says .stop); cancel them now too.
            return (mine, orphaned.compactMap { handles.existing($0) })
        }
        cancels.forEach { $0.cancel() }
        for w in waiters { completionQueue.async { w.completion(.failure(.cancelled)) } }
    }
}
