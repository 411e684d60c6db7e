import CacheCore

/// Which tier node is a slice's home, and which come next: rendezvous (highest random weight)
/// hashing of (cache key, slice index, node). Every host computes the same order with no
/// coordination; N nodes each hold about 1/N of the slices, and removing a node moves only the
/// slices it was home to (every other slice keeps its first choice).
///
/// Pure value: no clock, no I/O. Health is `TierHealth`'s.
public struct TierRouter: Sendable, Equatable {
    public let nodes: [String]
    public let sliceSize: Int64

    public init(nodes: [String], sliceSize: Int64) {
        precondition(sliceSize > 0)
        self.nodes = nodes
        self.sliceSize = sliceSize
    }

    /// Node indexes for slice `slice` of `key`, best first.
    public func order(key: String, slice: Int64) -> [Int] {
        let scores = nodes.map { Self.weight(node: $0, key: key, slice: slice) }
        return nodes.indices.sorted { scores[$0] != scores[$1] ? scores[$0] > scores[$1] : $0 < $1 }
    }

    static func weight(node: String, key: String, slice: Int64) -> UInt64 {
        XXH64.hash(Array("\(node)\n\(key)\n\(slice)".utf8))
    }

    /// One request to the tier: bytes `start..<end` of slice `index`.
    public struct Piece: Sendable, Equatable {
        public var index: Int64
        public var start: Int64
        public var end: Int64
        public init(index: Int64, start: Int64, end: Int64) {
            self.index = index
            self.start = start
            self.end = end
        }
    }

    /// The piece that starts at `offset` of a body that ends at `end`: up to the end of the
    /// slice holding `offset`, so each tier request maps to exactly one tier cache entry and
    /// asks for no byte the reader did not (a random 64 KiB read costs 64 KiB, not a slice).
    public func piece(at offset: Int64, end: Int64) -> Piece {
        let index = offset / sliceSize
        return Piece(index: index, start: offset, end: min(end, (index + 1) * sliceSize))
    }

    /// All pieces of `start..<end`, in order.
    public func pieces(start: Int64, end: Int64) -> [Piece] {
        var out: [Piece] = []
        var at = start
        while at < end {
            let p = piece(at: at, end: end)
            out.append(p)
            at = p.end
        }
        return out
    }
}
