import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The evictor: the cap, `capacity` bytes at most, and `freeSpaceFloor` of the file system kept
/// free. A part of the engine that owns its state (`EngineCore` wires it and calls it).
///
/// *What it owns.* The count of bytes on disk (`totalBytes`, what the cap is measured against),
/// the allowance of bytes writers may take before the cap and the disk are looked at again
/// (`space`), the choice lock (`lock`), the rounds taken and not yet completed (`rounds`), the
/// queue of the oldest slices of the last scan (`queue`) and the evictions whose index commit
/// failed (`unfinished`). It reads the engine's shards (taking each shard lock briefly, never two
/// at once), the slice store (`SliceStore`: holes, then rows) and the user's pins; it decides nothing about an entry
/// itself: whether a slice may go is the entry state machine's `evictionOffered` event.
///
/// *Which thread runs it.* The writer lane of a transfer that needs room (`makeRoom`), the
/// sweeper's job on the engine's pool (`evictIfNeeded`, `finishEvictions`, the max-age round of
/// `Maintenance`), and tests (`evictNow`).
///
/// *What it may block on.* `lock` (held only to choose: never across a punch, a `statvfs` of
/// a round or a commit), a shard lock per candidate, and, for a writer that needs room while a
/// round is being completed, that round (`rounds.waitIdle`). Completing a round punches holes
/// and commits the index with no lock held.
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
/// user pinned (`PinTable`, at most half the cap). Slices scanners read are kept in their own
/// share of the cap (`ScanShare`): offered only when the share is over its bound (its own
/// oldest), or as a last resort for the disk's floor. An evicted slice leaves memory
/// first (readers stop seeing it, and writers stay out of it until its rows are gone), then its
/// range is punched out of the data file, and only then are its rows deleted: a crash in between
/// leaves rows over a hole, which the next start finds (`SEEK_HOLE`) and drops.
///
/// Runs on the writer lane of the transfer that needed room, or in the sweeper's job on the
/// engine's pool. Two phases: the choice (under `lock`, one evictor at a time, and each
/// shard lock briefly: the slices leave memory and are marked `evicting`), then the punches and
/// the index commit under no lock at all (`complete(_:)`). The other writer lane, the
/// sweeper and `--cache-max-age` never wait for a disk's trims or an fsync to take the lock.
/// A writer that needs room while a round is being completed waits for that round
/// (`EvictionRounds`), not for the lock: its room comes from that round, and counting it before
/// its holes are punched would let writes pass the free-space floor meanwhile.
///
/// Map of this folder (`Eviction/`): the cap and the free-space floor.
/// - `Evictor.swift` (this file): the count of bytes, writers' allowance, the choice of slices.
/// - `Evictor+Round.swift`: a chosen round taken out of memory, then freed on disk.
/// - `EvictionQueue.swift`: the oldest slices of the last scan, taken from until stale.
/// - `PinTable.swift`: the user's pinned ranges (`preload --pin`), counted in slices kept.
/// - `ScanShare.swift`: the share of the cap scanners' slices keep (`--scan-share`).
/// Neighbours: reads the shards of `Engine/` and asks each entry's machine (`Entry/`, `evictionOffered`)
/// before it takes a slice; deletes through `Storage/`'s `SliceStore` (`freeBlocks`, then
/// `deleteSliceRows`). Called by `Fetch/`'s writer
/// when it needs room and by `Maintenance/`'s sweeper.
final class Evictor: Sendable {
    let configuration: CacheConfiguration
    let shards: [Shard]
    /// Where evicted slices' blocks and rows go (`freeBlocks`, then `deleteSliceRows`).
    let store: SliceStore
    /// Ranges the user pinned (`preload --pin`), which eviction leaves alone.
    let userPins: PinTable
    let logger: Logger
    let metrics: CacheMetrics
    /// Bytes on disk across all entries (a leaf lock).
    private let bytesOnDisk = LockedValue<Int64>(0)
    /// Held by whoever chooses slices to evict (one at a time); never across their punches or
    /// their index commit (`complete`).
    let lock = NSLock()
    /// Eviction rounds whose holes are being punched, which a writer needing room waits for.
    let rounds = EvictionRounds()
    /// Evicted slices whose rows are still to be deleted (their commit failed on a full disk).
    /// A leaf lock: `finishEvictions` takes them out before it commits.
    let unfinished = LockedValue<[EvictedSlice]>([])
    /// The oldest slices of eviction's last scan, which its next rounds take from.
    let queue = EvictionQueue()
    /// Bytes transfers may write before the cap and free space are looked at again.
    let space = SpaceAllowance()
    /// The share of the cap scanners' slices keep, and their bytes on disk.
    let scanShare: ScanShare
    /// Called between a round's punches and its index commit (tests interleave a write there).
    private let freedSlicesHook = LockedValue<(@Sendable () -> Void)?>(nil)
    /// Loads an entry from the index into its shard, blocking (`EntryLoader.loadNow`): a slice
    /// of an entry not in memory is offered to its machine once loaded. Set once by the engine.
    private let loader = LockedValue<(@Sendable (CacheKey) -> Void)?>(nil)

