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
    /// One writer thread and its jobs. The lane's thread waits on it for jobs, `waitIdle` for
    /// an empty lane.
    private struct Lane {
        var jobs: [@Sendable () -> Void] = []
        var busy = false
        var held = false
        var stopping = false
        var started = false
    }

    let memory: MemoryBudget
    /// Buffers for the chunks that wait here (see `ChunkStorage`).
    let pool: ChunkPool
    private let lanes: [ConditionLock<Lane>]
    private let exited = DispatchGroup()

    init(lanes: Int, memory: MemoryBudget) {
        self.memory = memory
        self.lanes = (0..<max(1, lanes)).map { _ in ConditionLock(Lane()) }
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
        let start: Bool = lane.withLock { l in
            l.jobs.append(job)
            guard !l.started else { return false }
            l.started = true
            exited.enter()   // under the lock, as `started`: `stop` waits for this thread
            return true
        }
        lane.broadcast()   // the lane, and any `waitIdle` (a signal could wake only that)
        if start {
            let thread = Thread { [self] in
                BlockingIOPool.nameCurrentThread("writer")  // as `top -H` and `perf` show it
                run(lane)
            }
            thread.name = "httpcachefs-writer"
            thread.start()
        }
    }

    /// Waits until every queued job has run (shutdown; tests).
    func waitIdle() {
        for lane in lanes { lane.wait(until: { $0.jobs.isEmpty && !$0.busy }) }
    }

    /// Tests: no job starts until `releaseWrites` (the bytes stay pending).
    func holdWrites() { eachLane { $0.held = true } }

    func releaseWrites() { eachLane { $0.held = false } }

    /// Runs what is queued, then ends the lanes.
    func stop() {
        eachLane { $0.held = false; $0.stopping = true }
        exited.wait()
    }

    private func eachLane(_ change: (inout Lane) -> Void) {
        for lane in lanes {
            lane.withLock { change(&$0) }
            lane.broadcast()
        }
    }

    private func run(_ lane: ConditionLock<Lane>) {
        while var jobs = take(lane) {
            // Each job is dropped as soon as it ran: the chunks it holds may go back to the pool.
            while let job = jobs.popLast() { job() }
            let idle: Bool = lane.withLock { l in
                l.busy = false
                return l.jobs.isEmpty
            }
            if idle { lane.broadcast() }   // wakes `waitIdle` (the lane itself is not waiting now)
        }
        exited.leave()
    }

    /// Every job queued on `lane`, last first (popped as they run), once there are some and the
    /// lane is not held; nil once it is stopping with none left. The lane is `busy` from then on.
    private func take(_ lane: ConditionLock<Lane>) -> [@Sendable () -> Void]? {
        lane.waitFor { l -> [@Sendable () -> Void]?? in
            guard (!l.jobs.isEmpty && !l.held) || l.stopping else { return nil }   // wait
            guard !l.jobs.isEmpty else { return .some(nil) }                        // end
            defer { l.jobs = [] }
            l.busy = true
            return .some(l.jobs.reversed())
        }
    }
}
