import Foundation

/// `--cache-max-age`: entries nobody read for that long leave the cache, besides the size cap.
///
/// The sweeper calls `evictExpired(now:)` once a second with the configuration's clock. An
/// entry's age is the time since its last read (`lastAccess`, stamped by the read path with the
/// same clock). Its slices go through the same eviction as the cap's, so slices in use (pinned by
/// a read or a write) stay, and so does every slice of an entry that a reader has open: a player
/// paused for a week keeps its file. The entry's row stays (with no bytes), as after the cap's
/// eviction; `cache ls` shows it at 0%.
extension Maintenance {
    /// Evicts the unpinned slices of entries last read before `now - maxAge` that no reader has
    /// open. Returns the bytes freed (0 without `maxAge`). Takes the evictor's lock for the choice only.
    @discardableResult
    func evictExpired(now: Date) -> Int64 {
        guard let maxAge = configuration.maxAge else { return 0 }
        let cutoff = now.timeIntervalSince1970 - maxAge
        loadReadBefore(cutoff)
        let expired: @Sendable (EntryState) -> Bool = { [openReaders] e in e.lastAccess < cutoff && !openReaders.contains(e.info.key) }
        let (freed, entries) = evictor.evict(where: expired)
        if freed > 0 {
            logger.info("evicted entries not read within --cache-max-age", metadata: [
                "bytes": "\(freed)", "entries": "\(entries)", "max_age_s": "\(Int(maxAge))"])
        }
        return freed
    }
}

/// The entries readers have open, by key: max-age eviction leaves them alone however long ago
/// they were last read. Readers register when made and leave when closed (or dropped).
final class OpenReaders: Sendable {
    private let readers = LockedValue<[CacheKey: Set<Int>]>([:])

    func open(_ key: CacheKey, reader: Int) {
        readers.withLock { _ = $0[key, default: []].insert(reader) }
    }

    /// Idempotent: a reader closed twice leaves once.
    func close(_ key: CacheKey, reader: Int) {
        readers.withLock { readers in
            readers[key]?.remove(reader)
            if readers[key]?.isEmpty == true { readers[key] = nil }
        }
    }

    func contains(_ key: CacheKey) -> Bool { readers.withLock { $0[key] != nil } }
}