    var loadEntry: (@Sendable (CacheKey) -> Void)? {
        get { loader.withLock { $0 } }
        set { loader.withLock { $0 = newValue } }
    }

    init(configuration: CacheConfiguration, shards: [Shard], store: SliceStore,
         userPins: PinTable, logger: Logger, metrics: CacheMetrics) {
        self.configuration = configuration
        self.shards = shards
        self.store = store
        self.userPins = userPins
        self.logger = logger
        self.metrics = metrics
        scanShare = ScanShare(bound: configuration.scanShareBytes)
    }

    /// Runs `body` (a change of `e`'s slices, under its shard lock) and counts what it changed
    /// of the bytes `e` holds in the scan share.
    func countingScanBytes<T>(_ e: EntryState, _ body: () -> T) -> T {
        guard !e.scanSlices.isEmpty else { return body() }
        let before = e.scanBytes
        let result = body()
        scanShare.add(e.scanBytes - before)
        return result
    }

    var onFreedSlices: (@Sendable () -> Void)? {
        get { freedSlicesHook.withLock { $0 } }
        set { freedSlicesHook.withLock { $0 = newValue } }
    }

    var totalBytes: Int64 { bytesOnDisk.withLock { $0 } }

    func addBytes(_ n: Int64) {
        bytesOnDisk.withLock { $0 += n }
    }

    struct Candidate: Sendable {
        var shard: Int
        var key: CacheKey
        var slice: Int64
        var access: Double
        var bytes: Int64
        /// A scan slice (`ScanShare`).
        var scan = false
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
    /// is full of other things, or of pinned slices). Chooses under `lock`, punches and
    /// commits after letting it go.
    func makeRoom(for bytes: Int64) -> Bool {
        if space.take(bytes) { return true }
        lockWithNoRoundInFlight()
        if space.take(bytes) { lock.unlock(); return true }   // someone refilled it meanwhile
        var room = roomLeft()
        if room < bytes {
            // Go a little below the limit, so eviction does not run for every piece.
            let usable = max(0, totalBytes + room)
            // Scan slices go for the room only when the cap has it and the disk's floor does not.
            let round = takeForEviction(bytes: bytes - room + min(configuration.capacity, usable) / 20, needed: bytes - room,
                                        lastResort: configuration.capacity - totalBytes >= bytes)
            lock.unlock()
            complete(round)
            lockWithNoRoundInFlight()
            if space.take(bytes) { lock.unlock(); return true }
            room = roomLeft()
        }
        defer { lock.unlock() }
        guard room >= bytes else { return false }
        // Hand out at most half of what is left at a time, so the free space is looked at again
        // before it can run out (other programs write to the same disk).
        space.refill(min(8 << 20, max(bytes, room / 2)) - bytes)
        return true
    }

    /// Evicts when over the limit (the sweeper's periodic check: other programs' files can cross
    /// the floor while nothing is written here).
    func evictIfNeeded() {
        guard lock.try() else { return }   // someone is already evicting
        guard rounds.idle else { lock.unlock(); return }   // or completing a round
        let room = roomLeft()
        guard room < 0 else { lock.unlock(); return }
        space.refill(0)
        let usable = max(0, totalBytes + room)
        let round = takeForEviction(bytes: -room + min(configuration.capacity, usable) / 20, needed: -room,
                                    lastResort: totalBytes <= configuration.capacity)
        lock.unlock()
        complete(round)
    }

