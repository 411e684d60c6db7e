/// A set of byte offsets stored as sorted, disjoint, non-adjacent half-open ranges.
///
/// Coverage of an entry (which bytes are on disk) and the pending parts of fetches are RangeSets;
/// everything the planner decides is arithmetic on them.
public struct RangeSet: Sendable, Equatable, CustomStringConvertible {
    public private(set) var ranges: [Range<Int64>] = []

    public init() {}
    public init(_ ranges: [Range<Int64>]) { for r in ranges { insert(r) } }

    public var isEmpty: Bool { ranges.isEmpty }
    public var count: Int64 { ranges.reduce(0) { $0 + $1.length } }
    public var description: String { ranges.map { "\($0.lowerBound)..<\($0.upperBound)" }.joined(separator: ", ") }

    /// Index of the first range whose upper bound is >= `offset` (binary search).
    private func firstIndex(endingAtOrAfter offset: Int64) -> Int {
        var lo = 0, hi = ranges.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if ranges[mid].upperBound < offset { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Adds `r`, merging with neighbours. Returns how many bytes were not present before.
    @discardableResult
    public mutating func insert(_ r: Range<Int64>) -> Int64 {
        guard !r.isEmpty else { return 0 }
        let i = firstIndex(endingAtOrAfter: r.lowerBound)
        var j = i
        var lower = r.lowerBound, upper = r.upperBound
        var overlap: Int64 = 0
        while j < ranges.count && ranges[j].lowerBound <= r.upperBound {
            let o = ranges[j].clamped(to: r)
            overlap += o.length
            lower = min(lower, ranges[j].lowerBound)
            upper = max(upper, ranges[j].upperBound)
            j += 1
        }
        ranges.replaceSubrange(i..<j, with: [lower..<upper])
        return r.length - overlap
    }

    /// Removes `r`. Returns how many bytes were present and are now gone.
    @discardableResult
    public mutating func remove(_ r: Range<Int64>) -> Int64 {
        guard !r.isEmpty else { return 0 }
        var i = firstIndex(endingAtOrAfter: r.lowerBound + 1)
        var removed: Int64 = 0
        var replacement: [Range<Int64>] = []
        let start = i
        while i < ranges.count && ranges[i].lowerBound < r.upperBound {
            let cur = ranges[i]
            removed += cur.clamped(to: r).length
            if cur.lowerBound < r.lowerBound { replacement.append(cur.lowerBound..<r.lowerBound) }
            if cur.upperBound > r.upperBound { replacement.append(r.upperBound..<cur.upperBound) }
            i += 1
        }
        ranges.replaceSubrange(start..<i, with: replacement)
        return removed
    }

    /// True when every byte of `r` is present.
    public func contains(_ r: Range<Int64>) -> Bool {
        if r.isEmpty { return true }
        let i = firstIndex(endingAtOrAfter: r.lowerBound + 1)
        return i < ranges.count && ranges[i].lowerBound <= r.lowerBound && ranges[i].upperBound >= r.upperBound
    }

    /// Present bytes within `r`, in order.
    public func intersection(_ r: Range<Int64>) -> [Range<Int64>] {
        guard !r.isEmpty else { return [] }
        var out: [Range<Int64>] = []
        var i = firstIndex(endingAtOrAfter: r.lowerBound + 1)
        while i < ranges.count && ranges[i].lowerBound < r.upperBound {
            out.append(ranges[i].clamped(to: r))
            i += 1
        }
        return out
    }

    /// Missing bytes within `r`, in order.
    public func gaps(in r: Range<Int64>) -> [Range<Int64>] {
        guard !r.isEmpty else { return [] }
        var out: [Range<Int64>] = []
        var cursor = r.lowerBound
        for present in intersection(r) {
            if present.lowerBound > cursor { out.append(cursor..<present.lowerBound) }
            cursor = present.upperBound
        }
        if cursor < r.upperBound { out.append(cursor..<r.upperBound) }
        return out
    }

    /// The first present offset at or after `offset`, or nil.
    public func nextPresent(atOrAfter offset: Int64) -> Int64? {
        guard offset < .max else { return nil }  // no range holds Int64.max (ends are exclusive)
        let i = firstIndex(endingAtOrAfter: offset + 1)
        guard i < ranges.count else { return nil }
        return max(ranges[i].lowerBound, offset)
    }
}

extension Range where Bound == Int64 {
    /// Number of bytes, as Int64 (`count` is an Int).
    public var length: Int64 { upperBound - lowerBound }
}
