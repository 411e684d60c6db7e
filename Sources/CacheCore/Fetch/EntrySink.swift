import Foundation

/// Receives one transfer and turns it into slice bytes, coverage and answered readers.
///
/// Two threads, one job each. The source's thread (libcurl's, one callback at a time) only moves
/// bytes: it copies each arrival once, into the transfer's batch buffer (a pooled `ChunkStorage`,
/// taking a new one from the `MemoryBudget`'s queued share when it is full, or pausing the
/// transfer when there is none): the only user-space copy of a miss. Under the shard lock it
/// hands the reads waiting for it references to their part of the buffer (no copy), answers those
/// it completes, registers its new bytes (those neither on disk nor pending already) as pending,
/// and advances the transfer's cursor. Once the source drained a turn, the batch's new chunks go
/// to the writer lane of the entry's data file (`WriteQueue`, one per file, in arrival order),
/// which writes them to their data files (adjacent ones in one `pwrite`) if there is room
/// (`makeRoom`, which may evict), extends the extent's XXH64, records coverage and drops the
/// chunks from pending; the batch's room in the queued share comes back once all its chunks are
/// done, whether or not reads still hold the buffer. Bytes that cannot be written (a full
/// disk, a slice being evicted) already reached the waiting reads: the cache stops filling,
/// reads do not fail. The index learns of an extent only after its bytes were written. The slice
/// being written is pinned while its file is open, so eviction never takes a file from under a
/// writer. The sink names its entry by its `EntryHandle`: every step finds it again under the
/// shard lock (nothing found: it was removed, and the step records nothing) and checks
/// `isCurrent` before it records anything (the entry may have moved to a new version
/// meanwhile; the transfer follows it on `newVersionFromStart`). What a head, an arrival, a
/// finished write and the end of the transfer mean for the entry (its version, the opens
/// waiting, an endless body, which bytes are new and which read-ahead, what a write records, a
/// failed first probe) is decided by the entry's `EntryStateMachine` (`headArrived`,
/// `bytesArrived`, `writeCompleted`, `transferFinished`); the sink carries out the actions it
/// returns, and each locked step hands what is left for after the lock out as its return value.
/// Time is the engine's clock (`CacheConfiguration.clock`), read once per step.
///
/// Part of `Fetch/` (map: `FetchCoordinator.swift`).
// Checked `Sendable`: its state is in two `LockedValue`s, one per side, each taken by that side
// alone (`arrivals` by the source's callbacks, `writer` by the jobs on the file's lane), so
// neither is ever contended. What that costs: one uncontended pthread mutex (about 20 ns) per
// callback, i.e. per 16 KiB arrival, beside the microsecond its copy and the shard lock take, and
// one per write job (a batch of up to 128 KiB, beside its `pwrite`); and, under the shard lock,
// one lookup of its entry in the shard's table (hashing the key) per arrival and per locked step
// of a write job. Nothing per byte, no allocation.
final class EntrySink: FetchSink {
    let engine: any TransferEngine
    /// Its entry, found again under the shard lock by each step (one table lookup per arrival):
    /// nothing found means the entry was removed, and the step records nothing.
    let entry: EntryHandle
    let shard: Shard
    /// The URL it was started for: what its log lines name once its entry is gone.
    let url: String
    let fetchID: Int
    /// The request had a `Range` header (for `HeadDecision.Provenance`).
    let rangeAsked: Bool
    /// Names the entry's data file for the writer: its jobs all run on that file's lane.
    let file: Int
    /// Resumes the paused transfer once the writers have drained.
    private let onRoom: @Sendable () -> Void
    /// Its version sample differed (`VersionSample`): its head is another version, whatever it says.
    private let knownChanged: Bool
    static let batchCapacity = ChunkPool.classes.last!

