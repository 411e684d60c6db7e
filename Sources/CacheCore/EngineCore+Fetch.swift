import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension EngineCore {
    /// Starts the transfer for a fetch already registered in the entry's in-flight table.
    func launch(fetchID: Int, entry: EntryState, key: CacheKey, fetch: ReadPlanner.Fetch, isProbe: Bool) {
        let shard = shard(for: key)
        let (url, ifRange, generation): (String, String?, Int64) = shard.locked {
            (entry.info.url, entry.isPersisted ? entry.info.ifRangeValidator : nil, entry.info.generation)
        }
        let sink = EntrySink(core: self, entry: entry, shard: shard, fetchID: fetchID, generation: generation,
                             start: fetch.start, isProbe: isProbe)
        sinksIdle.lock(); activeSinks += 1; sinksIdle.unlock()
        let box = handles.box(fetchID)
        logger.debug("fetch", metadata: ["url": "\(url)", "range": "\(fetch)"])
        box.set(source.start(FetchRequest(url: url, start: fetch.start, end: fetch.end, ifRange: ifRange), sink: sink))
    }
}

extension EntryInfo {
    var ifRangeValidator: String? { FetchRequest.ifRangeValidator(etag: etag, lastModified: lastModified) }
}

/// Receives one transfer and turns it into slice bytes, coverage and woken readers.
///
/// Bytes already on disk are skipped, never written twice; new bytes are written first and
/// recorded after (in memory at once, in the index behind it), with an XXH64 checksum per extent. The
/// slice being written is pinned for as long as its file is open, so eviction never unlinks a
/// file under a writer.
final class EntrySink: FetchSink, @unchecked Sendable {
    let core: EngineCore
    let entry: EntryState
    let shard: Shard
    let fetchID: Int
    let isProbe: Bool
    /// Only touched from the source's callback thread (callbacks never overlap).
    private var generation: Int64
    private var position: Int64
    private var fd: Int32 = -1
    private var fdSlice: Int64 = -1
    private var fdGeneration: Int64 = -1
    private var extent: (slice: Int64, start: Int64, end: Int64, hash: XXH64)?
    private var failure: CacheError?
    private var receivedHead = false

