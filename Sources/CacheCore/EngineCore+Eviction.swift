import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The cap: `capacity` bytes at most, and `freeSpaceFloor` of the file system kept free.
///
/// Room is made *before* bytes are written: a transfer asks `makeRoom(for:)` for every piece it
/// is about to write, and gets it from an allowance that is refilled from the cap and from
/// `statvfs` (so the floor holds against other programs' files too), evicting first when the
/// allowance is gone. A transfer that gets no room writes nothing and hands its bytes only to the
/// readers waiting for them: a full disk slows caching down, never reads.
///
/// LRU by last access at slice granularity, in rounds of at most `roundSlices` slices beyond what
/// the write at hand needs, taken from the oldest slices of the last scan (`EvictionQueue`).
/// Each evicted slice costs a hole punch, which on a file system mounted with `discard` waits
/// for the device to trim its blocks (about 4 ms here): a round of 5% of a cap of 100k small
/// files stalled its writer for over 10 s. Pinned slices (being read or written) are skipped,
/// so the cap can be exceeded by at most the slices in flight; so are slices holding bytes the
/// user pinned (`PinTable`, at most half the cap). An evicted slice leaves memory
/// first (readers stop seeing it, and writers stay out of it until its rows are gone), then its
/// range is punched out of the data file, and only then are its rows deleted: a crash in between
/// leaves rows over a hole, which the next start finds (`SEEK_HOLE`) and drops.
///
/// Runs on the writer lane of the transfer that needed room, or in the sweeper's job on the
/// engine's pool. Two phases: the choice (under `evictionLock`, one evictor at a time, and each
/// shard lock briefly: the slices leave memory and are marked `evicting`), then the punches and
/// the index commit under no lock at all (`complete(_:)`). The other writer lane, the
/// sweeper and `--cache-max-age` never wait for a disk's trims or an fsync to take the lock.
/// A writer that needs room while a round is being completed waits for that round
/// (`EvictionRounds`), not for the lock: its room comes from that round, and counting it before
/// its holes are punched would let writes pass the free-space floor meanwhile.
extension EngineCore {
    struct Candidate: Sendable {
        var shard: Int
        var key: CacheKey
        var slice: Int64
        var access: Double
        var bytes: Int64
    }

    /// Bytes that may still be written now without passing the cap or the free-space floor.
    func roomLeft() -> Int64 {
        var room = configuration.capacity - totalBytes
        var fs = statvfs()
        if configuration.freeSpaceFloor > 0 || room > 0, statvfs(configuration.directory, &fs) == 0 {
            let total = Double(fs.f_blocks) * Double(fs.f_frsize)
            let free = Double(fs.f_bavail) * Double(fs.f_frsize)
            room = min(room, Int64(free - total * configuration.freeSpaceFloor))
        }
        return room
    }

    /// Makes room for `bytes` about to be written; false when even eviction found none (the disk
    /// is full of other things, or of pinned slices). Chooses under `evictionLock`, punches and
    /// commits after letting it go.
    func makeRoom(for bytes: Int64) -> Bool {
        if space.take(bytes) { return true }
        lockWithNoRoundInFlight()
        if space.take(bytes) { evictionLock.unlock(); return true }   // someone refilled it meanwhile
        var room = roomLeft()
        if room < bytes {
            // Go a little below the limit, so eviction does not run for every piece.
            let usable = max(0, totalBytes + room)
            let round = takeForEviction(bytes: bytes - room + min(configuration.capacity, usable) / 20, needed: bytes - room)
            evictionLock.unlock()
            complete(round)
            lockWithNoRoundInFlight()
            if space.take(bytes) { evictionLock.unlock(); return true }
            room = roomLeft()
        }
        defer { evictionLock.unlock() }
        guard room >= bytes else { return false }
        // Hand out at most half of what is left at a time, so the free space is looked at again
        // before it can run out (other programs write to the same disk).
        space.refill(min(8 << 20, max(bytes, room / 2)) - bytes)
        return true
    }

