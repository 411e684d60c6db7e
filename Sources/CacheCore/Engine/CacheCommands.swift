import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Listing, removal and verification: what `cache ls/info/rm/clear/verify` need. An entry not
/// in memory is loaded for the command (`EntryLoader.loadNow`); those over every entry go
/// through the index a page at a time, never every entry in memory at once.
///
/// Threads: the command's (the CLI's, the status page's), blocking on the index, a load and,
/// for `verify`, the data files' reads, never under a shard lock; each shard's lock is taken only
/// to look an entry up or take it out.
final class CacheCommands: Sendable {
    private let configuration: CacheConfiguration
    private let shards: [Shard]
    private let store: SliceStore
    private let evictor: Evictor
    private let fetches: FetchCoordinator
    private let loader: EntryLoader
    private let answers: ReadAnswers
    private let versions: Versions
    private let pool: BlockingIOPool

    init(configuration: CacheConfiguration, shards: [Shard], store: SliceStore, evictor: Evictor, fetches: FetchCoordinator,
         loader: EntryLoader, answers: ReadAnswers, versions: Versions, pool: BlockingIOPool) {
        self.configuration = configuration
        self.shards = shards
        self.store = store
        self.evictor = evictor
        self.fetches = fetches
        self.loader = loader
        self.answers = answers
        self.versions = versions
        self.pool = pool
    }

    func status(of e: EntryState) -> EntryStatus {
        EntryStatus(info: e.info, cachedRanges: e.coverage.ranges, cachedBytes: e.coverage.count, hits: e.hits,
                    misses: e.misses, bytesFromCache: e.bytesFromCache, bytesFromOrigin: e.bytesFromOrigin,
                    lastAccess: Date(timeIntervalSince1970: e.lastAccess), recentErrors: e.recentErrors,
                    readsByDoor: e.readsByDoor)
    }

    func status(url: String) -> EntryStatus? {
        guard let key = try? configuration.keyRules.key(for: url) else { return nil }
        loader.loadNow(key)
        let shard = shards.of(key)
        return shard.locked { $0[key].flatMap { $0.isPersisted ? status(of: $0) : nil } }
    }

    /// The index row id of `url`'s entry, if it has one.
    func entryID(url: String) -> Int64? {
        guard let key = try? configuration.keyRules.key(for: url) else { return nil }
        if let id = shards.of(key).locked({ $0[key].flatMap { $0.isPersisted ? $0.id : nil } }) { return id }
        return (try? store.index.storedRow(key: key.string))?.id
    }

    /// Every entry: those in memory as they are there, the rest as the index has them (read a
    /// page at a time, in URL order; nothing loaded).
    func list() -> [EntryStatus] {
        var out: [EntryStatus] = []
        var cursor: CacheIndex.PageCursor?
        store.index.flush()
        while let page = try? store.index.entryPage(after: cursor, limit: 1000), let last = page.entries.last {
            cursor = .init(url: last.url, id: last.id)
            var coverage: [Int64: RangeSet] = [:]
            for x in page.extents { coverage[x.entryID, default: RangeSet()].insert(x.start..<x.end) }
            for r in page.entries {
                let key = CacheKey(rawValue: r.key)
                if let s = shards.of(key).locked({ $0[key].flatMap { $0.isPersisted ? status(of: $0) : nil } }) {
                    out.append(s)
                    continue
                }
                let cached = coverage[r.id] ?? RangeSet()
                out.append(EntryStatus(info: r.info, cachedRanges: cached.ranges, cachedBytes: cached.count, hits: r.hits,
                                       misses: r.misses, bytesFromCache: r.bytesFromCache, bytesFromOrigin: r.bytesFromOrigin,
                                       lastAccess: Date(timeIntervalSince1970: r.lastAccess),
                                       recentErrors: r.lastError.map { [$0] } ?? []))
            }
        }
        return out
    }

    /// The live entries whose figures the index does not hold yet: read statistics not yet
    /// written (`Maintenance.writeReadStats`), or no row handed to the index yet. In URL order.
    func unsaved() -> [EntryStatus] {
        var out: [EntryStatus] = []
        for shard in shards {
            out += shard.locked { $0.all.filter { $0.isPersisted && ($0.readStatsDirty || !$0.hasSavedRow) }.map(status(of:)) }
        }
        return out.sorted { $0.info.url < $1.info.url }
    }

    /// Bytes from the running total, entries from the index.
    var usage: CacheUsage {
        CacheUsage(bytes: evictor.totalBytes, capacity: configuration.capacity, entries: (try? store.index.entryCount()) ?? 0)
    }

