import Foundation

/// The writer of arriving bytes: slice writes, checksums and index records, off the fetch thread.
///
/// Design: a few lanes (threads), each with its own FIFO of jobs and its own condition, so a
/// submit wakes only the lane it feeds. Every job for one data file goes to the same lane (chosen
/// by the entry's cache key), so one file has one writer (two lanes writing one file contended
/// for its inode lock: `rwsem_spin_on_owner` in a cold read's profile), and a transfer's bytes are
/// written in the order they arrived and its extent's checksum grows in order; a lane takes all
/// its queued jobs at once. Memory is bounded by
/// design: a transfer reserves a buffer's capacity before it copies arrivals into it (`buffer`),
/// and a reservation that would take the transfer past `perTransfer` or everyone past `total` is
/// refused. The transfer
/// then pauses (the fetch thread goes on with the others) and its `onRoom` runs once the lanes
/// have drained the queue to half of `total` and its own part to half of `perTransfer`. Lanes
/// block on the disk and on shard locks; the fetch thread never blocks here.
final class WriteQueue: Sendable {
    /// Bytes that may wait for the disk, in all and per transfer (`CacheConfiguration`: 4 MiB
    /// and 1 MiB, a millisecond of writes here: a fast transfer runs a little ahead of the disk
    /// while 32 busy transfers keep the daemon within its memory target).
    struct Budget: Sendable, Equatable {
        var total: Int64
        var perTransfer: Int64
    }

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

    let budget: Budget
    /// Buffers for the chunks that wait here (see `ChunkStorage`).
    let pool: ChunkPool
    private let lanes: [Lane]
    private let exited = DispatchGroup()
    private struct Reservations {
        var reserved: Int64 = 0
        var reservedBy: [Int: Int64] = [:]
        /// Transfers refused a reservation, with what resumes them.
        var paused: [Int: @Sendable () -> Void] = [:]
        var peak: Int64 = 0
    }
    private let reservations = LockedValue(Reservations())

    init(lanes: Int, budget: Budget) {
        self.budget = budget
        self.lanes = (0..<max(1, lanes)).map { _ in Lane() }
        pool = ChunkPool(keep: Int(budget.total))
    }

    // MARK: Budget

    /// A pooled buffer of `capacity` bytes, reserved for `transfer`, or nil when the budget has no
    /// room for it (then `onRoom` runs once it has: see `reserve`).
    func buffer(capacity: Int, transfer: Int, onRoom: @escaping @Sendable () -> Void) -> ChunkStorage? {
        guard reserve(Int64(capacity), transfer: transfer, onRoom: onRoom) else { return nil }
        return ChunkStorage(base: pool.take(capacity: capacity), capacity: capacity, queue: self, transfer: transfer)
    }

    /// Takes `bytes` of the budget for `transfer`, or, when that would exceed it, takes nothing,
    /// remembers `onRoom` and returns false: the transfer pauses until `onRoom` runs.
    func reserve(_ bytes: Int64, transfer: Int, onRoom: @escaping @Sendable () -> Void) -> Bool {
        reservations.withLock { r in
            let mine = r.reservedBy[transfer] ?? 0
            // An empty queue takes any chunk, so a budget smaller than one chunk cannot stall.
            guard r.reserved == 0 || (r.reserved + bytes <= budget.total && mine + bytes <= budget.perTransfer) else {
                r.paused[transfer] = onRoom
                return false
            }
            r.reserved += bytes
            r.reservedBy[transfer] = mine + bytes
            if !r.paused.isEmpty { r.paused[transfer] = nil }   // it goes on (a source that cannot pause asked again)
            r.peak = max(r.peak, r.reserved)
            return true
        }
    }

    /// Gives back bytes reserved by `transfer` (written, or not queued after all). A paused
    /// transfer resumes once the queue is down to half the budget and its own part to half its
    /// share: resuming at the first byte of room would pause it again at the next chunk.
    func release(_ bytes: Int64, transfer: Int) {
        guard bytes > 0 else { return }
        let wake: [@Sendable () -> Void] = reservations.withLock { r in
            r.reserved -= bytes
            let left = (r.reservedBy[transfer] ?? 0) - bytes
            r.reservedBy[transfer] = left > 0 ? left : nil
            var wake: [@Sendable () -> Void] = []
            if !r.paused.isEmpty, r.reserved <= budget.total / 2 {
                for (t, resume) in r.paused where (r.reservedBy[t] ?? 0) <= budget.perTransfer / 2 {
                    r.paused[t] = nil
                    wake.append(resume)
                }
            }
            return wake
        }
        wake.forEach { $0() }
    }

    /// The transfer ended: it will not need resuming.
    func forget(transfer: Int) {
        reservations.withLock { $0.paused[transfer] = nil }
    }

    /// Bytes queued now, the most ever queued at once, and how many transfers are paused.
    var usage: (reserved: Int64, peak: Int64, paused: Int) {
        reservations.withLock { ($0.reserved, $0.peak, $0.paused.count) }
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
            let thread = Thread { [self] in run(lane) }
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
            // Each job is dropped as soon as it ran: the chunks it holds go back to the budget.
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