    init(core: EngineCore, entry: EntryState, shard: Shard, fetchID: Int, generation: Int64, start: Int64, isProbe: Bool) {
        self.core = core
        self.entry = entry
        self.shard = shard
        self.fetchID = fetchID
        self.generation = generation
        self.position = start
        self.isProbe = isProbe
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        receivedHead = true
        var cancels: [FetchHandleBox] = []
        var launches: [(EntryState, ReadPlanner.Fetch, Int)] = []
        var reprobe: Int?
        let proceed: Bool = shard.locked {
            guard entry.inflight.fetches[fetchID] != nil, entry.info.generation == generation else { return false }
            if !entry.isPersisted {
                // First answer for this URL: the entry becomes real now, never for an error.
                core.adopt(head, into: entry)
                do {
                    entry.id = try core.index.insertEntry(entry.row())
                } catch {
                    failure = .storage(path: core.configuration.directory, message: "index: \(error)")
                    return false
                }
            } else if core.differs(entry.info, head) {
                let originalEnd = entry.inflight.fetches[fetchID]?.end
                let wasPinned = entry.inflight.fetches[fetchID]?.pinned ?? false
                cancels = core.startNewGeneration(entry, head: head, keeping: fetchID)
                if head.status == 206 || (position > 0 && head.acceptsRanges) {
                    // Ask again for the wanted bytes of the new version, with its validator.
                    entry.inflight.finish(fetchID)
                    launches = core.replanWaiters(entry, failed: nil)
                    if isProbe, entry.info.length != nil {
                        core.finishOpens(entry, .success(entry.info))
                    } else if isProbe {
                        // The new version's length is unknown: probe it from the start.
                        let id = core.makeID()
                        entry.inflight.start(id: id, generation: entry.info.generation, start: 0, end: nil, reader: nil, pinned: true, now: Date().timeIntervalSince1970)
                        reprobe = id
                    }
                    return false
                }
                // A body of the new version from byte 0: this transfer now fills the new generation.
                generation = entry.info.generation
                entry.inflight.rebase(fetchID, cursor: 0, end: originalEnd, generation: generation, pinned: wasPinned)
                launches = core.replanWaiters(entry, failed: nil)
            } else {
                entry.info.validatedAt = Date()
                entry.info.finalURL = head.finalURL
                if head.status == 206 { entry.info.acceptsRanges = true }
                if entry.info.length == nil, let l = head.totalLength { entry.info.length = l }
                core.index.updateEntry(entry.row())
            }
            if head.status == 206 {
                guard head.bodyStart == position else {
                    failure = .badResponse(url: entry.info.url, message: "asked for bytes from \(position), got \(head.bodyStart)")
                    return false
                }
            } else if position != 0 || !head.acceptsRanges {
                // The origin ignores ranges and sends the whole file: keep all of it (bytes already
                // on disk are skipped), and let nobody cancel it: asking again would start over.
                entry.info.acceptsRanges = false
                position = 0
                entry.inflight.rebase(fetchID, cursor: 0, end: head.totalLength, generation: generation, pinned: true)
            }
            // Only the metadata probe answers opens: another transfer ending meanwhile knows
            // nothing about whether the version it fetched is still current.
            if isProbe, entry.info.length != nil { core.finishOpens(entry, .success(entry.info)) }
            return true
        }
        cancels.forEach { $0.cancel() }
        for (e, f, id) in launches { core.launch(fetchID: id, entry: e, key: e.info.key, fetch: f, isProbe: false) }
        if let reprobe {
            core.launch(fetchID: reprobe, entry: entry, key: entry.info.key, fetch: .init(start: 0, end: nil), isProbe: true)
        }
        return proceed
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let range = position..<(position + Int64(bytes.count))
        // Which of these bytes are new? (They may have landed through another fetch meanwhile.)
        let plan: [Range<Int64>]? = shard.locked {
            guard entry.inflight.fetches[fetchID] != nil, entry.info.generation == generation else { return nil }
            return entry.coverage.gaps(in: range)
        }
        guard let gaps = plan else { return false }
        if gaps.isEmpty { closeExtent() }
        for gap in gaps {
            var offset = gap.lowerBound
            while offset < gap.upperBound {
                let slice = core.store.sliceIndex(of: offset)
                let end = min(gap.upperBound, (slice + 1) * core.configuration.sliceSize)
                let piece = UnsafeRawBufferPointer(rebasing: bytes[Int(offset - range.lowerBound)..<Int(end - range.lowerBound)])
                do {
                    try write(piece, at: offset, slice: slice)
                } catch let e as StorageError {
                    if e.isDiskFull, core.evictNow(needed: Int64(piece.count) + core.configuration.sliceSize) {
                        do { try write(piece, at: offset, slice: slice) } catch {
                            failure = (error as? StorageError)?.cacheError ?? .storage(path: core.configuration.directory, message: "\(error)")
                            return false
                        }
                    } else {
                        failure = e.cacheError
                        return false
                    }
                } catch {
                    failure = .storage(path: core.configuration.directory, message: "\(error)")
                    return false
                }
                offset = end
            }
        }
        position = range.upperBound
        let now = Date().timeIntervalSince1970
        let (progress, over): (InFlightTable.Progress, Bool) = shard.locked {
            guard entry.info.generation == generation else { return (.stop, false) }
            var added: Int64 = 0
            for gap in gaps {
                let n = entry.coverage.insert(gap)
                added += n
                var o = gap.lowerBound
                while o < gap.upperBound {
                    let s = core.store.sliceIndex(of: o)
                    let e = min(gap.upperBound, (s + 1) * core.configuration.sliceSize)
                    entry.sliceBytes[s, default: 0] += e - o
                    entry.sliceAccess[s] = now
                    o = e
                }
            }
            entry.bytesFromOrigin += Int64(bytes.count)
            core.addBytes(added)
            core.wakeWaiters(entry, shard: shard, now: now)
            return (entry.inflight.advance(fetchID, to: position, now: now), core.totalBytes > core.configuration.capacity)
        }
        if over { core.evictIfNeeded() }
        return progress == .proceed
    }