    /// Evicts when over the limit (the sweeper's periodic check: other programs' files can cross
    /// the floor while nothing is written here).
    func evictIfNeeded() {
        guard evictionLock.try() else { return }   // someone is already evicting
        guard rounds.idle else { evictionLock.unlock(); return }   // or completing a round
        let room = roomLeft()
        guard room < 0 else { evictionLock.unlock(); return }
        space.refill(0)
        let usable = max(0, totalBytes + room)
        let round = takeForEviction(bytes: -room + min(configuration.capacity, usable) / 20, needed: -room)
        evictionLock.unlock()
        complete(round)
    }

    /// Takes `evictionLock` once no round is being completed: what the disk's free space says
    /// is then all there is to know.
    private func lockWithNoRoundInFlight() {
        evictionLock.lock()
        while !rounds.idle {   // rounds begin under the lock, so none begins while it is held
            evictionLock.unlock()
            rounds.waitIdle()
            evictionLock.lock()
        }
    }

    /// Evicts `target` bytes (at least `needed`) now, as a write that needs room would: takes
    /// `evictionLock` to choose, lets it go for the disk. Returns the bytes freed.
    @discardableResult
    func evictNow(bytes target: Int64, needed: Int64? = nil) -> Int64 {
        let round = evictionLock.withLock { takeForEviction(bytes: target, needed: needed) }
        complete(round)
        return round.bytes
    }

    /// Chooses least recently used, unpinned slices: `needed` bytes whatever it takes, and on to
    /// `target` (room to spare, so eviction does not run for every piece) while the round has
    /// taken fewer than `roundSlices` slices. They leave memory now; `complete` the round, with
    /// the lock let go, to free their blocks and rows. Call under `evictionLock`.
    ///
    /// Candidates come from `evictionQueue`, the oldest slices of the last scan, so a round does
    /// not scan and sort every slice of the cache (a round of 512 in a cache of 100k slices would
    /// pay a scan of 100k). Each is checked again under its shard lock before it goes.
    func takeForEviction(bytes target: Int64, needed: Int64? = nil) -> EvictionRound {
        let needed = needed ?? target
        let queue = evictionQueue
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        if queue.isStale(now: now) { queue.clear() }
        var round = EvictionRound()
        var freed: Int64 { round.bytes }
        var taken = 0, scanned = false
        func wants() -> Bool { freed < needed || (freed < target && taken < Self.roundSlices) }
        while wants() {
            if queue.isEmpty {
                guard !scanned else { break }   // everything evictable was tried
                queue.refill(scanEvictable(), at: now)
                scanned = true
                if queue.isEmpty { break }
            }
            var chosen: [Candidate] = []
            var sum: Int64 = 0
            while freed + sum < needed || (freed + sum < target && taken + chosen.count < Self.roundSlices),
                  let c = queue.pop() {
                chosen.append(c)
                sum += c.bytes
            }
            taken += chosen.count
            round.add(take(chosen))
        }
        return begun(round)
    }

    /// Counts `round` as being completed until `complete` ran (`EvictionRounds`). Call under
    /// `evictionLock`, once per round handed to `complete`.
    func begun(_ round: EvictionRound) -> EvictionRound {
        if !round.slices.isEmpty { rounds.begin() }
        return round
    }

    /// Most slices a round evicts beyond the bytes the write at hand needs. 5% of the cap alone
    /// would be 5000 files at once in a cache of 100k 4 KiB files, for a write of one.
    static let roundSlices = 512

    /// Every evictable slice, oldest first.
    private func scanEvictable() -> [Candidate] {
        var candidates: [Candidate] = []
        for (i, shard) in shards.enumerated() {
            candidates += shard.locked { entries in
                var found: [Candidate] = []
                for e in entries.all where e.isPersisted { found += evictable(e, key: e.key, shard: i) }
                return found
            }
        }
        candidates.sort { $0.access < $1.access }
        return candidates
    }

