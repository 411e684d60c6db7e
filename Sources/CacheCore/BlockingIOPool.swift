import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A bounded set of threads for work that blocks on the disk, so the threads that take requests
/// (the FUSE loop, the curl loop, the event loops) never do.
///
/// Why not GCD: a concurrent queue grows a thread for every job that blocks (up to 64), so a slow
/// disk turns into a crowd of threads; here the number is bounded, and a job waits its turn. Why
/// not `NIOThreadPool`: `CacheCore` and `FuseMount` know no NIO, and it starts all its threads.
///
/// Lanes: the pool's jobs come in lanes, each with its own bound (`lane(_:threads:)`; the first
/// lane, `jobs`, has the bound the pool was made with). A lane runs at most its bound of jobs at
/// once, and the pool has at most the sum of the bounds in threads, so a lane's job always finds
/// a thread when its lane is under its bound, whatever the other lanes do: a FUSE reply that
/// splices from the disk never waits behind a check or an eviction round of the engine's lane,
/// and the engine's jobs never behind eight slow replies. Jobs run oldest first across the lanes
/// that have room.
///
/// Threads: started when a job comes that no idle thread can take (never more than the bound),
/// and a thread idle for `idleTime` ends, so an idle daemon holds none and a burst holds what it
/// needed. Any thread runs any lane's job. Idle threads wait each on its own semaphore, and a job
/// wakes the one that went idle last: the work of a quiet daemon (the sweeper's second) keeps one
/// thread, and the others end. A job that finds no idle thread starts one (up to the bound),
/// rather than wait for a thread to come back from its job: a FUSE reply must not wait behind
/// another's disk read.
///
/// Keyed serial lanes: jobs submitted to one lane with the same `key` run one at a time, in that
/// order (see `submit(key:lane:_:)`), while other keys' jobs of the lane use its other threads:
/// the writer lanes (`WriteQueue`: lane `writer`, 2, keyed by data file) are such lanes; the
/// index writer (`CacheIndex`: lane `index`) is serial by its bound of 1. At most one job of a
/// key is queued or running; the key's later jobs wait beside it (`held`), and the thread that
/// ran one runs the next while no other job of the lane waits, so a file's stream of write jobs
/// costs no wake-up per job; when others wait, it joins the lane's queue behind them, so two busy
/// files cannot keep a two-thread lane from a third. Keys of different lanes never meet.
///
/// A job must not wait for another job of the same lane: with every thread of it waiting on a job
/// queued behind them, nothing runs again (docs/threads.md, "The one rule"). It may wait for a
/// job of *another* lane, because a lane's bound is reserved in the pool's: while that lane runs
/// fewer than its bound, the pool has a thread for it, whatever every other lane's jobs wait on. A job may *submit*
/// jobs, and continue from their completion; `isCurrentThread` lets blocking waits assert they
/// are not on a pool thread. `finish()` lets the queued jobs run and ends the threads; a job
/// submitted after it runs on the caller's thread, so whatever it holds (a lease, a descriptor)
/// is still released.
public final class BlockingIOPool: Sendable {
    /// A lane of the pool: its jobs run at most its bound at once (see the type's note).
    public struct Lane: Sendable, Hashable {
        fileprivate let index: Int
    }

    /// The lane the pool was made with (`threads` at once): what `submit` without a lane uses.
    public static let jobs = Lane(index: 0)

    fileprivate typealias Job = (key: UInt64?, order: UInt64, run: @Sendable () -> Void)

    /// A key of one lane: keys of different lanes are different keys.
    fileprivate struct LaneKey: Hashable {
        var lane: Int
        var key: UInt64
    }

    /// One lane's queue and bound.
    fileprivate struct LaneState {
        let name: String
        let bound: Int
        var jobs: [Job] = []
        var head = 0
        var running = 0
        /// The most of its jobs that ran at once (`busiestLanes`).
        var mostRunning = 0
        /// Jobs of its keys waiting behind a job of the same key (in `State.held`).
        var waitingOnKeys = 0
        /// Tests: its jobs do not start (`hold(_:)`).
        var held = false
        var queued: Int { jobs.count - head }
        /// Nothing of the lane is queued, waiting on a key or running.
        var drained: Bool { queued == 0 && waitingOnKeys == 0 && running == 0 }
        /// Jobs a thread may take now.
        var room: Int { held ? 0 : Swift.max(0, Swift.min(queued, bound - running)) }
    }

