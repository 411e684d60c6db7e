import Foundation
import Logging

/// A round of eviction, once its slices are chosen: taking them out of memory (`take`, under
/// the evictor's lock and each shard lock briefly), then freeing their blocks and rows
/// (`complete`, under no lock), and the rounds still being completed, which a writer that
/// needs room waits for (`EvictionRounds`).
extension Evictor {
    /// Takes the `chosen` slices that are still evictable and whose entry `stillWanted` (checked
    /// under the shard lock, where reads change what it looks at) out of memory: readers no
    /// longer see them, writers stay out of them (`evicting`) until `complete` deleted their rows.
    /// Call under `lock`; hand what it took to `complete` through `begun`.
    func take(_ chosen: [Candidate], stillWanted: @Sendable (EntryState) -> Bool = { _ in true }) -> EvictionRound {
        var round = EvictionRound()
        for c in chosen {
            let shard = shards[c.shard]
            var taken: EvictedSlice?
            // A slice of an entry not in memory: loaded first, then offered as any other (loaded
            // again if the sweeper let it go in between: it is first in line to be let go).
            for attempt in 0..<3 {
                if !shard.locked({ $0[c.key] != nil }) {
                    guard attempt < 2 else { break }
                    loadEntry?(c.key)
                }
                let (found, slice) = shard.locked { entries -> (Bool, EvictedSlice?) in
                    // A candidate of an earlier scan may have been read, pinned or evicted since:
                    // the entry's machine decides (`EntryStateMachine+Eviction`).
                    guard let e = entries[c.key] else { return (false, nil) }
                    let now = EntryStateMachine<EntryState.OpenCompletion>.SliceFacts(
                        bytes: e.sliceBytes[c.slice], access: e.sliceAccess[c.slice] ?? e.lastAccess, pinned: e.isPinned(c.slice),
                        userPinned: userPins.overlaps(c.key, store.sliceRange(c.slice)), wanted: stillWanted(e),
                        scan: e.scanSlices.contains(c.slice))
                    guard e.machine.evictionOffered(.init(slice: c.slice, access: c.access, scan: c.scan), now: now) == .take else { return (true, nil) }
                    let n = countingScanBytes(e) { e.machine.sliceDropped(c.slice, range: store.sliceRange(c.slice)) }
                    metrics.noteWasted(e.machine.takeWasted())
                    addBytes(-n)
                    return (true, EvictedSlice(id: .init(entryID: e.id, generation: e.info.generation, slice: c.slice),
                                               entry: e.handle, shard: shard, bytes: n))
                }
                taken = slice
                if found { break }
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
        onFreedSlices?()
        do {
            try store.deleteSliceRows(round.slices.map(\.id))
            release(round.slices)
        } catch {
            // The disk is too full for even this commit. The blocks are free already, and no
            // writer may use these slices while their rows are there (they stay marked
            // `evicting`). Commit again, now, or from the sweeper.
            logger.warning("eviction freed the disk before its index commit", metadata: ["error": "\(error)"])
            unfinished.withLock { $0 += round.slices }
            finishEvictions()
        }
        metrics.noteEviction(slices: round.slices.count, bytes: round.bytes)
        logger.debug("evicted", metadata: ["slices": "\(round.slices.count)", "bytes": "\(round.bytes)", "total": "\(totalBytes)"])
    }
}

/// Eviction rounds taken and not yet completed (their holes not yet punched). Begun under
/// `lock`, ended with no lock held; a writer that needs room waits for them here.
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

extension Evictor {
    /// Deletes the rows of evictions whose commit failed (a full disk). Takes them out of the
    /// list first, so two callers never commit the same ones; puts them back if it fails again.
    func finishEvictions() {
        let pending = unfinished.withLock { list in
            defer { list = [] }
            return list
        }
        guard !pending.isEmpty else { return }
        do {
            try store.deleteSliceRows(pending.map(\.id))
            release(pending)
        } catch {
            unfinished.withLock { $0 = pending + $0 }
            logger.error("eviction could not update the index yet; will retry", metadata: ["error": "\(error)"])
        }
    }

    /// Frees the blocks of evicted slices, one data file at a time (`SliceStore.freeBlocks`).
    func punch(_ slices: [CacheIndex.SliceID]) {
        store.freeBlocks(of: slices, logger: logger)
    }

    /// Writers may use these slices again: their rows are gone.
    /// A removed entry (nothing found) has nothing to release.
    private func release(_ slices: [EvictedSlice]) {
        for s in slices { s.shard.locked { _ = $0[s.entry]?.machine.evictionCommitted([s.id.slice]) } }
    }
}