    /// The slices of `e` eviction may take now: holding bytes, not in use, not on their way out.
    /// Call under the entry's shard lock.
    func evictable(_ e: EntryState, key: CacheKey, shard: Int) -> [Candidate] {
        e.sliceBytes.compactMap { s, n in
            guard n > 0, !e.isPinned(s), !e.evicting.contains(s), !userPins.overlaps(key, store.sliceRange(s)) else { return nil }
            return Candidate(shard: shard, key: key, slice: s, access: e.sliceAccess[s] ?? e.lastAccess, bytes: n)
        }
    }

    /// Takes the `chosen` slices that are still evictable and whose entry `stillWanted` (checked
    /// under the shard lock, where reads change what it looks at) out of memory: readers no
    /// longer see them, writers stay out of them (`evicting`) until `complete` deleted their rows.
    /// Call under `evictionLock`; hand what it took to `complete` through `begun`.
    func take(_ chosen: [Candidate], stillWanted: @Sendable (EntryState) -> Bool = { _ in true }) -> EvictionRound {
        var round = EvictionRound()
        for c in chosen {
            let shard = shards[c.shard]
            let taken: EvictedSlice? = shard.locked { entries in
                // A candidate of an earlier scan may have been read, pinned or evicted since.
                guard let e = entries[c.key], e.isPersisted, !e.isPinned(c.slice), e.sliceBytes[c.slice] != nil,
                      !e.evicting.contains(c.slice), (e.sliceAccess[c.slice] ?? e.lastAccess) == c.access,
                      !userPins.overlaps(c.key, store.sliceRange(c.slice)), stillWanted(e) else { return nil }
                let n = e.coverage.remove(store.sliceRange(c.slice))
                e.sliceBytes[c.slice] = nil
                e.sliceAccess[c.slice] = nil
                e.evicting.insert(c.slice)
                addBytes(-n)
                return EvictedSlice(id: .init(entryID: e.id, generation: e.info.generation, slice: c.slice),
                                    entry: e.handle, shard: shard, bytes: n)
            }
            if let taken {
                round.bytes += taken.bytes
                round.slices.append(taken)
            }
        }
        return round
    }

    /// Frees what `take` chose: the blocks first, the rows after (a crash in between leaves rows
    /// over holes, which a start finds, a hole is never data, and drops). Holds no lock: readers
    /// no longer see these slices and writers stay out of them.
    func complete(_ round: EvictionRound) {
        guard !round.slices.isEmpty else { return }
        defer { rounds.end() }
        punch(round.slices.map(\.id))
        testHook?(.evictionFreedSlices)
        do {
            try index.deleteSlices(round.slices.map(\.id)) {}
            release(round.slices)
        } catch {
            // The disk is too full for even this commit. The blocks are free already, and no
            // writer may use these slices while their rows are there (they stay marked
            // `evicting`). Commit again, now, or from the sweeper.
            logger.warning("eviction freed the disk before its index commit", metadata: ["error": "\(error)"])
            unfinishedEvictions.withLock { $0 += round.slices }
            finishEvictions()
        }
        metrics.noteEviction(slices: round.slices.count, bytes: round.bytes)
        logger.debug("evicted", metadata: ["slices": "\(round.slices.count)", "bytes": "\(round.bytes)", "total": "\(totalBytes)"])
    }
}

/// Eviction rounds taken and not yet completed (their holes not yet punched). Begun under
/// `evictionLock`, ended with no lock held; a writer that needs room waits for them here.
final class EvictionRounds: Sendable {
    /// Rounds begun and not ended.
    private let inFlight = ConditionLock(0)

    var idle: Bool { inFlight.withLock { $0 == 0 } }

    func begin() { inFlight.withLock { $0 += 1 } }

    func end() {
        inFlight.withLock { $0 -= 1 }
        inFlight.broadcast()   // every writer waiting in `waitIdle`
    }

    func waitIdle() { inFlight.wait(until: { $0 == 0 }) }
}

/// A slice taken out of memory for eviction: its row, its entry (found again under `shard`'s lock
/// to let writers back in once its rows are gone), and the bytes of coverage it held.
struct EvictedSlice: Sendable {
    let id: CacheIndex.SliceID
    let entry: EntryHandle
    let shard: Shard
    let bytes: Int64
}

