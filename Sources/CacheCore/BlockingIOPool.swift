import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fixed set of threads for work that blocks on the disk, so the threads that take requests
/// (the FUSE loop, the curl loop, the event loops) never do.
///
/// Why not GCD: a concurrent queue grows a thread for every job that blocks (up to 64), so a slow
/// disk turns into a crowd of threads; here the number is fixed, and a job waits its turn. Why
/// not `NIOThreadPool`: `CacheCore` and `FuseMount` know no NIO.
///
/// Jobs run in the order they were submitted, up to `threads` at once; jobs submitted with the
/// same `key` run one at a time, in that order (see `submit(key:_:)`). A job must not wait for
/// another job of the same pool: with every thread waiting on a job queued behind them, nothing
/// runs again (docs/threads.md, "The one rule"). A job may *submit* jobs, and continue from their
/// completion; `isCurrentThread` lets blocking waits assert they are not on a pool thread.
/// `finish()` lets the queued jobs run and ends the threads; a job submitted after it runs on the
/// caller's thread, so whatever it holds (a lease, a descriptor) is still released.
public final class BlockingIOPool: Sendable {
    fileprivate typealias Job = (key: UInt64?, run: @Sendable () -> Void)
    /// The queue and the threads' count; idle threads wait on it for a job, `finish` for the
    /// threads to end.
    fileprivate struct State {
        var jobs: [Job] = []
        /// Keys with a job running, and the jobs of those keys that came up meanwhile, in order.
        var busy: Set<UInt64> = []
        var held: [UInt64: [@Sendable () -> Void]] = [:]
        var head = 0
        var finished = false
        var running = 0
        var started = false
    }
    private let state = ConditionLock(State())

    public let name: String
    public let threads: Int

    public init(name: String, threads: Int) {
        precondition(threads > 0, "a pool needs a thread")
        self.name = name
        self.threads = threads
    }

    /// The threads start with the first job: a pool that is never used costs none (`submit`
    /// counts them `running` when it calls this).
    private func startThreads() {
        for i in 0..<threads {
            let kernelName = Self.kernelName(name, i)
            let thread = Thread { [self] in
                Self.nameCurrentThread(kernelName)
                Thread.current.threadDictionary[Self.threadKey] = ObjectIdentifier(self).hashValue
                work()
            }
            thread.name = "\(name)-\(i)"
            thread.start()
        }
    }

    /// True on one of this pool's threads (a job of it is running here).
    public var isCurrentThread: Bool {
        Thread.current.threadDictionary[Self.threadKey] as? Int == ObjectIdentifier(self).hashValue
    }

    /// True on a thread of any `BlockingIOPool`: where `waitFor` and the other blocking waits
    /// must not run (what they wait for may be queued behind the waiting job).
    public static var onAPoolThread: Bool {
        Thread.current.threadDictionary[threadKey] != nil
    }

    private static let threadKey = "httpcachefs.BlockingIOPool"

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

    /// Queues `job`; runs it at once on this thread if the pool has finished.
    ///
    /// - Parameter key: jobs with the same key run one after another, in the order submitted,
    ///   while other keys' jobs use the other threads (the engine's checks of one start).
    public func submit(key: UInt64? = nil, _ job: @escaping @Sendable () -> Void) {
        enum Queued { case queued, first, finished }
        let queued: Queued = state.withLock { s in
            if s.finished { return .finished }
            s.jobs.append((key, job))
            guard !s.started else { return .queued }
            s.started = true
            s.running = threads   // under the lock, as `started`: `finish` waits for them
            return .first
        }
        switch queued {
        case .finished: job()
        case .queued: state.signal()
        case .first: startThreads()
        }
    }

    /// Runs what is queued, then ends the threads; returns once they have ended. From a job of
    /// this pool (an engine shut down by one of its own completions) it returns at once instead:
    /// the other threads still run what is queued and end, and the caller's thread ends with its job.
    public func finish() {
        state.withLock { $0.finished = true }
        state.broadcast()
        let mine = isCurrentThread ? 1 : 0
        state.wait(until: { $0.running <= mine })
    }

    /// Waits until the jobs submitted so far with `key` have run (tests: "the verifications
    /// asked for are done"). Never from a job of this pool.
    public func waitForJobs(key: UInt64) {
        precondition(!isCurrentThread, "a job of \(name) waited for another job of its pool")
        let done = DispatchSemaphore(value: 0)
        submit(key: key) { done.signal() }
        done.wait()
    }

    /// Jobs queued and not yet started (for tests and the status page).
    public var queued: Int {
        state.withLock { s in s.jobs.count - s.head + s.held.values.reduce(0) { $0 + $1.count } }
    }

    /// What a thread does next: run a job (and, with a key, the jobs of that key that come up
    /// while it runs), or end.
    fileprivate enum Turn {
        case run(@Sendable () -> Void, key: UInt64?)
        case end
    }

    private func work() {
        /// The key of the job this thread just ran: its next held job runs here, in order.
        var ran: UInt64?
        while true {
            let turn: Turn = state.waitFor { s in
                if let key = ran {
                    ran = nil
                    if let next = s.nextHeld(key) { return .run(next, key: key) }
                    s.busy.remove(key)
                }
                return s.take()
            }
            guard case let .run(job, key) = turn else { break }
            job()
            ran = key
        }
        state.broadcast()   // `finish`, waiting for `running` to come down
    }
}

extension BlockingIOPool.State {
    fileprivate static let ran: @Sendable () -> Void = {}

    /// The next job of `key` that waited for the one just run, if any.
    fileprivate mutating func nextHeld(_ key: UInt64) -> (@Sendable () -> Void)? {
        guard var list = held[key], !list.isEmpty else { return nil }
        let next = list.removeFirst()
        held[key] = list.isEmpty ? nil : list
        return next
    }

    /// The next job to run on a free thread, `.end` once finished with none left, or nil (wait).
    fileprivate mutating func take() -> BlockingIOPool.Turn? {
        while head < jobs.count {
            let job = jobs[head]
            // Its slot lets go of the closure at once: what a job captured (a lease, the chunks
            // it holds, counted in the memory budget) must not live on in the queue until the
            // next compaction.
            jobs[head] = (nil, Self.ran)
            head += 1
            if head > 64 && head * 2 > jobs.count {   // drop the slots run, now and then
                jobs.removeFirst(head)
                head = 0
            }
            guard let key = job.key else { return .run(job.run, key: nil) }
            if busy.contains(key) {
                held[key, default: []].append(job.run)  // its key's running job runs it next
                continue
            }
            busy.insert(key)
            return .run(job.run, key: key)
        }
        guard finished else { return nil }
        running -= 1
        return .end
    }
}