    /// The lanes and the threads' count; idle threads wait on it for a job, `finish` for the
    /// threads to end.
    fileprivate struct State {
        var lanes: [LaneState]
        /// Keys with a job queued or running, and the jobs of those keys that came up meanwhile,
        /// in order.
        var busy: Set<LaneKey> = []
        var held: [LaneKey: [@Sendable () -> Void]] = [:]
        /// Callers of `waitUntilDrained`: a job's end wakes them.
        var drainWaiters = 0
        var nextOrder: UInt64 = 0
        var finished = false
        /// Threads started and not ended.
        var threads = 0
        /// Idle threads waiting for a job, the last to go idle last: a job wakes that one.
        var waiting: [(number: Int, wake: DispatchSemaphore)] = []
        /// Threads woken or started that have not yet looked for a job: each takes one, so a
        /// job queued meanwhile starts no thread of its own while one is coming for it.
        var coming = 0
        /// The numbers in the names of the threads alive (`io-0`, `io-1`…): a new thread takes the
        /// lowest free one, so the names stay as few as the threads.
        var numbers: Set<Int> = []
        var bound: Int { lanes.reduce(0) { $0 + $1.bound } }
    }
    private let state: ConditionLock<State>

    public let name: String
    /// The bound of the first lane (`jobs`).
    public let threads: Int
    /// How long a thread waits for a job before it ends.
    let idleTime: Double
    /// Its jobs may wait for other pools' jobs (see `init`).
    let waits: Bool

    /// - Parameter waits: the pool's jobs may wait for other pools' jobs (the command line's
    ///   pool, whose jobs wait for the engine): its threads are not where `onAPoolThread` forbids
    ///   blocking waits.
    public init(name: String, threads: Int, idleTime: Double = 30, waits: Bool = false) {
        precondition(threads > 0, "a pool needs a thread")
        self.name = name
        self.threads = threads
        self.idleTime = idleTime
        self.waits = waits
        state = ConditionLock(State(lanes: [LaneState(name: name, bound: threads)]))
    }

    /// The lane called `name`, made with a bound of `threads` the first time it is asked for
    /// (the pool may then have that many threads more). Its jobs run beside the other lanes'.
    public func lane(_ name: String, threads: Int) -> Lane {
        precondition(threads > 0, "a lane needs a thread")
        return state.withLock { s in
            if let i = s.lanes.firstIndex(where: { $0.name == name }) { return Lane(index: i) }
            s.lanes.append(LaneState(name: name, bound: threads))
            return Lane(index: s.lanes.count - 1)
        }
    }

    /// Each lane's name and the most of its jobs that ran at once since the pool started: what
    /// made the pool's threads (the daemon logs it at debug level when it stops).
    public var busiestLanes: [(lane: String, mostRunning: Int)] {
        state.withLock { $0.lanes.map { ($0.name, $0.mostRunning) } }
    }

    /// Threads alive now (tests, docs/threads.md's figures).
    public var threadCount: Int { state.withLock { $0.threads } }

    private func startThread(number: Int) {
        let kernelName = Self.kernelName(name, number)
        let thread = Thread { [self] in
            Self.nameCurrentThread(kernelName)
            Self.poolOfThread.mark(Unmanaged.passUnretained(self).toOpaque())   // the thread holds `self`
            work(number: number)
        }
        thread.name = "\(name)-\(number)"
        thread.start()
    }

    /// True on one of this pool's threads (a job of it is running here).
    public var isCurrentThread: Bool {
        Self.poolOfThread.current == Unmanaged.passUnretained(self).toOpaque()
    }

    /// True on a thread of any `BlockingIOPool`: where `waitFor` and the other blocking waits
    /// must not run (what they wait for may be queued behind the waiting job).
    /// (A pool made with `waits`, the command line's, does not count.)
    public static var onAPoolThread: Bool {
        guard let pool = poolOfThread.current else { return false }
        return !Unmanaged<BlockingIOPool>.fromOpaque(pool)._withUnsafeGuaranteedRef { $0.waits }   // no retain
    }