    /// The source's side: what one callback leaves for the next. Taken for the length of each
    /// callback, which never overlap (the `FetchSink` contract); lock order: this, then the shard
    /// lock, the lanes', the memory budget's. The read answers an arrival completes run inside
    /// it too (they never call back into this sink: a `cancel` or `resume` of its handle only
    /// queues for its source).
    private struct Arrivals {
        /// The version its bytes belong to, and the next byte's offset.
        var generation: Int64
        var position: Int64
        /// Why the transfer failed although the source did not (a head that is not this file, a
        /// wrong start), reported at its end.
        var failure: CacheError?
        /// The buffer arrivals are copied into, one after the other, and how much of it is
        /// taken. Its chunks (pending already, so reads see them) go to the writer together once
        /// it is full or the source drained (`fetchDidDrain`, after each turn of libcurl's loop;
        /// each `fetchDidReceive`), and when a head arrives or the transfer ends: libcurl hands a
        /// body over 16 KiB at a time, and a writer job, lane wake-up and `pwrite` per 16 KiB cost
        /// this daemon about 1 CPU-second per GiB (a loopback read took 2.0 CPU-seconds per GiB,
        /// 1.0 with batches).
        var batch: ChunkStorage?
        var batchUsed = 0
        var unsent: [PendingBytes.Chunk] = []
        var unsentGeneration: Int64 = 0
        /// Bytes taken in this turn of the source so far, and in the last turn. A new buffer is
        /// sized for a turn like the last one, or, in a turn that filled one, for twice what came
        /// so far, within the pool's sizes: a transfer over a slow link takes little of the write
        /// budget per turn, one on loopback 128 KiB buffers.
        var turnBytes = 0
        var lastTurnBytes = 0
        /// The overlap checks (`VersionOverlap`): bytes to compare with the held ones as they
        /// arrive, before any of them is delivered; each goes once passed.
        var checks: [Range<Int64>]
        /// The bytes it delivers: those outside were asked only to be compared.
        var deliver: Range<Int64>
    }
    private let arrivals: LockedValue<Arrivals>

    /// The writer's side: the data file and extent being written. Taken for the length of each
    /// job on the file's `WriteQueue` lane, which runs them one after the other; held around
    /// the disk write, the eviction lock (`makeRoom`) and the shard lock, and taken by nothing
    /// that holds one of those. Not private only because the lane's jobs live in
    /// `EntrySink+Writer.swift`: nothing else takes it.
    struct Writer {
        var fd: Int32 = -1
        var slice: Int64 = -1
        var generation: Int64 = -1
        var entryID: Int64 = -1
        /// The extent being written, with the checksum of its bytes so far.
        var extent: ChecksummedExtent?
        /// After a write found no room, bytes only go to waiting reads until then (the clock's
        /// seconds: `EntryStateMachine.mayWrite`).
        var noRoomUntil: Double = 0
    }
    let writer = LockedValue(Writer())

    init(engine: any TransferEngine, entry: EntryHandle, shard: Shard, fetchID: Int, generation: Int64, start: Int64,
         rangeAsked: Bool, file: Int, url: String, checks: [Range<Int64>] = [], deliver: Range<Int64> = 0..<Int64.max,
         knownChanged: Bool = false) {
        self.knownChanged = knownChanged
        self.engine = engine
        self.url = url
        self.file = file
        self.rangeAsked = rangeAsked
        self.entry = entry
        self.shard = shard
        self.fetchID = fetchID
        arrivals = LockedValue(Arrivals(generation: generation, position: start, checks: checks, deliver: deliver))
        onRoom = { [fetches = engine.fetches] in fetches.resume(fetchID) }
    }

    typealias Machine = EntryStateMachine<EntryState.OpenCompletion>

    /// What a head leaves to do once the locks are let go.
    private struct AfterHead: Sendable {
        /// Whether the transfer goes on.
        var proceed: Bool
        var cancels: [FetchHandleBox] = []
        var launches: [Launch] = []
        /// A probe of the new version from byte 0 (registered already), to start.
        var reprobe: Int?
        static let stop = AfterHead(proceed: false)
    }

