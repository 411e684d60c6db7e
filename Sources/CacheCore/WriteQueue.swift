import Foundation

/// The writer of arriving bytes: slice writes, checksums and index records, off the fetch thread.
///
/// Design: a few lanes (threads), each with its own FIFO of jobs and its own condition, so a
/// submit wakes only the lane it feeds. Every job for one data file goes to the same lane (chosen
/// by the entry's cache key), so one file has one writer (two lanes writing one file contended
/// for its inode lock: `rwsem_spin_on_owner` in a cold read's profile), and a transfer's bytes are
/// written in the order they arrived and its extent's checksum grows in order; a lane takes all
/// its queued jobs at once. Memory is bounded by design: a transfer reserves a buffer's capacity
/// in the `MemoryBudget`'s queued share before it copies arrivals into it (`buffer`); a
/// reservation past the share is refused and the transfer pauses (the fetch thread goes on with
/// the others) until the lanes drained. Lanes block on the disk and on shard locks; the fetch
/// thread never blocks here.
final class WriteQueue: Sendable {
    /// One writer thread and its jobs. Fields guarded by `condition`.
    // @unchecked: every field is read and written with `condition` held (the lane thread waits on
    // it for jobs, `waitIdle` for an empty lane: a condition variable, which `LockedValue` has not).
    private final class Lane: @unchecked Sendable {
        let condition = NSCondition()
        var jobs: [@Sendable () -> Void] = []
        var busy = false
        var held = false
        var stopping = false
        var started = false
    }

    let memory: MemoryBudget
    /// Buffers for the chunks that wait here (see `ChunkStorage`).
    let pool: ChunkPool
    private let lanes: [Lane]
    private let exited = DispatchGroup()

    init(lanes: Int, memory: MemoryBudget) {
        self.memory = memory
        self.lanes = (0..<max(1, lanes)).map { _ in Lane() }
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

    /// Runs `job` on the lane of `file` (a key naming the data file: every job for one file
    /// runs on one lane), after the jobs queued there before it. The lane's thread starts with its
    /// first job (an engine that fails to open never starts one).
    func submit(file: Int, _ job: @escaping @Sendable () -> Void) {
        let lane = lanes[Int(UInt(bitPattern: file) % UInt(lanes.count))]
        lane.condition.lock()
        if !lane.started {
            lane.started = true
            exited.enter()
            let thread = Thread { [self] in
                BlockingIOPool.nameCurrentThread("writer")  // as `top -H` and `perf` show it
                run(lane)
            }
            thread.name = "httpcachefs-writer"
            thread.start()
        }
        lane.jobs.append(job)
        lane.condition.broadcast()   // the lane, and any `waitIdle` (a signal could wake only that)
        lane.condition.unlock()
    }

    /// Waits until every queued job has run (shutdown; tests).
    func waitIdle() {
        for lane in lanes {
            lane.condition.lock()
            while !lane.jobs.isEmpty || lane.busy { lane.condition.wait() }
            lane.condition.unlock()
        }
    }

    /// Tests: no job starts until `releaseWrites` (the bytes stay pending).
    func holdWrites() { eachLane { $0.held = true } }

    func releaseWrites() { eachLane { $0.held = false } }

    /// Runs what is queued, then ends the lanes.
    func stop() {
        eachLane { $0.held = false; $0.stopping = true }
        exited.wait()
    }

    private func eachLane(_ change: (Lane) -> Void) {
        for lane in lanes {
            lane.condition.lock()
            change(lane)
            lane.condition.broadcast()
            lane.condition.unlock()
        }
    }

    private func run(_ lane: Lane) {
        lane.condition.lock()
        while true {
            while (lane.jobs.isEmpty || lane.held) && !lane.stopping { lane.condition.wait() }
            if lane.jobs.isEmpty { break }
            // Each job is dropped as soon as it ran: the chunks it holds may go back to the pool.
            var jobs = lane.jobs.reversed() as [@Sendable () -> Void]
            lane.jobs = []
            lane.busy = true
            lane.condition.unlock()
            while let job = jobs.popLast() { job() }
            lane.condition.lock()
            lane.busy = false
            // Wakes `waitIdle` (the lane itself is not waiting now).
            if lane.jobs.isEmpty { lane.condition.broadcast() }
        }
        lane.condition.unlock()
        exited.leave()
    }
}