    /// Takes `lock` once no round is being completed: what the disk's free space says
    /// is then all there is to know.
    private func lockWithNoRoundInFlight() {
        lock.lock()
        while !rounds.idle {   // rounds begin under the lock, so none begins while it is held
            lock.unlock()
            rounds.waitIdle()
            lock.lock()
        }
    }

    /// Evicts `target` bytes (at least `needed`) now, as a write that needs room would: takes
    /// `lock` to choose, lets it go for the disk. Returns the bytes freed.
    @discardableResult
    func evictNow(bytes target: Int64, needed: Int64? = nil, lastResort: Bool = false) -> Int64 {
        let round = lock.withLock { takeForEviction(bytes: target, needed: needed, lastResort: lastResort) }
        complete(round)
        return round.bytes
    }

    /// Chooses least recently used, unpinned slices: `needed` bytes whatever it takes, and on to
    /// `target` (room to spare, so eviction does not run for every piece) while the round has
    /// taken fewer than `roundSlices` slices. They leave memory now; `complete` the round, with
    /// the lock let go, to free their blocks and rows. Call under `lock`.
    ///
    /// Candidates come from `evictionQueue`, the oldest slices of the last scan, so a round does
    /// not scan and sort every slice of the cache (a round of 512 in a cache of 100k slices would
    /// pay a scan of 100k). Each is checked again under its shard lock before it goes.
    ///
    /// The scan share's slices (`ScanShare`) are not among them, except its oldest beyond its
    /// bound (first in the queue: the share's own eviction); the rest of them come after every
    /// other slice, taken only with `lastResort` (the disk's floor needs the room, not the cap).
    func takeForEviction(bytes target: Int64, needed: Int64? = nil, lastResort: Bool = false) -> EvictionRound {
        let needed = needed ?? target
        let now = configuration.engineClock.uptime
        if queue.isStale(now: now) { queue.clear() }
        var round = EvictionRound()
        var freed: Int64 { round.bytes }
        var taken = 0, scanned = false
        func wants() -> Bool { freed < needed || (freed < target && taken < Self.roundSlices) }
        while wants() {
            if queue.isEmpty(lastResort: lastResort && freed < needed) {
                guard !scanned else { break }   // everything evictable was tried
                let found = scanEvictable()
                queue.refill(found.ordinary, lastResort: found.lastResort, at: now)
                scanned = true
                if queue.isEmpty(lastResort: lastResort && freed < needed) { break }
            }
            var chosen: [Candidate] = []
            var sum: Int64 = 0
            // The last resort only for what the write needs, never for headroom.
            while freed + sum < needed || (freed + sum < target && taken + chosen.count < Self.roundSlices),
                  let c = queue.pop(lastResort: lastResort && freed + sum < needed) {
                chosen.append(c)
                sum += c.bytes
            }
            taken += chosen.count
            round.add(take(chosen))
        }
        return begun(round)
    }

    /// Evicts the evictable slices of the entries `wanted` says (checked again under each shard
    /// lock, where reads change what it looks at): `--cache-max-age`'s round. Returns the bytes
    /// freed and how many entries lost slices.
    func evict(where wanted: @Sendable (EntryState) -> Bool) -> (bytes: Int64, entries: Int) {
        lock.lock()
        var chosen: [Candidate] = []
        for (i, shard) in shards.enumerated() {
            chosen += shard.locked { entries in
                var found: [Candidate] = []
                for e in entries.all where e.isPersisted && !e.sliceBytes.isEmpty && wanted(e) {
                    found += evictable(e, key: e.key, shard: i)
                }
                return found
            }
        }
        // Checked again under each shard lock: a read may have come in since.
        let round = begun(take(chosen, stillWanted: wanted))
        lock.unlock()
        complete(round)
        return (round.bytes, Set(chosen.map(\.key)).count)
    }

    /// Counts `round` as being completed until `complete` ran (`EvictionRounds`). Call under
    /// `lock`, once per round handed to `complete`.
    func begun(_ round: EvictionRound) -> EvictionRound {
        if !round.slices.isEmpty { rounds.begin() }
        return round
    }

    /// Most slices a round evicts beyond the bytes the write at hand needs. 5% of the cap alone
    /// would be 5000 files at once in a cache of 100k 4 KiB files, for a write of one.
    static let roundSlices = 512

