import Foundation

/// The writer of arriving bytes: slice writes, checksums and index records, off the fetch thread.
///
/// Design: a keyed serial lane of the engine's `BlockingIOPool` (lane `writer`, 2 threads at
/// most). Every job for one data file has the file's key, so one file has one writer at a time
/// (two writing one file contended for its inode lock: `rwsem_spin_on_owner` in a cold read's
/// profile), a transfer's bytes are written in the order they arrived and its extent's checksum
/// grows in order; two files are written at once. The thread that ran a file's job runs the
/// file's next one, with no wake-up between them (the pool's keys). Memory is bounded by design:
/// a transfer reserves a buffer's capacity in the `MemoryBudget`'s queued share before it copies
/// arrivals into it (`buffer`); a reservation past the share is refused and the transfer pauses
/// (the fetch thread goes on with the others) until the lane drained. Jobs block on the disk, on
/// shard locks, the eviction lock and the index writer (`CacheIndex`'s lock, held only by a
/// thread running SQLite, never by one waiting for a job: see docs/threads.md); the fetch thread
/// never blocks here.
final class WriteQueue: Sendable {
    /// How many files are written at once: the lane's bound.
    static let lanes = 2

    let memory: MemoryBudget
    /// Buffers for the chunks that wait here (see `ChunkStorage`).
    let pool: ChunkPool
    private let jobs: BlockingIOPool
    private let lane: BlockingIOPool.Lane

    init(jobs: BlockingIOPool, memory: MemoryBudget) {
        self.memory = memory
        self.jobs = jobs
        lane = jobs.lane("writer", threads: Self.lanes)
        pool = ChunkPool(keep: Int(memory.limits.queued))
    }

    /// A pooled buffer of `capacity` bytes, reserved for `transfer` in the queued share, or nil
    /// when the share has no room for it (then `onRoom` runs once it has: see
    /// `MemoryBudget.reserve`).
    func buffer(capacity: Int, transfer: Int, onRoom: @escaping @Sendable () -> Void) -> ChunkStorage? {
        guard memory.reserve(Int64(capacity), transfer: transfer, onRoom: onRoom) else { return nil }
        return ChunkStorage(base: pool.take(capacity: capacity), capacity: capacity, pool: pool, memory: memory, transfer: transfer)
    }

    // MARK: Jobs

    /// Runs `job` on the writer lane, keyed by `file` (a key naming the data file: every job for
    /// one file runs after the jobs submitted for it before, never beside them).
    func submit(file: Int, _ job: @escaping @Sendable () -> Void) {
        jobs.submit(key: UInt64(bitPattern: Int64(file)), lane: lane, job)
    }

    /// Waits until every queued job has run (shutdown; tests).
    func waitIdle() {
        jobs.waitUntilDrained(lane)
    }

    /// Tests: no job starts until `releaseWrites` (the bytes stay pending).
    func holdWrites() { jobs.hold(lane, true) }

    func releaseWrites() { jobs.hold(lane, false) }

    /// Runs what is queued (the pool's threads run it), and waits for it.
    func stop() {
        releaseWrites()
        waitIdle()
    }
}