    /// The pool each of its threads runs for.
    private static let poolOfThread = ThreadMark()

    /// Gives the calling thread `name` (at most 15 bytes) where the kernel shows it. Foundation's
    /// `Thread.name` does not reach the kernel here, and Glibc's `pthread_setname_np` is not
    /// visible to Swift; /proc/thread-self/comm is what both end up writing. Best effort.
    public static func nameCurrentThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = name.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }

    /// The name `top`, `perf` and /proc show for thread `index`. The kernel keeps 15 bytes and
    /// refuses a longer name outright (the thread then shows its creator's name, a GCD queue's,
    /// which made profiles say the FUSE replies ran on GCD): `httpcachefs-` is dropped, and what
    /// is still too long keeps its end, where the index is.
    static func kernelName(_ name: String, _ index: Int) -> String {
        var short = name.hasPrefix("httpcachefs-") ? String(name.dropFirst("httpcachefs-".count)) : name
        short += "-\(index)"
        while short.utf8.count > 15 { short.removeFirst() }
        return short
    }

    /// Queues `job` on `lane`; runs it at once on this thread if the pool has finished.
    ///
    /// - Parameter key: jobs with the same key run one after another, in the order submitted,
    ///   while other keys' jobs use the other threads (the engine's checks of one start).
    ///   Its later jobs wait beside the one queued or running, and the thread that runs it runs
    ///   them: no thread is woken for them.
    public func submit(key: UInt64? = nil, lane: Lane = BlockingIOPool.jobs, _ job: @escaping @Sendable () -> Void) {
        enum Queued { case queued, wake(DispatchSemaphore), start(Int), finished }
        let queued: Queued = state.withLock { s in
            if s.finished { return .finished }
            if let key {
                let k = LaneKey(lane: lane.index, key: key)
                guard s.busy.insert(k).inserted else {
                    s.held[k, default: []].append(job)   // after its key's job, on that thread
                    s.lanes[lane.index].waitingOnKeys += 1
                    return .queued
                }
            }
            s.lanes[lane.index].jobs.append((key, s.nextOrder, job))
            s.nextOrder &+= 1
            switch ThreadDemand.forJob(laneHasRoom: s.lanes[lane.index].room > 0, runnable: s.runnable, coming: s.coming,
                                       idle: s.waiting.count, threads: s.threads, bound: s.bound) {
            case .none:
                return .queued
            case .wakeIdle:
                s.coming += 1
                return .wake(s.waiting.popLast()!.wake)
            case .start:
                let number = (0...).first { !s.numbers.contains($0) }!
                s.numbers.insert(number)
                s.threads += 1   // under the lock: `finish` waits for it
                s.coming += 1
                return .start(number)
            }
        }
        switch queued {
        case .finished: job()
        case .queued: break
        case let .wake(semaphore): semaphore.signal()
        case let .start(number): startThread(number: number)
        }
    }

    /// Runs what is queued, then ends the threads; returns once they have ended. From a job of
    /// this pool (an engine shut down by one of its own completions) it returns at once instead:
    /// the other threads still run what is queued and end, and the caller's thread ends with its job.
    public func finish() {
        let idle = state.withLock { s in
            s.finished = true
            s.coming += s.waiting.count
            defer { s.waiting = [] }
            return s.waiting.map(\.wake)
        }
        for wake in idle { wake.signal() }   // they run what is left, then end
        let mine = isCurrentThread ? 1 : 0
        state.wait(until: { $0.threads <= mine })
    }

    /// Waits until the jobs submitted so far with `key` have run (tests: "the verifications
    /// asked for are done"). Never from a job of this pool.
    public func waitForJobs(key: UInt64) {
        precondition(!isCurrentThread, "a job of \(name) waited for another job of its pool")
        let done = DispatchSemaphore(value: 0)
        submit(key: key) { done.signal() }
        done.wait()
    }

    /// Waits until `lane` has nothing queued, waiting on a key or running (shutdown: the writer
    /// lanes' last jobs; tests). From a job of another lane it may (that lane's threads are
    /// reserved); never from a job of `lane`.
    public func waitUntilDrained(_ lane: Lane) {
        _ = waitUntilDrained(lane, timeout: nil)
    }

    /// The same, for at most `timeout` seconds (tests: a bound on a hang); whether it drained.
    public func waitUntilDrained(_ lane: Lane, timeout: Double?) -> Bool {
        state.withLock { $0.drainWaiters += 1 }
        defer { state.withLock { $0.drainWaiters -= 1 } }
        let drained = { (s: borrowing State) in s.lanes[lane.index].drained || (s.finished && s.threads == 0) }
        guard let timeout else {
            state.wait(until: drained)
            return true
        }
        return state.wait(until: drained, timeout: timeout)
    }

    /// Tests: while held, no job of `lane` starts (they stay queued), so a test can replay what
    /// happens while, say, the writer is behind. A job running goes on, and its key's next job
    /// waits in the queue.
    public func hold(_ lane: Lane, _ held: Bool) {
        let (wake, start): ([DispatchSemaphore], [Int]) = state.withLock { s in
            s.lanes[lane.index].held = held
            guard !held else { return ([], []) }
            var wake: [DispatchSemaphore] = [], start: [Int] = []
            var room = s.runnable - s.coming
            while room > 0, let idle = s.waiting.popLast() {
                wake.append(idle.wake)
                s.coming += 1
                room -= 1
            }
            while room > 0, s.threads < s.bound {   // threads for what waited, as `submit` would
                let number = (0...).first { !s.numbers.contains($0) }!
                s.numbers.insert(number)
                s.threads += 1
                s.coming += 1
                room -= 1
                start.append(number)
            }
            return (wake, start)
        }
        wake.forEach { $0.signal() }
        start.forEach { startThread(number: $0) }
    }

    /// Tests: waits until at most `count` threads are alive (idle ones end after `idleTime`), or
    /// `timeout` seconds, which bounds a hang; whether they are.
    func waitForThreads(atMost count: Int, timeout: Double) -> Bool {
        state.wait(until: { $0.threads <= count }, timeout: timeout)
    }

    /// Jobs queued and not yet started (for tests and the status page).
    public var queued: Int {
        state.withLock { s in s.lanes.reduce(0) { $0 + $1.queued } + s.held.values.reduce(0) { $0 + $1.count } }
    }

    /// What a thread does next: run a job of a lane (and, with a key, the jobs of that key that
    /// come up while it runs), or end.
    fileprivate enum Turn {
        case run(@Sendable () -> Void, key: UInt64?, lane: Int)
        case end
    }

    private func work(number: Int) {
        let wake = DispatchSemaphore(value: 0)
        /// The job this thread just ran: its lane's count comes down, and its key's next held
        /// job runs here, in order.
        var ran: (key: UInt64?, lane: Int)?
        /// Started or woken, and not yet counted out of `coming`.
        var arriving = true
        while true {
            let turn: Turn? = state.withLock { s in
                if arriving {
                    s.coming -= 1
                    arriving = false
                }
                if let last = ran {
                    ran = nil
                    s.lanes[last.lane].running -= 1
                    if s.drainWaiters > 0 { state.broadcast() }   // `waitUntilDrained`, once the lock is let go
                    if let key = last.key {
                        let k = LaneKey(lane: last.lane, key: key)
                        if let next = s.nextHeld(k) {
                            s.lanes[last.lane].waitingOnKeys -= 1
                            // Right here, with no wake-up, unless other jobs of the lane wait (they
                            // came first: two busy files must not keep a two-thread lane from a
                            // third) or the lane is held (its release starts it).
                            guard (s.lanes[last.lane].held || s.lanes[last.lane].queued > 0) && !s.finished else {
                                s.lanes[last.lane].running += 1
                                s.lanes[last.lane].mostRunning = Swift.max(s.lanes[last.lane].mostRunning, s.lanes[last.lane].running)
                                return .run(next, key: key, lane: last.lane)
                            }
                            // Into the lane's queue, in order: `take` below runs the oldest.
                            s.lanes[last.lane].jobs.append((key, s.nextOrder, next))
                            s.nextOrder &+= 1
                        } else {
                            s.busy.remove(k)
                        }
                    }
                }
                if let turn = s.take(number: number) { return turn }
                s.waiting.append((number, wake))
                return nil
            }
            if let turn {
                guard case let .run(job, key, lane) = turn else { break }
                job()
                ran = (key, lane)
                continue
            }
            guard wake.wait(timeout: .now() + idleTime) == .timedOut else {
                arriving = true
                continue
            }
            let ends: Bool = state.withLock { s in
                guard let i = s.waiting.firstIndex(where: { $0.number == number }) else { return false }
                s.waiting.remove(at: i)   // idle for `idleTime`: this thread ends
                s.end(number: number)
                return true
            }
            if ends { break }
            wake.wait()   // a job took it off the list as the time ran out: its signal is coming
            arriving = true
        }
        state.broadcast()   // `finish` and `waitForThreads`, waiting for `threads` to come down
    }
}

