import Foundation

/// The memory of one batch of arrivals (`EntrySink`): libcurl's bytes land here once, and every
/// consumer shares them by reference, never by copy: the writer (`PendingBytes.Chunk`), the reads
/// waiting for them and their answers (`ChunkBytes`, a `ReadLease` piece that FUSE replies from
/// as it is and the proxy copies once into its `ByteBuffer`). The buffer goes back to the pool
/// when the last of them let go (`deinit`).
///
/// Who holds it is counted here, for the `MemoryBudget`: the writer's holds (the sink's batch
/// while it fills, then each chunk queued for the writer) keep its capacity in the queued share
/// until the last is done; the reads' holds (`ChunkRetention`) keep it in the retained share
/// while any read holds it. The two are independent, so reads that keep a chunk alive never keep
/// its transfer paused (see `MemoryBudget`).
///
/// Why a pool: buffers are allocated on the fetch thread and freed on a writer lane, thousands
/// per GiB; through malloc that churn left the daemon's heap fragmented, so it kept about 25 MiB
/// more than the budget allowed. Buffers come in four sizes (16 to 128 KiB, sized for a
/// transfer's turns; a larger arrival from a source other than libcurl gets its own size,
/// unpooled), the budget counts their capacity, and the pool keeps at most the queued share's
/// worth of free buffers.
// @unchecked: raw memory (`base`), which no Swift type can make `Sendable`; `holds` is a
// `LockedValue`, the rest is immutable. The bytes are safe to share by this protocol:
// - One writer, at the front only. The sink that took the buffer (`EntrySink`, on its transfer's
//   callback thread, one callback at a time) copies each arrival into the part no one else has a
//   view of yet (`write(_:at:)` at its `batchUsed`, which only grows), then publishes it: the
//   views of those bytes (`PendingBytes.Chunk`, a `Waiter`'s `ChunkBytes`) are made under the
//   entry's shard lock, after the copy, so a thread that finds a view (under that lock, or from
//   a job submitted after it) sees the bytes written. Published bytes are never written again.
// - Once the sink lets go of the buffer (`writerDone` of its batch hold) nobody writes to it.
// - Readers (the writer lane, waiting reads, leases, FUSE, the proxy) read only through views,
//   and only the bytes of their view, all published.
// - The memory goes back to the pool in `deinit`, when no reference, and so no view, is left;
//   the pool hands it to its next sink only then.
final class ChunkStorage: ChunkMemory, @unchecked Sendable {
    private let base: UnsafeMutableRawPointer
    let capacity: Int
    private let pool: ChunkPool
    private let memory: MemoryBudget
    private let transfer: Int
    private struct Holds {
        /// The sink's batch (1 at first), plus one per chunk queued for the writer.
        var writer = 1
        var readers = 0
    }
    private let holds = LockedValue(Holds())

    /// A buffer whose capacity `transfer` has reserved in `memory`'s queued share.
    init(base: UnsafeMutableRawPointer, capacity: Int, pool: ChunkPool, memory: MemoryBudget, transfer: Int) {
        self.base = base
        self.capacity = capacity
        self.pool = pool
        self.memory = memory
        self.transfer = transfer
    }

    deinit {
        pool.give(base, capacity: capacity)
        // Every hold is given back before the last reference goes, but a writer's hold dropped
        // without its job (an engine stopped mid-transfer) must not keep the share.
        let writer = holds.withLock { $0.writer }
        if writer > 0 { memory.release(Int64(capacity), transfer: transfer) }
    }

    /// Copies an arrival in at `offset`, a part of the buffer not yet published. The sink that
    /// took the buffer only, before it makes views of those bytes (see `@unchecked` above).
    @inline(__always)
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
        precondition(offset >= 0 && offset + bytes.count <= capacity, "an arrival past its chunk")
        if let from = bytes.baseAddress { (base + offset).copyMemory(from: from, byteCount: bytes.count) }
    }

    /// Bytes `offset ..< offset + count`, published already: valid while this storage lives.
    @inline(__always)
    package func bytes(at offset: Int, count: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + offset, count: count)
    }

    /// A chunk of it was queued for the writer.
    func holdForWriter() { holds.withLock { $0.writer += 1 } }

    /// The writer is done with a chunk (or the sink with its batch): the last gives the queued
    /// share back, whoever else still holds the memory.
    package func writerDone() {
        let last: Bool = holds.withLock { h in
            h.writer -= 1
            return h.writer == 0
        }
        if last { memory.release(Int64(capacity), transfer: transfer) }
    }

    /// A read holds it: the first takes its capacity from the retained share (past the cap,
    /// `force`). False (nothing held) when the share has no room.
    func retain(force: Bool) -> Bool {
        holds.withLock { h in
            if h.readers == 0, !memory.retain(Int64(capacity), force: force) { return false }
            h.readers += 1
            return true
        }
    }

    func unretain() {
        holds.withLock { h in
            h.readers -= 1
            if h.readers == 0 { memory.unretain(Int64(capacity)) }
        }
    }
}

