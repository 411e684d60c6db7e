import Foundation

/// The writer of arriving bytes: slice writes, checksums and index records, off the fetch thread.
///
/// Design: a few lanes (threads), each with a FIFO of jobs. Every job of one transfer goes to the
/// same lane (chosen by its fetch id), so a transfer's bytes are written in the order they arrived
/// and its extent's checksum grows in order. Memory is bounded by design: a transfer reserves a
/// chunk's bytes before it queues the chunk, and a reservation that would take the transfer past
/// `perTransfer` or everyone past `total` is refused. The transfer then pauses (the fetch thread
/// goes on with the others) and its `onRoom` runs once the lanes have drained the queue to half
/// of `total`. Lanes block on the disk and on shard locks; the fetch thread never blocks here.
final class WriteQueue: @unchecked Sendable {
    /// Bytes that may wait for the disk, in all and per transfer (`CacheConfiguration`: 8 MiB
    /// and 2 MiB, so a fast transfer runs a little ahead of the disk while 32 busy transfers
    /// stay within the daemon's memory target).
    struct Budget: Sendable, Equatable {
        var total: Int64
        var perTransfer: Int64
    }

    let budget: Budget
    private let lock = NSCondition()
    private var queues: [[() -> Void]]   // guarded by lock, one per lane
    private var busy: [Bool]   // guarded by lock
    private var reserved: Int64 = 0   // guarded by lock
    private var reservedBy: [Int: Int64] = [:]   // guarded by lock
    /// Transfers refused a reservation, with what resumes them.
    private var paused: [Int: @Sendable () -> Void] = [:]   // guarded by lock
    private var held = false   // guarded by lock
    private var stopping = false   // guarded by lock
    private var peak: Int64 = 0   // guarded by lock
    private let exited = DispatchGroup()

    private var started = false   // guarded by lock

    init(lanes: Int, budget: Budget) {
        self.budget = budget
        queues = Array(repeating: [], count: max(1, lanes))
        busy = Array(repeating: false, count: max(1, lanes))
    }

    /// The lanes start with the first job (an engine that fails to open never starts them).
    private func startLanes() {
        started = true
        for lane in 0..<queues.count {
            exited.enter()
            let thread = Thread { [self] in run(lane) }
            thread.name = "httpcachefs-writer-\(lane)"
            thread.start()
        }
    }

    // MARK: Budget

    /// Takes `bytes` of the budget for `transfer`, or, when that would exceed it, takes nothing,
    /// remembers `onRoom` and returns false: the transfer pauses until `onRoom` runs.
    func reserve(_ bytes: Int64, transfer: Int, onRoom: @escaping @Sendable () -> Void) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let mine = reservedBy[transfer] ?? 0
        // An empty queue takes any chunk, so a budget smaller than one chunk cannot stall.
        guard reserved == 0 || (reserved + bytes <= budget.total && mine + bytes <= budget.perTransfer) else {
            paused[transfer] = onRoom
            return false
        }
        reserved += bytes
        reservedBy[transfer] = mine + bytes
        paused[transfer] = nil   // it goes on (a source that cannot pause asked again)
        peak = max(peak, reserved)
        return true
    }

    /// Gives back bytes reserved by `transfer` (written, or not queued after all). A paused
    /// transfer resumes once the queue is down to half the budget and its own part to half its
    /// share: resuming at the first byte of room would pause it again at the next chunk.
    func release(_ bytes: Int64, transfer: Int) {
        guard bytes > 0 else { return }
        lock.lock()
        reserved -= bytes
        let left = (reservedBy[transfer] ?? 0) - bytes
        reservedBy[transfer] = left > 0 ? left : nil
        var wake: [@Sendable () -> Void] = []
        if !paused.isEmpty, reserved <= budget.total / 2 {
            for (t, resume) in paused where (reservedBy[t] ?? 0) <= budget.perTransfer / 2 {
                paused[t] = nil
                wake.append(resume)
            }
        }
        lock.unlock()
        wake.forEach { $0() }
    }

    /// The transfer ended: it will not need resuming.
    func forget(transfer: Int) {
        lock.lock()
        paused[transfer] = nil
        lock.unlock()
    }

    /// Bytes queued now, the most ever queued at once, and how many transfers are paused.
    var usage: (reserved: Int64, peak: Int64, paused: Int) {
        lock.lock(); defer { lock.unlock() }
        return (reserved, peak, paused.count)
    }

    // MARK: Jobs

    /// Runs `job` on the lane of `transfer`, after the jobs queued there before it.
    func submit(transfer: Int, _ job: @escaping () -> Void) {
        lock.lock()
        if !started { startLanes() }
        queues[transfer % queues.count].append(job)
        lock.broadcast()
        lock.unlock()
    }

    /// Waits until every queued job has run (shutdown; tests).
    func waitIdle() {
        lock.lock()
        while queues.contains(where: { !$0.isEmpty }) || busy.contains(true) { lock.wait() }
        lock.unlock()
    }

    /// Tests: no job starts until `releaseWrites` (the bytes stay pending).
    func holdWrites() {
        lock.lock(); held = true; lock.unlock()
    }

    func releaseWrites() {
        lock.lock(); held = false; lock.broadcast(); lock.unlock()
    }

    /// Runs what is queued, then ends the lanes.
    func stop() {
        lock.lock()
        stopping = true
        held = false
        lock.broadcast()
        lock.unlock()
        exited.wait()
    }

    private func run(_ lane: Int) {
        while true {
            lock.lock()
            while (queues[lane].isEmpty || held) && !stopping { lock.wait() }
            if queues[lane].isEmpty {
                lock.unlock()
                break
            }
            let jobs = queues[lane]
            queues[lane] = []
            busy[lane] = true
            lock.unlock()
            for job in jobs { job() }
            lock.lock()
            busy[lane] = false
            lock.broadcast()
            lock.unlock()
        }
        exited.leave()
    }
}