/// Slices taken out of memory for eviction, whose blocks and rows are still to go
/// (`EngineCore.complete`).
struct EvictionRound {
    var slices: [EvictedSlice] = []
    /// Bytes of coverage they held.
    var bytes: Int64 = 0

    mutating func add(_ other: EvictionRound) {
        slices += other.slices
        bytes += other.bytes
    }
}

extension EngineCore {
    /// Deletes the rows of evictions whose commit failed (a full disk). Takes them out of the
    /// list first, so two callers never commit the same ones; puts them back if it fails again.
    func finishEvictions() {
        let pending = unfinishedEvictions.withLock { list in
            defer { list = [] }
            return list
        }
        guard !pending.isEmpty else { return }
        do {
            try index.deleteSlices(pending.map(\.id)) {}
            release(pending)
        } catch {
            unfinishedEvictions.withLock { $0 = pending + $0 }
            logger.error("eviction could not update the index yet; will retry", metadata: ["error": "\(error)"])
        }
    }

    /// Frees the blocks of evicted slices, one data file at a time.
    func punch(_ slices: [CacheIndex.SliceID]) {
        let byFile = Dictionary(grouping: slices) { FileID(entry: $0.entryID, generation: $0.generation) }
        for (file, ids) in byFile {
            do {
                try store.punch(entry: file.entry, generation: file.generation, slices: ids.map(\.slice))
            } catch {
                logger.error("evicted bytes could not be freed on disk", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Writers may use these slices again: their rows are gone.
    /// A removed entry (nothing found) has nothing to release.
    private func release(_ slices: [EvictedSlice]) {
        for s in slices { s.shard.locked { _ = $0[s.entry]?.evicting.remove(s.id.slice) } }
    }
}

/// The oldest evictable slices of the last scan, oldest first, which rounds of eviction take from
/// until it is used up or `maxAge` old (then they scan again). Slices that are not in it are
/// younger than all in it (new slices, slices read since) or were pinned at the scan; a candidate
/// read or pinned since is skipped when its turn comes. Keeps `limit` candidates at most.
/// Used under `evictionLock`; its own leaf lock is for the compiler's sake (uncontended).
final class EvictionQueue: Sendable {
    private struct State {
        var candidates: [EngineCore.Candidate] = []
        var next = 0
        var scannedAt = -Double.infinity
    }
    private let state = LockedValue(State())
    let limit: Int
    let maxAge: Double

    init(limit: Int = 16 * EngineCore.roundSlices, maxAge: Double = 30) {
        self.limit = limit
        self.maxAge = maxAge
    }

    var isEmpty: Bool { state.withLock { $0.next >= $0.candidates.count } }
    var count: Int { state.withLock { $0.candidates.count - $0.next } }

    func isStale(now: Double) -> Bool { state.withLock { now - $0.scannedAt > maxAge } }

    /// Keeps the oldest `limit` of `scanned` (oldest first).
    func refill(_ scanned: [EngineCore.Candidate], at now: Double) {
        let kept = Array(scanned.prefix(limit))
        state.withLock {
            $0.candidates = kept
            $0.next = 0
            $0.scannedAt = now
        }
    }

    func pop() -> EngineCore.Candidate? {
        state.withLock {
            guard $0.next < $0.candidates.count else { return nil }
            $0.next += 1
            return $0.candidates[$0.next - 1]
        }
    }

    func clear() {
        state.withLock {
            $0.candidates = []
            $0.next = 0
        }
    }
}

/// Bytes that transfers may write before the cap and the free space must be looked at again.
final class SpaceAllowance: Sendable {
    private let bytes = LockedValue<Int64>(0)

    /// Takes `n` bytes of the allowance, if that much is left.
    func take(_ n: Int64) -> Bool {
        bytes.withLock { bytes in
            guard bytes >= n else { return false }
            bytes -= n
            return true
        }
    }

    func refill(_ n: Int64) {
        bytes.withLock { $0 = max(0, n) }
    }
}