extension BlockingIOPool.State {
    fileprivate static let ran: @Sendable () -> Void = {}

    /// Jobs queued that a thread could start now: each lane's, up to its room.
    var runnable: Int {
        lanes.reduce(0) { $0 + $1.room }
    }

    /// The next job of `key` that waited for the one just run, if any.
    fileprivate mutating func nextHeld(_ key: BlockingIOPool.LaneKey) -> (@Sendable () -> Void)? {
        guard held[key]?.isEmpty == false, let next = held[key]?.removeFirst() else { return nil }   // in place: no copy of the list
        if held[key]?.isEmpty == true { held[key] = nil }
        return next
    }

    fileprivate mutating func end(number: Int) {
        threads -= 1
        numbers.remove(number)
    }

    /// The oldest job of the lanes with room, `.end` once finished with none left, or nil (wait).
    /// Once finished, the lanes' bounds no longer hold: what is left runs on every thread there is.
    fileprivate mutating func take(number: Int) -> BlockingIOPool.Turn? {
        var pick: Int?
        for i in lanes.indices where lanes[i].queued > 0 && (finished || lanes[i].room > 0) {
            if let p = pick, lanes[p].jobs[lanes[p].head].order < lanes[i].jobs[lanes[i].head].order { continue }
            pick = i
        }
        if let i = pick {
            // A keyed job in the queue is its key's only job queued or running (`submit`).
            let job = lanes[i].takeFirst()
            lanes[i].running += 1
            lanes[i].mostRunning = Swift.max(lanes[i].mostRunning, lanes[i].running)
            return .run(job.run, key: job.key, lane: i)
        }
        guard finished else { return nil }
        end(number: number)
        return .end
    }
}