    /// Writes new bytes into their slice file and extends the current extent's checksum.
    private func write(_ piece: UnsafeRawBufferPointer, at offset: Int64, slice: Int64) throws {
        if fd < 0 || fdSlice != slice || fdGeneration != generation {
            closeExtent()
            closeFile()
            let id = shard.locked { () -> Int64 in entry.pin(slice...slice); return entry.id }
            do {
                fd = try core.store.openForWriting(entry: id, generation: generation, slice: slice)
            } catch {
                shard.locked { entry.unpin(slice...slice) }
                throw error
            }
            fdSlice = slice
            fdGeneration = generation
        }
        let within = offset - slice * core.configuration.sliceSize
        try core.store.write(fd: fd, piece, at: within,
                             path: core.store.path(entry: entry.id, generation: generation, slice: slice))
        if let x = extent, x.slice == slice, x.end == offset, x.end - x.start < (1 << 20) {
            extent!.end = offset + Int64(piece.count)
            extent!.hash.update(piece)
        } else {
            closeExtent()
            var hash = XXH64()
            hash.update(piece)
            extent = (slice, offset, offset + Int64(piece.count), hash)
        }
    }

    /// Hands the finished extent to the index (its bytes are already written).
    private func closeExtent() {
        guard let x = extent else { return }
        extent = nil
        let id = shard.locked { entry.id }
        core.index.addExtent(.init(entryID: id, generation: fdGeneration, slice: x.slice, start: x.start, end: x.end, checksum: x.hash.value))
    }

    private func closeFile() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
        let s = fdSlice
        shard.locked { if entry.info.generation == fdGeneration { entry.unpin(s...s) } }
        fdSlice = -1
    }

    func fetchDidFinish(_ error: FetchError?) {
        closeExtent()
        closeFile()
        defer {
            core.sinksIdle.lock()
            core.activeSinks -= 1
            core.sinksIdle.broadcast()
            core.sinksIdle.unlock()
        }
        let url = shard.locked { entry.info.url }
        let cause: CacheError? = failure ?? error.flatMap { $0 == .cancelled ? nil : CacheError($0, url: url) }
        if let cause {
            core.logger.warning("fetch failed", metadata: ["url": "\(url)", "from": "\(position)", "error": "\(cause)"])
        }
        var launches: [(EntryState, ReadPlanner.Fetch, Int)] = []
        var dropEntry = false
        shard.locked {
            let fetch = entry.inflight.finish(fetchID)
            _ = core.handles.remove(fetchID)
            guard entry.info.generation == generation else {
                // Another transfer found a new version meanwhile; it is what the opens get (once
                // its length is known: else the transfer that learns it answers them).
                if isProbe, entry.info.length != nil { core.finishOpens(entry, .success(entry.info)) }
                launches = core.replanWaiters(entry, failed: nil)
                return
            }
            if error == nil, failure == nil, fetch?.end == nil, entry.info.length == nil {
                // The origin sent no length: the end of the body is the end of the file.
                entry.info.length = position
                core.index.updateEntry(entry.row())
                core.finishOpens(entry, .success(entry.info))
            }
            if let cause {
                entry.noteError("\(cause)")
                if !entry.isPersisted { dropEntry = true }
            }
            if isProbe {
                core.finishOpens(entry, core.openResult(entry, after: cause, url: url))
            }
            core.wakeWaiters(entry, shard: shard, now: Date().timeIntervalSince1970)
            let end = fetch?.end ?? Int64.max
            let undelivered = min(position, end)..<end
            let endedShort = error == nil && failure == nil && !undelivered.isEmpty && end != Int64.max
            launches = core.replanWaiters(entry, failed: cause.map { (undelivered, $0) }, endedShort: endedShort)
            if dropEntry, entry.waiters.isEmpty, entry.inflight.isEmpty {
                shard.entries.removeValue(forKey: entry.info.key)
            }
        }
        for (e, f, id) in launches { core.launch(fetchID: id, entry: e, key: e.info.key, fetch: f, isProbe: false) }
    }
}
