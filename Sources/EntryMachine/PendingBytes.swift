import CoreTypes

/// Bytes of one entry that arrived and wait for the writer. Guarded by the entry's shard lock.
///
/// Between arrival and the disk write such bytes are neither on disk nor ahead of their
/// transfer's cursor, so a read planned meanwhile would otherwise wait for a transfer that
/// already passed them. Reads count them as present and copy them from memory (the chunks are
/// immutable views of a `ChunkStorage`; the writer reads them without the lock). Chunks never
/// overlap each other or the entry's coverage, and all belong to the entry's current generation
/// (a new generation drops them; their writer then records nothing).
package struct PendingBytes {
    /// A part of a buffer (`ChunkMemory`) queued for the writer. Whoever makes one holds the
    /// buffer for the writer first (CacheCore's `ChunkStorage.pendingChunk`), until `writerDone`.
    package final class Chunk: Sendable {
        package let range: Range<Int64>
        package let storage: any ChunkMemory
        package let offset: Int

        /// Bytes `offset ..< offset + range.length` of `storage`.
        package init(range: Range<Int64>, storage: any ChunkMemory, offset: Int) {
            self.range = range
            self.storage = storage
            self.offset = offset
        }

        /// The writer wrote it, or let it go: its part of the queued share is given back.
        package func writerDone() { storage.writerDone() }

        package var bytes: UnsafeRawBufferPointer {
            storage.bytes(at: offset, count: Int(range.length))
        }
    }

    /// Sorted by offset, disjoint.
    package private(set) var chunks: [Chunk] = []
    package private(set) var ranges = RangeSet()

    package var isEmpty: Bool { chunks.isEmpty }

    package mutating func add(_ chunk: Chunk) {
        var lo = 0, hi = chunks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if chunks[mid].range.lowerBound < chunk.range.lowerBound { lo = mid + 1 } else { hi = mid }
        }
        chunks.insert(chunk, at: lo)
        _ = ranges.insert(chunk.range)
    }

    /// The writer is done with `chunk` (its bytes are on disk and in the coverage, or dropped).
    package mutating func remove(_ chunk: Chunk) {
        guard let i = chunks.firstIndex(where: { $0 === chunk }) else { return }
        chunks.remove(at: i)
        _ = ranges.remove(chunk.range)
    }

    package mutating func removeAll() {
        chunks = []
        ranges = RangeSet()
    }

    /// `cached` plus the pending bytes: what a read may count as present.
    package func adding(to cached: RangeSet) -> RangeSet {
        guard !chunks.isEmpty else { return cached }
        var all = cached
        for r in ranges.ranges { _ = all.insert(r) }
        return all
    }

    /// Pending bytes seen under the shard lock and put in a lease after it: the view keeps its
    /// chunk's memory alive until then.
    package struct View: Sendable {
        package let range: Range<Int64>
        package let chunk: Chunk
        package let lo: Int

        /// Where the bytes are in the chunk's storage.
        package var storageOffset: Int { chunk.offset + lo }
    }

    /// The pending bytes within `range`, in order, as views (no copy).
    package func views(in range: Range<Int64>) -> [View] {
        guard ranges.intersection(range).isEmpty == false else { return [] }
        var out: [View] = []
        for c in chunks where c.range.overlaps(range) {
            let part = c.range.clamped(to: range)
            out.append(View(range: part, chunk: c, lo: Int(part.lowerBound - c.range.lowerBound)))
        }
        return out
    }
}

/// The memory a pending chunk's bytes are in (CacheCore's pooled `ChunkStorage`, counted in the
/// memory budget). The machine only keeps chunks in order and hands out views of them; holding
/// and releasing the memory is the engine's.
package protocol ChunkMemory: AnyObject, Sendable {
    /// Bytes `offset ..< offset + count`, published already: valid while the memory lives.
    func bytes(at offset: Int, count: Int) -> UnsafeRawBufferPointer
    /// The writer is done with a chunk of it: its part of the queued share goes back.
    func writerDone()
}