    func remove(url: String) throws {
        try remove(key: try configuration.keyRules.key(for: url), url: url)
    }

    /// Forgets the entry of `key` (`url`: how the error names it), loaded first if it is not in memory.
    func remove(key: CacheKey, url: String) throws {
        loader.loadNow(key)
        let shard = shards.of(key)
        guard let e = shard.locked({ $0[key].flatMap { $0.isPersisted ? $0.handle : nil } }) else {
            throw CacheError.notFound(url: url, status: 0)
        }
        try removeEntries([(shard, e)])
    }

    /// Removes every entry: those in memory, then the index's a page at a time, each loaded
    /// and removed as `cache rm` does (its bytes leave the totals with it).
    func clear() throws {
        var all: [(Shard, EntryHandle)] = []
        for shard in shards { all += shard.locked { $0.all.map { (shard, $0.handle) } } }
        try removeEntries(all)
        while let page = try? store.index.keyPage(after: 0, limit: 512), !page.isEmpty {
            var victims: [(Shard, EntryHandle)] = []
            for (_, k) in page {
                let key = CacheKey(rawValue: k)
                loader.loadNow(key)
                let shard = shards.of(key)
                if let h = shard.locked({ $0[key]?.handle }) { victims.append((shard, h)) }
            }
            guard !victims.isEmpty else { break }
            try removeEntries(victims)
        }
    }

    /// Forgets entries: readers waiting on them fail, transfers stop, rows go, then files.
    private func removeEntries(_ victims: [(Shard, EntryHandle)]) throws {
        var ids: [(id: Int64, generation: Int64)] = []
        for (shard, handle) in victims {
            let (waiting, cancels, persisted): ([Waiter.Completion], [FetchHandleBox], (id: Int64, generation: Int64)?) = shard.locked { entries in
                // Not there: removed since it was listed, by whoever removed it.
                guard let persisted = entries[handle]?.isPersisted, let (e, action) = entries.remove(handle) else {
                    return ([], [], nil)
                }
                store.forgetFiles(of: handle)
                if case let .leave(opens) = action {
                    evictor.addBytes(-e.coverage.count)
                    evictor.scanShare.add(-e.scanBytes)
                    versions.answer(opens, .failure(.cancelled))
                }
                let (waiters, ids) = e.machine.stopped(dropBytes: true)
                return (waiters.map(\.completion), fetches.stop(ids), persisted ? (e.id, e.info.generation) : nil)
            }
            cancels.forEach { $0.cancel() }
            waiting.forEach { done in pool.submit { done(.failure(.cancelled)) } }
            if let persisted { ids.append(persisted) }
        }
        try store.deleteEntries(ids)
    }

    /// Re-reads every recorded extent and compares its checksum. Bad extents are dropped from the
    /// index and from memory, so they are fetched again instead of served.
    func verify() -> VerifyReport {
        var report = VerifyReport(extentsChecked: 0, bytesChecked: 0, problems: [])
        var keys: [CacheKey] = []
        var after = 0 as Int64
        while let page = try? store.index.keyPage(after: after, limit: 1024), let last = page.last {
            after = last.id
            keys += page.map { CacheKey(rawValue: $0.key) }
        }
        for key in keys {
            loader.loadNow(key)
            let shard = shards.of(key)
            guard let e = shard.locked({ $0[key].flatMap { $0.isPersisted ? $0.handle : nil } }) else { continue }
            defer { loader.trim(shard) }
            // Removed since it was listed (nothing found): nothing of it to check.
            guard let (id, gen, url) = shard.locked({ $0[e].map { ($0.id, $0.info.generation, $0.info.url) } }) else { continue }
            let extents: [CacheIndex.ExtentRow]
            do { extents = try store.extents(entryID: id, generation: gen) } catch {
                report.problems.append("\(url): cannot read the index: \(error)")
                continue
            }
            for x in extents {
                let range = x.start..<x.end
                shard.locked { $0[e]?.pin(store.slices(of: range), generation: gen) }
                let result = store.check(x)
                shard.locked { $0[e]?.unpin(store.slices(of: range), generation: gen) }
                report.extentsChecked += 1
                report.bytesChecked += range.length
                let problem: String
                switch result {
                case .matches: continue
                case .differs: problem = "checksum mismatch"
                case let .unreadable(e):
                    answers.logUnreadable(e)
                    problem = "\(e.cacheError)"
                }
                report.problems.append("\(url) bytes \(x.start)-\(x.end - 1): \(problem); dropped")
                store.dropExtents([x])
                answers.forget(entry: e, shard: shard, range: range, generation: gen)
            }
        }
        return report
    }
}
