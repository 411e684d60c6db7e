import Foundation

/// Byte ranges the user pinned (`preload --pin`): eviction leaves every slice that overlaps one.
/// Not to be confused with a slice's in-use pin (`EntryState.isPinned`: a read or write under way).
///
/// Counted in what they keep, not in what was asked: eviction keeps whole slices, so a pin of
/// one byte keeps a slice. Counted in requested bytes, `--head 1 --tail 1 --pin` over 10 files
/// would say "pinned 20 bytes" and keep 60 MiB of slices under a 64 MiB cap, sending every
/// other read to the network. A key's held bytes are its overlapped slices, each
/// `sliceSize` long or up to the file's end where its length is known (a pin of a small file
/// keeps that file, not a whole slice).
///
/// Kept by cache key, in memory for eviction's checks and in the index's `pin` table, written
/// before a change is reported, so pins survive restarts. The total is bounded by the caller
/// (`CacheEngine.pin`: at most half the cap), so eviction always has room to work with.
/// Thread-safe; its lock is a leaf (taken under shard locks, never around other locks).
final class PinTable: Sendable {
    private struct State {
        var pins: [CacheKey: RangeSet] = [:]
        /// The file's length where known, which the last slice's held bytes stop at.
        var lengths: [CacheKey: Int64] = [:]
        var held: [CacheKey: Int64] = [:]
        var total: Int64 = 0
    }
    private let state: LockedValue<State>
    let sliceSize: Int64
    /// Held by `CacheEngine.pin`/`unpin` from the limit check to the index commit, so two pins
    /// at once cannot both pass the limit. Never taken by eviction.
    let updates = NSLock()

    init(_ loaded: [String: [Range<Int64>]], sliceSize: Int64, lengths: [CacheKey: Int64] = [:]) {
        self.sliceSize = sliceSize
        var s = State()
        for (key, ranges) in loaded {
            let key = CacheKey(rawValue: key)
            let set = RangeSet(ranges)
            s.pins[key] = set
            if let length = lengths[key] { s.lengths[key] = length }
            let held = Self.held(set, sliceSize: sliceSize, length: lengths[key])
            s.held[key] = held
            s.total += held
        }
        state = LockedValue(s)
    }

    /// The bytes `set` keeps: its overlapped slices, the last one cut at `length` when known.
    static func held(_ set: RangeSet, sliceSize: Int64, length: Int64?) -> Int64 {
        var total: Int64 = 0
        var last: Int64 = -1   // the last slice counted: two ranges in one slice count it once
        for r in set.ranges where !r.isEmpty {
            let first = max(r.lowerBound / sliceSize, last + 1), end = (r.upperBound - 1) / sliceSize
            guard first <= end else { continue }
            let lo = first * sliceSize
            var hi = (end + 1) * sliceSize
            if let length { hi = min(hi, max(length, lo)) }
            total += hi - lo
            last = end
        }
        return total
    }

    /// Bytes the pins keep, over every file.
    var totalBytes: Int64 { state.withLock { $0.total } }
    var count: Int { state.withLock { $0.pins.count } }

    func ranges(_ key: CacheKey) -> RangeSet { state.withLock { $0.pins[key] ?? RangeSet() } }

    /// The bytes `key`'s pins keep.
    func heldBytes(_ key: CacheKey) -> Int64 { state.withLock { $0.held[key] ?? 0 } }

    /// The bytes each pinned key's pins keep (the status summary's folders add them up).
    func heldByKey() -> [CacheKey: Int64] { state.withLock { $0.held } }

    /// True when any pinned byte of `key` lies in `range` (a slice's span).
    func overlaps(_ key: CacheKey, _ range: Range<Int64>) -> Bool {
        state.withLock { $0.pins[key].map { !$0.intersection(range).isEmpty } ?? false }
    }

    /// The total if `key`'s ranges were `set` (for the limit check before the index commit).
    func totalIf(_ key: CacheKey, _ set: RangeSet, length: Int64?) -> Int64 {
        state.withLock { s in
            s.total - (s.held[key] ?? 0) + Self.held(set, sliceSize: sliceSize, length: length ?? s.lengths[key])
        }
    }

    /// Sets `key`'s ranges; returns the new total.
    @discardableResult
    func set(_ key: CacheKey, _ set: RangeSet, length: Int64? = nil) -> Int64 {
        state.withLock { s in
            s.total -= s.held[key] ?? 0
            if let length { s.lengths[key] = length }
            if set.isEmpty {
                s.pins[key] = nil
                s.held[key] = nil
                s.lengths[key] = nil
            } else {
                s.pins[key] = set
                let held = Self.held(set, sliceSize: sliceSize, length: s.lengths[key])
                s.held[key] = held
                s.total += held
            }
            return s.total
        }
    }

    func all() -> [CacheKey: RangeSet] { state.withLock { $0.pins } }
}
