import Foundation

/// Byte ranges the user pinned (`preload --pin`): eviction leaves every slice that overlaps one.
/// Not to be confused with a slice's in-use pin (`EntryState.isPinned`: a read or write under way).
///
/// Kept by cache key, in memory for eviction's checks and in the index's `pin` table, written
/// before a change is reported, so pins survive restarts. The total is bounded by the caller
/// (`CacheEngine.pin`: at most half the cap), so eviction always has room to work with.
/// Thread-safe; its lock is a leaf (taken under shard locks, never around other locks).
final class PinTable: Sendable {
    private struct State {
        var pins: [CacheKey: RangeSet] = [:]
        var total: Int64 = 0
    }
    private let state: LockedValue<State>
    /// Held by `CacheEngine.pin`/`unpin` from the limit check to the index commit, so two pins
    /// at once cannot both pass the limit. Never taken by eviction.
    let updates = NSLock()

    init(_ loaded: [String: [Range<Int64>]]) {
        var s = State()
        for (key, ranges) in loaded {
            let set = RangeSet(ranges)
            s.pins[CacheKey(rawValue: key)] = set
            s.total += set.count
        }
        state = LockedValue(s)
    }

    var totalBytes: Int64 { state.withLock { $0.total } }
    var count: Int { state.withLock { $0.pins.count } }

    func ranges(_ key: CacheKey) -> RangeSet { state.withLock { $0.pins[key] ?? RangeSet() } }

    /// True when any pinned byte of `key` lies in `range` (a slice's span).
    func overlaps(_ key: CacheKey, _ range: Range<Int64>) -> Bool {
        state.withLock { $0.pins[key].map { !$0.intersection(range).isEmpty } ?? false }
    }

    /// Sets `key`'s ranges; returns the new total.
    @discardableResult
    func set(_ key: CacheKey, _ set: RangeSet) -> Int64 {
        state.withLock { s in
            s.total -= s.pins[key]?.count ?? 0
            s.pins[key] = set.isEmpty ? nil : set
            s.total += set.count
            return s.total
        }
    }

    func all() -> [CacheKey: RangeSet] { state.withLock { $0.pins } }
}
