import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Listing, removal and verification: what `cache ls/info/rm/clear/verify` need.
extension EngineCore {
    func status(of e: EntryState) -> EntryStatus {
        EntryStatus(info: e.info, cachedRanges: e.coverage.ranges, cachedBytes: e.coverage.count, hits: e.hits,
                    misses: e.misses, bytesFromCache: e.bytesFromCache, bytesFromOrigin: e.bytesFromOrigin,
                    lastAccess: Date(timeIntervalSince1970: e.lastAccess), recentErrors: e.recentErrors,
                    readsByDoor: e.readsByDoor)
    }

    func status(url: String) -> EntryStatus? {
        guard let key = try? configuration.keyRules.key(for: url) else { return nil }
        let shard = shard(for: key)
        return shard.locked { shard.entries[key].flatMap { $0.isPersisted ? status(of: $0) : nil } }
    }

    /// The index row id of `url`'s entry, if it has one.
    func entryID(url: String) -> Int64? {
        guard let key = try? configuration.keyRules.key(for: url) else { return nil }
        let shard = shard(for: key)
        return shard.locked { shard.entries[key].flatMap { $0.isPersisted ? $0.id : nil } }
    }

    func list() -> [EntryStatus] {
        var out: [EntryStatus] = []
        for shard in shards {
            shard.locked { for e in shard.entries.values where e.isPersisted { out.append(status(of: e)) } }
        }
        return out.sorted { $0.info.url < $1.info.url }
    }

    var usage: CacheUsage {
        var n = 0
        for shard in shards { shard.locked { n += shard.entries.values.filter(\.isPersisted).count } }
        return CacheUsage(bytes: totalBytes, capacity: configuration.capacity, entries: n)
    }

    func remove(url: String) throws {
        let key = try configuration.keyRules.key(for: url)
        let shard = shard(for: key)
        guard let e = shard.locked({ shard.entries[key] }), e.isPersisted else {
            throw CacheError.notFound(url: url, status: 0)
        }
        try removeEntries([(shard, e)])
    }

    func clear() throws {
        var all: [(Shard, EntryState)] = []
        for shard in shards { shard.locked { for e in shard.entries.values { all.append((shard, e)) } } }
        try removeEntries(all)
    }

    /// Forgets entries: readers waiting on them fail, transfers stop, rows go, then files.
    private func removeEntries(_ victims: [(Shard, EntryState)]) throws {
        var ids: [Int64] = []
        for (shard, e) in victims {
            let (waiting, cancels, persisted): ([Waiter.Completion], [FetchHandleBox], Bool) = shard.locked {
                let persisted = e.isPersisted
                // Only the entry in the shard is this one's to remove (a detached copy has no bytes).
                if shard.entries[e.info.key] === e { shard.entries.removeValue(forKey: e.info.key) }
                idleFiles.dropAll(of: e)
                if case let .leave(opens) = e.markRemoved() {
                    addBytes(-e.coverage.count)
                    answer(opens, .failure(.cancelled))
                }
                e.coverage = RangeSet()
                e.sliceBytes = [:]
                let w = e.waiters.map(\.completion)
                e.waiters = []
                return (w, e.inflight.removeAll().compactMap { handles.remove($0) }, persisted)
            }
            cancels.forEach { $0.cancel() }
            waiting.forEach { done in pool.submit { done(.failure(.cancelled)) } }
            if persisted { ids.append(e.id) }
        }
        let idSet = Set(ids)
        try index.deleteEntries(ids) {
            let fm = FileManager.default
            for sub in (try? fm.contentsOfDirectory(atPath: store.dataDirectory)) ?? [] {
                let dir = store.dataDirectory + "/" + sub
                for name in (try? fm.contentsOfDirectory(atPath: dir)) ?? [] {
                    if let p = DataFiles.parse(fileName: name), idSet.contains(p.entry) { unlink(dir + "/" + name) }
                }
            }
        }
    }

    /// Re-reads every recorded extent and compares its checksum. Bad extents are dropped from the
    /// index and from memory, so they are fetched again instead of served.
    func verify() -> VerifyReport {
        var report = VerifyReport(extentsChecked: 0, bytesChecked: 0, problems: [])
        var entries: [(Shard, EntryState)] = []
        for shard in shards { shard.locked { for e in shard.entries.values where e.isPersisted { entries.append((shard, e)) } } }
        for (shard, e) in entries {
            let (id, gen, url) = shard.locked { (e.id, e.info.generation, e.info.url) }
            let extents: [CacheIndex.ExtentRow]
            do { extents = try index.extents(entryID: id, generation: gen) } catch {
                report.problems.append("\(url): cannot read the index: \(error)")
                continue
            }
            for x in extents {
                let range = x.start..<x.end
                shard.locked { e.pin(slices(of: range), generation: gen) }
                let result = readFromDisk(entryID: id, generation: gen, range: range)
                shard.locked { e.unpin(slices(of: range), generation: gen) }
                report.extentsChecked += 1
                report.bytesChecked += range.length
                var problem: String?
                switch result {
                case let .success(bytes):
                    if XXH64.hash(bytes) != x.checksum { problem = "checksum mismatch" }
                case let .failure(err):
                    problem = "\(err)"
                }
                guard let problem else { continue }
                report.problems.append("\(url) bytes \(x.start)-\(x.end - 1): \(problem); dropped")
                try? index.deleteExtent(x)
                forget(entry: e, shard: shard, range: range, generation: gen)
            }
        }
        return report
    }
}