    /// Every evictable slice, in the order eviction takes them: the scan share's oldest beyond
    /// its bound, then every other slice, oldest first (`ordinary`); then the scan slices the
    /// share keeps, oldest first (`lastResort`).
    ///
    /// Entries in memory give their slices as they are there; the rest come from the index,
    /// the oldest entries first (`CacheIndex.oldestSlices`: every slice of an entry not in
    /// memory was last read when the entry was), each loaded when its turn comes (`take`).
    func scanEvictable() -> (ordinary: [Candidate], lastResort: [Candidate]) {
        var candidates: [Candidate] = []
        var inMemory = 0
        for (i, shard) in shards.enumerated() {
            candidates += shard.locked { entries in
                var found: [Candidate] = []
                inMemory += entries.count
                for e in entries.all where e.isPersisted { found += evictable(e, key: e.key, shard: i) }
                return found
            }
        }
        candidates += storedEvictable(entries: queue.limit + inMemory)
        candidates.sort { $0.access < $1.access }
        let scan = candidates.filter(\.scan)
        guard !scan.isEmpty else { return (candidates, []) }
        let (excess, kept) = ScanShare.split(scan, used: scanShare.usedBytes, bound: scanShare.bound)
        return (excess + candidates.filter { !$0.scan }, kept)
    }

    /// The slices of `e` eviction may take now: holding bytes, not in use, not on their way out.
    /// Call under the entry's shard lock.
    func evictable(_ e: EntryState, key: CacheKey, shard: Int) -> [Candidate] {
        e.sliceBytes.compactMap { s, n in
            guard n > 0, !e.isPinned(s), !e.evicting.contains(s), !userPins.overlaps(key, store.sliceRange(s)) else { return nil }
            return Candidate(shard: shard, key: key, slice: s, access: e.sliceAccess[s] ?? e.lastAccess, bytes: n,
                             scan: e.scanSlices.contains(s))
        }
    }

    /// The evictable slices of the `limit` least recently read entries of the index that are
    /// not in memory (those in memory are `evictable` there, with their own times).
    func storedEvictable(entries limit: Int) -> [Candidate] {
        let stored: [CacheIndex.StoredSlice]
        do { stored = try store.index.oldestSlices(entries: limit) } catch {
            logger.warning("cannot read the oldest entries from the cache index; evicting from memory only",
                           metadata: ["error": "\(error)"])
            return []
        }
        var out: [Candidate] = []
        var loaded: [CacheKey: Bool] = [:]
        for s in stored {
            let key = CacheKey(rawValue: s.key)
            let shard = Int(key.stableHash % UInt64(shards.count))
            if loaded[key] == nil { loaded[key] = shards[shard].locked { $0[key] != nil || $0.isLoading(key) } }
            guard loaded[key] == false, s.bytes > 0, !userPins.overlaps(key, store.sliceRange(s.slice)) else { continue }
            out.append(Candidate(shard: shard, key: key, slice: s.slice, access: s.access, bytes: s.bytes,
                                 scan: s.scan && scanShare.isOn))
        }
        return out
    }

    /// At start: the pins learn their files' lengths (a pin's last slice ends at its file's
    /// end), and pins that keep more than half the cap (pinned under a larger cap, a restart with
    /// a smaller `--cache-size`) are released, whole files at a time, until they fit, so the cap
    /// holds with pins in every case. Said as a warning, with the way to pin again.
    func holdPinsUnderTheCap() {
        for (key, set) in userPins.all() {
            let inMemory = shards.of(key).locked { $0[key]?.info.length }
            if let length = inMemory ?? (try? store.index.storedRow(key: key.string))?.length { userPins.set(key, set, length: length) }
        }
        let limit = configuration.halfCapacity
        guard userPins.totalBytes > limit else { return }
        var released: [String] = []
        for key in userPins.all().keys.sorted(by: { $0.string > $1.string }) where userPins.totalBytes > limit {
            do { try store.setPins(key: key.string, []) } catch { break }
            userPins.set(key, RangeSet())
            released.append(key.string)
        }
        logger.warning("pins kept more than half the cache's cap; released the pins of some files so that the cap holds (pin them again with a larger --cache-size)", metadata: [
            "released": "\(released.count)", "pinned": "\(userPins.totalBytes)", "limit": "\(limit)"])
    }
}
