import Foundation

/// The memory of one batch of arrivals (`EntrySink`), from the moment libcurl hands the first
/// over until the writer has written them and no read needs them any more: then its buffer goes
/// back to the pool and its room in the write budget is given back (`deinit`).
///
/// Why a pool: buffers are allocated on the fetch thread and freed on a writer lane, thousands
/// per GiB; through malloc that churn left the daemon's heap fragmented, so it kept about 25 MiB
/// more than the budget allowed. Buffers come in four sizes (16 to 128 KiB, sized for a
/// transfer's turns; a larger arrival from a source other than libcurl gets its own size,
/// unpooled), the budget counts their capacity, and the pool keeps at most the budget's worth of
/// free buffers: live plus kept memory stays within twice the budget, whatever the pattern.
// @unchecked: `base` is raw memory. The fetch thread writes the arrivals into it before the
// storage is shared; from then on (write queue, pending views, waiting reads) it is only read,
// and it goes back to the pool in `deinit`, when nobody holds it any more.
final class ChunkStorage: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    private let queue: WriteQueue
    private let transfer: Int

    init(base: UnsafeMutableRawPointer, capacity: Int, queue: WriteQueue, transfer: Int) {
        self.base = base
        self.capacity = capacity
        self.queue = queue
        self.transfer = transfer
    }

    deinit {
        queue.pool.give(base, capacity: capacity)
        queue.release(Int64(capacity), transfer: transfer)
    }
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