extension ChunkStorage {
    /// A part of it queued for the writer (`PendingBytes`): held for the writer (the queued
    /// share) from now until the chunk's `writerDone`.
    func pendingChunk(range: Range<Int64>, offset: Int) -> PendingBytes.Chunk {
        holdForWriter()
        return PendingBytes.Chunk(range: range, storage: self, offset: offset)
    }
}

extension PendingBytes.Chunk {
    /// Its memory as the engine made it (every chunk is made by `ChunkStorage.pendingChunk`).
    var chunkStorage: ChunkStorage { storage as! ChunkStorage }
}

extension PendingBytes.View {
    /// The bytes as a lease piece: the same memory, held for one reply (retained past the cap:
    /// the answer is built already, and it lives for one reply).
    func retained() -> ChunkBytes {
        ChunkBytes(ChunkRetention(chunk.chunkStorage, force: true)!, offset: storageOffset, count: Int(range.length))
    }
}

/// One read's hold on a chunk: counted in the retained share until it is dropped.
final class ChunkRetention: Sendable {
    let storage: ChunkStorage

    init?(_ storage: ChunkStorage, force: Bool) {
        guard storage.retain(force: force) else { return nil }
        self.storage = storage
    }

    deinit { storage.unretain() }
}

/// Bytes of a pooled chunk that a read holds: no copy of them was made. A `ReadLease` piece;
/// the memory stays valid (and counted) while the value or a copy of it lives.
public struct ChunkBytes: Sendable {
    let retention: ChunkRetention
    let offset: Int
    public let count: Int

    /// Valid while this value (or the lease holding it) lives.
    public var bytes: UnsafeRawBufferPointer {
        retention.storage.bytes(at: offset, count: count)
    }

    init(_ retention: ChunkRetention, offset: Int, count: Int) {
        self.retention = retention
        self.offset = offset
        self.count = count
    }

    /// Bytes `lo ..< hi` of these (no copy, the same hold).
    func slice(_ lo: Int, _ hi: Int) -> ChunkBytes { ChunkBytes(retention, offset: offset + lo, count: hi - lo) }
}

/// Free chunk buffers by size class. Thread-safe.
final class ChunkPool: Sendable {
    static let classes = [16 << 10, 32 << 10, 64 << 10, 128 << 10]
    /// Free buffers, as addresses (a buffer in the pool belongs to nobody).
    private struct Free {
        var lists: [Int: [UInt]] = [:]
        var bytes = 0
    }
    private let free = LockedValue(Free())
    /// Most bytes of free buffers kept for reuse.
    let keep: Int

    init(keep: Int) { self.keep = keep }

    deinit {
        free.withLock { f in
            for list in f.lists.values { for p in list { UnsafeMutableRawPointer(bitPattern: p)?.deallocate() } }
        }
    }

    /// The capacity a chunk of `count` bytes takes: its size class, or exactly `count` above them.
    static func capacity(for count: Int) -> Int { classes.first { $0 >= count } ?? count }

    func take(capacity: Int) -> UnsafeMutableRawPointer {
        let kept: UInt? = free.withLock { f in
            guard let p = f.lists[capacity]?.popLast() else { return nil }
            f.bytes -= capacity
            return p
        }
        return kept.flatMap { UnsafeMutableRawPointer(bitPattern: $0) } ?? .allocate(byteCount: capacity, alignment: 16)
    }

    func give(_ p: UnsafeMutableRawPointer, capacity: Int) {
        let address = UInt(bitPattern: p)
        let kept: Bool = free.withLock { f in
            guard Self.classes.contains(capacity), f.bytes + capacity <= keep else { return false }
            f.lists[capacity, default: []].append(address)
            f.bytes += capacity
            return true
        }
        if !kept { p.deallocate() }
    }
}
