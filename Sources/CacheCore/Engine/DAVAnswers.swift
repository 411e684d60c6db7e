import CoreTypes

/// Entries whose last answer (in this process) carried a `DAV:` header: their folder is listed
/// with `PROPFIND` (`CacheEngine.answeredDAV`, asked by a mount's listings).
///
/// Bounded: past 100,000 keys it starts again empty, since forgetting only costs a folder its
/// `PROPFIND` until its next answer. Threads: any (under a shard lock: `Versions.adopt`); a
/// leaf lock.
final class DAVAnswers: Sendable {
    private let keys = LockedValue<Set<CacheKey>>([])

    /// Records whether `key`'s last answer carried a `DAV:` header.
    func note(_ webDAV: Bool, key: CacheKey) {
        keys.withLock { keys in
            if webDAV {
                if keys.count > 100_000 { keys.removeAll() }
                keys.insert(key)
            } else {
                keys.remove(key)
            }
        }
    }

    /// True when `key`'s last answer carried a `DAV:` header.
    func answered(_ key: CacheKey) -> Bool { keys.withLock { $0.contains(key) } }
}
