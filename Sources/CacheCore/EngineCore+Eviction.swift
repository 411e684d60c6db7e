import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The cap: `capacity` bytes at most, and `freeSpaceFloor` of the file system kept free.
///
/// LRU by last access at slice granularity. Pinned slices (being read or written) are skipped,
/// so the cap can be exceeded by at most the slices in flight. An evicted slice leaves memory
/// first (readers stop seeing it), its file is renamed aside, its rows are deleted, and only then
/// is the file unlinked: a crash in between leaves a `.evicting` file that the next start treats
/// as "these rows may be stale" and cleans up.
extension EngineCore {
    struct Candidate {
        var shard: Int
        var key: CacheKey
        var slice: Int64
        var access: Double
        var bytes: Int64
    }

    /// Bytes over the limit right now (cap or free-space floor), or 0.
    func excessBytes() -> Int64 {
        var excess = totalBytes - configuration.capacity
        var fs = statvfs()
        if configuration.freeSpaceFloor > 0, statvfs(configuration.directory, &fs) == 0 {
            let total = Double(fs.f_blocks) * Double(fs.f_frsize)
            let free = Double(fs.f_bavail) * Double(fs.f_frsize)
            let floor = total * configuration.freeSpaceFloor
            if free < floor { excess = max(excess, min(Int64(floor - free), totalBytes)) }
        }
        return max(0, excess)
    }

    /// Evicts when over the limit; the caller saw `totalBytes > capacity` or wants a space check.
    func evictIfNeeded() {
        guard evictionLock.try() else { return }   // someone is already evicting
        defer { evictionLock.unlock() }
        let excess = excessBytes()
        guard excess > 0 else { return }
        // Go a little below the limit so eviction does not run on every chunk.
        _ = evict(bytes: excess + configuration.capacity / 20)
    }

    /// Makes room for `needed` bytes after a write failed for lack of space. True if anything went.
    func evictNow(needed: Int64) -> Bool {
        evictionLock.lock()
        defer { evictionLock.unlock() }
        return evict(bytes: max(needed, excessBytes())) > 0
    }

    /// Evicts least recently used, unpinned slices until `bytes` are gone (or nothing is left).
    @discardableResult
    func evict(bytes target: Int64) -> Int64 {
        var candidates: [Candidate] = []
        for (i, shard) in shards.enumerated() {
            shard.locked {
                for (key, e) in shard.entries where e.isPersisted {
                    for (s, n) in e.sliceBytes where n > 0 && (e.pins[s] ?? 0) == 0 {
                        candidates.append(Candidate(shard: i, key: key, slice: s, access: e.sliceAccess[s] ?? e.lastAccess, bytes: n))
                    }
                }
            }
        }
        candidates.sort { $0.access < $1.access }
        var chosen: [Candidate] = []
        var sum: Int64 = 0
        for c in candidates where sum < target {
            chosen.append(c)
            sum += c.bytes
        }
        guard !chosen.isEmpty else { return 0 }

        var removed: [CacheIndex.SliceID] = []
        var freed: Int64 = 0
        for c in chosen {
            let shard = shards[c.shard]
            shard.locked {
                guard let e = shard.entries[c.key], (e.pins[c.slice] ?? 0) == 0, e.sliceBytes[c.slice] != nil else { return }
                let n = e.coverage.remove(store.sliceRange(c.slice))
                e.sliceBytes[c.slice] = nil
                e.sliceAccess[c.slice] = nil
                addBytes(-n)
                freed += n
                let path = store.path(entry: e.id, generation: e.info.generation, slice: c.slice)
                rename(path, path + ".evicting")
                removed.append(.init(entryID: e.id, generation: e.info.generation, slice: c.slice))
            }
        }
        do {
            try index.deleteSlices(removed) {
                for s in removed { unlink(store.path(entry: s.entryID, generation: s.generation, slice: s.slice) + ".evicting") }
            }
        } catch {
            logger.error("eviction could not update the index; files kept aside until next start", metadata: ["error": "\(error)"])
        }
        logger.debug("evicted", metadata: ["slices": "\(removed.count)", "bytes": "\(freed)", "total": "\(totalBytes)"])
        return freed
    }
}
