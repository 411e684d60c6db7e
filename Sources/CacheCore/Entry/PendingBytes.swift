/// Bytes of one entry that arrived and wait for the writer. Guarded by the entry's shard lock.
///
/// Between arrival and the disk write such bytes are neither on disk nor ahead of their
/// transfer's cursor, so a read planned meanwhile would otherwise wait for a transfer that
/// already passed them. Reads count them as present and copy them from memory (the chunks are
/// immutable views of a `ChunkStorage`; the writer reads them without the lock). Chunks never
/// overlap each other or the entry's coverage, and all belong to the entry's current generation
/// (a new generation drops them; their writer then records nothing).
struct PendingBytes {
    /// Holds its storage for the writer (the queued share) from creation until `writerDone`.
    final class Chunk: Sendable {
        let range: Range<Int64>
        let storage: ChunkStorage
        let offset: Int

        /// Bytes `offset ..< offset + range.length` of `storage`.
        init(range: Range<Int64>, storage: ChunkStorage, offset: Int) {
            self.range = range
            self.storage = storage
            self.offset = offset
            storage.holdForWriter()
        }

        /// The writer wrote it, or let it go: its part of the queued share is given back.
        func writerDone() { storage.writerDone() }

        var bytes: UnsafeRawBufferPointer {
            storage.bytes(at: offset, count: Int(range.length))
        }
    }

    /// Sorted by offset, disjoint.
    private(set) var chunks: [Chunk] = []
    private(set) var ranges = RangeSet()

    var isEmpty: Bool { chunks.isEmpty }

    mutating func add(_ chunk: Chunk) {
        var lo = 0, hi = chunks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if chunks[mid].range.lowerBound < chunk.range.lowerBound { lo = mid + 1 } else { hi = mid }
        }
        chunks.insert(chunk, at: lo)
        _ = ranges.insert(chunk.range)
    }

    /// The writer is done with `chunk` (its bytes are on disk and in the coverage, or dropped).
    mutating func remove(_ chunk: Chunk) {
        guard let i = chunks.firstIndex(where: { $0 === chunk }) else { return }
        chunks.remove(at: i)
        _ = ranges.remove(chunk.range)
    }

    mutating func removeAll() {
        chunks = []
        ranges = RangeSet()
    }

    /// `cached` plus the pending bytes: what a read may count as present.
    func adding(to cached: RangeSet) -> RangeSet {
        guard !chunks.isEmpty else { return cached }
        var all = cached
        for r in ranges.ranges { _ = all.insert(r) }
        return all
    }

    /// Pending bytes seen under the shard lock and put in a lease after it: the view keeps its
    /// chunk's memory alive until then.
    struct View: Sendable {
        let range: Range<Int64>
        let chunk: Chunk
        let lo: Int

        /// Where the bytes are in the chunk's storage.
        var storageOffset: Int { chunk.offset + lo }

        /// The bytes as a lease piece: the same memory, held for one reply (retained past the
        /// cap: the answer is built already, and it lives for one reply).
        func retained() -> ChunkBytes {
            ChunkBytes(ChunkRetention(chunk.storage, force: true)!, offset: storageOffset, count: Int(range.length))
        }
    }

    /// The pending bytes within `range`, in order, as views (no copy).
    func views(in range: Range<Int64>) -> [View] {
        guard ranges.intersection(range).isEmpty == false else { return [] }
        var out: [View] = []
        for c in chunks where c.range.overlaps(range) {
            let part = c.range.clamped(to: range)
            out.append(View(range: part, chunk: c, lo: Int(part.lowerBound - c.range.lowerBound)))
        }
        return out
    }
}