extension BlockingIOPool.LaneState {
    /// The lane's first job. Its slot lets go of the closure at once: what a job captured (a
    /// lease, the chunks it holds, counted in the memory budget) must not live on in the queue
    /// until the next compaction.
    fileprivate mutating func takeFirst() -> BlockingIOPool.Job {
        let job = jobs[head]
        jobs[head] = (nil, 0, BlockingIOPool.State.ran)
        head += 1
        if head > 64 && head * 2 > jobs.count {   // drop the slots run, now and then
            jobs.removeFirst(head)
            head = 0
        }
        return job
    }
}

/// Which thread runs a job just queued on a `BlockingIOPool`: a pure rule (`ThreadDemandTests`).
enum ThreadDemand: Equatable {
    /// No thread is asked: one running, coming, or let go by its lane's bound takes it.
    case none
    /// The idle thread that went idle last.
    case wakeIdle
    /// A thread more.
    case start

    /// - Parameters:
    ///   - laneHasRoom: the job's lane runs fewer than its bound (and is not held); else a thread
    ///     of the lane takes it when its job ends (or the release wakes one).
    ///   - runnable: jobs queued that threads could start now, this one included.
    ///   - coming: threads woken or started that have not yet taken a job: each takes one, so a
    ///     burst of jobs queued while threads start (tens of microseconds each) starts no more
    ///     threads than it has jobs waiting.
    static func forJob(laneHasRoom: Bool, runnable: Int, coming: Int, idle: Int, threads: Int, bound: Int) -> ThreadDemand {
        guard laneHasRoom, runnable > coming else { return .none }
        if idle > 0 { return .wakeIdle }
        // No idle thread: a thread more, up to the bound. (Leaving the job to a thread coming
        // back from one saved threads but cost eight warm readers without passthrough about 5%
        // of their throughput: a spliced reply waited for another's disk read to end.)
        return threads < bound ? .start : .none
    }
}