    /// Carries out what the entry's state machine makes of the head (under the shard lock), then
    /// cancels and launches what it asked for.
    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        let now = engine.now()
        if let answers = head.rangeAnswers { engine.noteRangeAnswers(answers, url: url) }
        let after: AfterHead = arrivals.withLock { t in
            sendBatch(&t)   // what came before this head is written as it was received
            return shard.locked { entries in
                // Removed: the machine would say `.stop` (not current), as for any transfer of
                // a version that is gone.
                guard let entry = entries[self.entry] else { return .stop }
                return headArrived(head, entry: entry, now: now, &t)
            }
        }
        after.cancels.forEach { $0.cancel() }
        after.launches.forEach(engine.launch)
        if let reprobe = after.reprobe {
            engine.launch(fetchID: reprobe, entry: entry, fetch: .init(start: 0, end: nil))
        }
        return after.proceed
    }

    /// Asks the entry's machine what `head` means and carries out its version step, its body
    /// step and its answers to the opens (under the shard lock).
    private func headArrived(_ head: ResponseHead, entry: EntryState, now: Date, _ t: inout Arrivals) -> AfterHead {
        let generation = t.generation
        let wholeBodyRunning = entry.inflight.fetches.values.contains {
            $0.id != fetchID && $0.generation == generation && $0.pinned && $0.start == 0 && $0.end == nil
        }
        let action = entry.machine.headArrived(
            fetch: fetchID, current: entry.inflight.fetches[fetchID] != nil && entry.isCurrent(generation),
            head: head, differs: entry.isPersisted && (knownChanged || engine.versions.differs(entry.info, head)
                || (entry.machine.isProbe(fetchID) && OriginVersions.cannotConfirm(head, listingPage: entry.isListingPage))), position: t.position,
            lengthKnown: entry.info.length != nil, wholeBodyRunning: wholeBodyRunning,
            provenance: .init(head: head, entry: entry.info, rangeAsked: rangeAsked), makeFetchID: engine.makeID)
        let decision: HeadDecision, opens: [EntryState.OpenCompletion], reprobeID: Int?
        switch action {
        case .stop:
            return .stop
        case let .failedRevalidation(why, waiting, staleCopy):
            // A captive portal, a login page: the cached bytes stay, as for an origin that is down.
            let cause = CacheError.badResponse(url: entry.info.url, message: "not this file (\(why)); a captive portal or login page?")
            t.failure = cause
            engine.logger.warning("the origin's answer does not look like this file; keeping the cached copy", metadata: [
                "url": "\(entry.info.url)", "status": "\(head.status)", "content_type": "\(head.contentType ?? "-")",
                "length": "\(head.totalLength.map(String.init) ?? "?")", "why": "\(why)"])
            if !waiting.isEmpty {
                engine.versions.answer(.init(opens: waiting, with: staleCopy ? .staleCopy(cause) : .failure(cause)), entry: entry, url: entry.info.url)
            }
            return .stop
        case let .apply(d, answer, reprobe):
            decision = d
            opens = answer
            reprobeID = reprobe
        }
        var after = AfterHead(proceed: decision.proceeds)
        switch decision.version {
        case .failedRevalidation:
            return .stop   // answered above
        case .adoptFirst:
            // The entry becomes real now, never for an error. Its row is written behind; the
            // id is all data file names need.
            engine.versions.adopt(head, into: entry)
            entry.machine.indexed(id: engine.store.newEntryID())
            engine.store.save(entry)
        case .newVersionRefetch:
            // Ask again for the wanted bytes of the new version, with its validator.
            after.cancels = engine.versions.startNewGeneration(entry, head: head, keeping: fetchID)
            entry.machine.transferEnded(fetchID)
            after.launches = engine.answers.replanWaiters(entry, failed: nil)
            if let reprobeID {
                entry.machine.probeStarted(reprobeID, end: nil, now: now.timeIntervalSince1970)
                after.reprobe = reprobeID
            }
        case .newVersionFromStart:
            let originalEnd = entry.inflight.fetches[fetchID]?.end
            let wasPinned = entry.inflight.fetches[fetchID]?.pinned ?? false
            after.cancels = engine.versions.startNewGeneration(entry, head: head, keeping: fetchID)
            t.generation = entry.info.generation
            entry.machine.transferRebased(fetchID, cursor: 0, end: originalEnd, generation: t.generation, pinned: wasPinned)
            after.launches = engine.answers.replanWaiters(entry, failed: nil)
        case .confirm:
            entry.machine.versionConfirmed(by: head, at: now)
            engine.store.save(entry)
        }
        switch decision.body {
        case .partial, .none, .giveWay:
            break
        case let .wrongStart(message):
            t.failure = .badResponse(url: entry.info.url, message: message)
        case let .whole(ignoredRange):
            // Keep all of it (bytes already on disk are skipped), and let nobody cancel it:
            // asking again would start over.
            if ignoredRange {
                engine.logger.warning("the origin answered a range request with the whole file", metadata: [
                    "url": "\(entry.info.url)", "times": "\(entry.machine.ignoredRanges)"])
            }
            t.position = 0
            t.deliver = 0..<Int64.max   // all of it is kept; the overlaps are still compared as they pass
            entry.machine.transferRebased(fetchID, cursor: 0, end: nil, generation: t.generation, pinned: true)
        }
        entry.machine.bodyDecided(decision.body)
        if t.generation != generation {
            // A new version by its head: nothing held of it to compare, and all it brings is its.
            t.checks = []
            t.deliver = 0..<Int64.max
        }
        engine.versions.answer(opens, .success(entry.info))
        return after
    }

    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow {
        let took: Took = arrivals.withLock { t in take(bytes, &t, onRoom: onRoom) }
        return finish(took) ?? .pause
    }

    /// A source that cannot pause waits here for room (not holding `arrivals`).
    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let room = DispatchSemaphore(value: 0)
        while true {
            let took: Took = arrivals.withLock { t in
                let took = take(bytes, &t, onRoom: { room.signal() })
                if case .noRoom = took { return took }
                drained(&t)
                return took
            }
            if let flow = finish(took) { return flow == .proceed }
            room.wait()
        }
    }

    /// What became of an arrival.
    private enum Took {
        /// There was no room for it: nothing was taken (the same bytes come again).
        case noRoom
        case flow(FetchFlow)
        /// Its overlap check found another version (`VersionOverlap`): stop, then cancel and
        /// launch these once the locks are let go.
        case changed(cancels: [FetchHandleBox], launches: [Launch])
    }

    /// Carries out what an arrival left for after the locks; its flow, nil without room.
    private func finish(_ took: Took) -> FetchFlow? {
        switch took {
        case .noRoom:
            return nil
        case let .flow(flow):
            return flow
        case let .changed(cancels, launches):
            cancels.forEach { $0.cancel() }
            launches.forEach(engine.launch)
            return .stop
        }
    }

    /// Takes an arrival at the cursor: compares what falls in the overlap checks, then delivers
    /// the part within `deliver` (the bytes around it were asked only to be compared).
    private func take(_ bytes: UnsafeRawBufferPointer, _ t: inout Arrivals, onRoom: @escaping @Sendable () -> Void) -> Took {
        let (front, middle) = Self.split(count: bytes.count, at: t.position, deliver: t.deliver)
        var space: (ChunkStorage, Int)?
        if middle > 0 {
            guard let r = room(for: middle, &t, onRoom: onRoom) else { return .noRoom }
            space = r
        }
        if let (cancels, launches) = compareOverlaps(bytes, &t) {
            return .changed(cancels: cancels, launches: launches)
        }
        t.position += Int64(front)
        var flow = FetchFlow.proceed
        if let (storage, at) = space {
            flow = Self.flow(after: accept(UnsafeRawBufferPointer(rebasing: bytes[front..<(front + middle)]), storage, at, &t),
                             position: t.position, deliver: t.deliver, checksLeft: !t.checks.isEmpty, failed: t.failure != nil)
        }
        t.position += Int64(bytes.count - front - middle)
        return .flow(flow)
    }

    /// How an arrival of `count` bytes at `position` divides: `front` bytes before `deliver`
    /// (asked only to be compared), then `middle` bytes within it (delivered); the rest lies
    /// after it (compared only).
    static func split(count: Int, at position: Int64, deliver: Range<Int64>) -> (front: Int, middle: Int) {
        let end = position + Int64(count)
        let lo = min(max(position, deliver.lowerBound), end), hi = max(lo, min(end, deliver.upperBound))
        return (Int(lo - position), Int(hi - lo))
    }

    /// A transfer's flow once an arrival's delivered part was taken: one that stopped because its
    /// range is done (at `position`, the end of `deliver`) goes on while bytes after it are still
    /// to be compared (`checksLeft`), unless it failed.
    static func flow(after flow: FetchFlow, position: Int64, deliver: Range<Int64>, checksLeft: Bool, failed: Bool) -> FetchFlow {
        guard flow == .stop, !failed, position == deliver.upperBound, checksLeft else { return flow }
        return .proceed
    }

    /// Compares the parts of an arrival (at the cursor) that fall in the overlap checks with the
    /// bytes held there (`VersionOverlap`). Nil while they match (or nothing is held to compare
    /// with); when they differ, the entry moved to a new version: what to cancel and launch.
    private func compareOverlaps(_ bytes: UnsafeRawBufferPointer, _ t: inout Arrivals) -> (cancels: [FetchHandleBox], launches: [Launch])? {
        guard !t.checks.isEmpty else { return nil }
        let range = t.position..<(t.position + Int64(bytes.count))
        let checks = t.checks
        t.checks.removeAll { $0.upperBound <= range.upperBound }   // passed with this arrival
        for check in checks {
            let part = range.clamped(to: check)
            guard !part.isEmpty,
                  let held = engine.versions.heldBytes(entry, shard: shard, generation: t.generation, range: part) else { continue }
            let lo = Int(part.lowerBound - range.lowerBound)
            if held.elementsEqual(UnsafeRawBufferPointer(rebasing: bytes[lo..<(lo + Int(part.length))])) { continue }
            t.checks = []
            t.failure = .remoteChanged(url: url)
            return engine.versions.overlapDiffered(entry, shard: shard, generation: t.generation, fetchID: fetchID, at: part,
                                        by: "the bytes beside a new range")
        }
        return nil
    }

    func fetchDidDrain() {
        arrivals.withLock { drained(&$0) }
    }

    private func drained(_ t: inout Arrivals) {
        t.lastTurnBytes = t.turnBytes
        t.turnBytes = 0
        sendBatch(&t)
    }

    /// Where `count` arriving bytes go: the rest of the batch buffer, or a new one from the write
    /// budget (the full one goes to the writer first; `turnBytes` says how large). Nil when the
    /// budget has no room: `onRoom` runs once it has.
    private func room(for count: Int, _ t: inout Arrivals, onRoom: @escaping @Sendable () -> Void) -> (ChunkStorage, Int)? {
        if let b = t.batch, b.capacity - t.batchUsed >= count {
            defer { t.batchUsed += count }
            return (b, t.batchUsed)
        }
        sendBatch(&t)
        let expected = min(t.turnBytes > 0 ? 2 * t.turnBytes : t.lastTurnBytes, Self.batchCapacity)
        guard let b = engine.store.buffer(capacity: ChunkPool.capacity(for: max(count, expected)),
                                         transfer: fetchID, onRoom: onRoom) else { return nil }
        t.batch = b
        t.batchUsed = count
        return (b, 0)
    }

    /// Hands the batch's chunks to the writer lane, in one job, and lets go of its buffer: a
    /// transfer waiting for the network holds no room in the queued share, which others may
    /// need (a buffer's room comes back once its chunks are written; it is freed once no read
    /// holds it either).
    private func sendBatch(_ t: inout Arrivals) {
        t.batch?.writerDone()
        t.batch = nil
        t.batchUsed = 0
        guard !t.unsent.isEmpty else { return }
        let chunks = t.unsent, generation = t.unsentGeneration
        t.unsent = []
        engine.store.submit(file: file) { [self] in
            writer.withLock { write(chunks, generation: generation, &$0) }
        }
    }

    /// What the shard lock's part of an arrival leaves for after it.
    private enum Arrived {
        /// Nothing was recorded (`ArrivalAction.ignore`).
        case ignored
        /// A body with no length passed its limit (`ArrivalAction.cutOff`).
        case cutOff(limit: Int64, asked: Bool)
        /// Recorded: the transfer's progress, the new chunks for the writer, the read answers
        /// to run.
        case taken(InFlightTable.Progress, queued: [PendingBytes.Chunk], answers: [@Sendable () -> Void])
    }

    /// Takes an arrival, copied into `storage` at `at` (its room in the queued share is given
    /// back once the writer is done with it; see `ChunkStorage`).
    private func accept(_ arrival: UnsafeRawBufferPointer, _ storage: ChunkStorage, _ at: Int,
                        _ t: inout Arrivals) -> FetchFlow {
        storage.write(arrival, at: at)   // published below, under the shard lock (see `ChunkStorage`)
        let range = t.position..<(t.position + Int64(arrival.count))
        let generation = t.generation
        let now = engine.now().timeIntervalSince1970
        let arrived: Arrived = shard.locked { entries in
            guard let entry = entries[self.entry] else { return .ignored }
            return bytesArrived(range, in: storage, at: at, generation: generation, entry: entry, now: now)
        }
        switch arrived {
        case .ignored:
            return .stop
        case let .cutOff(limit, asked):
            t.failure = .badResponse(url: url, message: asked
                ? "no length, and still no end after \(limit) bytes, the most its reader takes"
                : "no length, and still no end after \(limit) bytes (half the cache's capacity): an endless stream, not a file")
            return .stop
        case let .taken(progress, queued, answers):
            answers.forEach { $0() }
            t.position = range.upperBound
            t.turnBytes += arrival.count
            if !queued.isEmpty {
                if !t.unsent.isEmpty, t.unsentGeneration != generation { sendBatch(&t) }
                t.unsent += queued
                t.unsentGeneration = generation
            }
            if let b = t.batch, t.batchUsed == b.capacity {
                sendBatch(&t)
            }
            return progress == .proceed ? .proceed : .stop
        }
    }

    /// Asks the entry's machine whether to take bytes `range` (at `at` in `storage`), and takes
    /// them as it says: its new bytes pending (one chunk per slice) and counted as read-ahead
    /// where no read waits for them, all of them handed to the reads waiting, the transfer
    /// advanced (under the shard lock).
    private func bytesArrived(_ range: Range<Int64>, in storage: ChunkStorage, at: Int, generation: Int64,
                              entry: EntryState, now: Double) -> Arrived {
        switch entry.machine.bytesArrived(range: range, current: entry.inflight.fetches[fetchID] != nil && entry.isCurrent(generation),
                                          length: entry.info.length, ownLimit: entry.unknownLengthLimit,
                                          engineLimit: engine.unknownLengthLimit) {
        case .ignore:
            return .ignored
        case let .cutOff(limit, asked):
            return .cutOff(limit: limit, asked: asked)
        case .take:
            break
        }
        var queued: [PendingBytes.Chunk] = []
        var ahead: Int64 = 0
        let waiting = WaitingRanges(entry.waiters, generation: generation)
        let fetchedBy = entry.inflight.fetches[fetchID]?.readerClass
        engine.metrics.noteFetched(by: fetchedBy, bytes: range.length)
        for gap in Machine.newBytes(in: range, coverage: entry.coverage, pending: entry.pending.ranges) {
            ahead += entry.machine.readAheadArrived(gap, waiting: waiting, fetchedBy: fetchedBy)
            for piece in Machine.chunks(of: gap, sliceSize: engine.store.sliceSize) {
                let chunk = storage.pendingChunk(range: piece, offset: at + Int(piece.lowerBound - range.lowerBound))
                entry.machine.pendingAdded(chunk)
                queued.append(chunk)
            }
        }
        for w in entry.waiters where w.generation == generation && w.range.overlaps(range) {
            w.fill(range, in: storage, at: at)
        }
        if ahead > 0 { engine.metrics.readAheadBytes.add(ahead) }
        let answers = engine.answers.wakeWaiters(entry, shard: shard, now: now, inline: true)
        let progress = entry.machine.transferAdvanced(fetchID, past: range, now: now)
        return .taken(progress, queued: queued, answers: answers)
    }

    func fetchDidFinish(_ error: FetchError?) {
        // The last callback: what it reads of the source's side is final.
        let (failure, position, generation) = arrivals.withLock { t in
            sendBatch(&t)
            return (t.failure, t.position, t.generation)
        }
        engine.memory.forget(transfer: fetchID)
        // The last extent goes to the index once the lane wrote what is queued before it.
        defer {
            engine.store.submit(file: file) { [self] in
                writer.withLock { w in
                    closeExtent(&w)
                    closeFile(&w)
                }
                engine.fetches.sinkFinished()
            }
        }
        let url = shard.locked { $0[entry]?.info.url } ?? self.url
        let cause: CacheError? = failure ?? error.flatMap { $0 == .cancelled ? nil : CacheError($0, url: url) }
        if let cause {
            engine.logger.warning("fetch failed", metadata: ["url": "\(url)", "from": "\(position)", "error": "\(cause)"])
        }
        let now = engine.now().timeIntervalSince1970
        let launches: [Launch] = shard.locked { entries in
            engine.fetches.ended(fetchID)
            // Removed: its fetches went with it, and its machine would say `.none`.
            guard let entry = entries[self.entry] else { return [] }
            let finished = entry.machine.transferFinished(fetchID, generation: generation, position: position,
                                                          clean: error == nil && failure == nil, cause: cause)
            switch finished.action {
            case .none:
                return []
            case let .otherVersion(answer):
                engine.versions.answer(answer, entry: entry, url: url)
                return engine.answers.replanWaiters(entry, failed: nil)
            case let .settle(learnLength, answer, removeIfUnused):
                // The origin sent no length: the end of the body is the end of the file (the machine
                // recorded it), which the index learns.
                if learnLength { engine.store.save(entry) }
                engine.versions.answer(answer, entry: entry, url: url)
                if let cause { entry.noteError("\(cause)", at: engine.now()) }
                engine.answers.wakeWaiters(entry, shard: shard, now: now)
                let launches = engine.answers.replanWaiters(entry, failed: cause.map { (finished.undelivered, $0) },
                                                  endedShort: finished.endedShort)
                if removeIfUnused, entry.waiters.isEmpty, entry.inflight.isEmpty, let (_, action) = entries.remove(self.entry) {
                    engine.store.forgetFiles(of: self.entry)
                    if case let .leave(opens) = action { engine.versions.answer(opens, .failure(.cancelled)) }
                }
                return launches
            }
        }
        launches.forEach(engine.launch)
    }
}
