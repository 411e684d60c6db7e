import Foundation

/// Byte ranges the user pinned (`preload --pin`): eviction leaves every slice that overlaps one.
/// Not to be confused with a slice's in-use pin (`EntryState.isPinned`: a read or write under way).
///
/// Kept by cache key, in memory for eviction's checks and in the index's `pin` table, written
/// before a change is reported, so pins survive restarts. The total is bounded by the caller
/// (`CacheEngine.pin`: at most half the cap), so eviction always has room to work with.
/// Thread-safe; its lock is a leaf (taken under shard locks, never around other locks).
final class PinTable: @unchecked Sendable {
    private let lock = NSLock()
    /// Held by `CacheEngine.pin`/`unpin` from the limit check to the index commit, so two pins
    /// at once cannot both pass the limit. Never taken by eviction.
    let updates = NSLock()
    private var pins: [CacheKey: RangeSet] = [:]   // guarded by lock
    private var total: Int64 = 0                     // guarded by lock

    init(_ loaded: [String: [Range<Int64>]]) {
        for (key, ranges) in loaded {
            let set = RangeSet(ranges)
            pins[CacheKey(rawValue: key)] = set
            total += set.count
        }
    }

    var totalBytes: Int64 { lock.withLock { total } }
    var count: Int { lock.withLock { pins.count } }

    func ranges(_ key: CacheKey) -> RangeSet { lock.withLock { pins[key] ?? RangeSet() } }

    /// True when any pinned byte of `key` lies in `range` (a slice's span).
    func overlaps(_ key: CacheKey, _ range: Range<Int64>) -> Bool {
        lock.withLock { pins[key].map { !$0.intersection(range).isEmpty } ?? false }
    }

    /// Sets `key`'s ranges; returns the new total.
    @discardableResult
    func set(_ key: CacheKey, _ set: RangeSet) -> Int64 {
        lock.withLock {
            total -= pins[key]?.count ?? 0
            pins[key] = set.isEmpty ? nil : set
            total += set.count
            return total
        }
    }

    func all() -> [CacheKey: RangeSet] { lock.withLock { pins } }
}
