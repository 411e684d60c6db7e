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
public final class BlockingIOPool: @unchecked Sendable {
    // @unchecked: `jobs`, `head`, `busy`, `held`, `finished`, `running` and `started` are only
    // touched with `condition` held (idle threads wait on it: a condition variable, which
    // `LockedValue` has not).
    private let condition = NSCondition()
    private typealias Job = (key: UInt64?, run: @Sendable () -> Void)
    private var jobs: [Job] = []
    /// Keys with a job running, and the jobs of those keys that came up meanwhile, in order.
    private var busy: Set<UInt64> = []
    private var held: [UInt64: [@Sendable () -> Void]] = [:]
    private var head = 0
    private var finished = false
    private var running = 0
    private var started = false

    public let name: String
    public let threads: Int
    private static let ran: @Sendable () -> Void = {}

    public init(name: String, threads: Int) {
        precondition(threads > 0, "a pool needs a thread")
        self.name = name
        self.threads = threads
    }

    /// The threads start with the first job: a pool that is never used costs none.
    private func startThreads() {
        started = true
        running = threads
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
        condition.lock()
        if finished {
            condition.unlock()
            job()
            return
        }
        if !started { startThreads() }
        jobs.append((key, job))
        condition.signal()
        condition.unlock()
    }

    /// Runs what is queued, then ends the threads; returns once they have ended. From a job of
    /// this pool (an engine shut down by one of its own completions) it returns at once instead:
    /// the other threads still run what is queued and end, and the caller's thread ends with its job.
    public func finish() {
        condition.lock()
        finished = true
        condition.broadcast()
        let mine = isCurrentThread ? 1 : 0
        while running > mine { condition.wait() }
        condition.unlock()
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
        condition.lock()
        defer { condition.unlock() }
        return jobs.count - head + held.values.reduce(0) { $0 + $1.count }
    }

    private func work() {
        condition.lock()
        while true {
            if head < jobs.count {
                let job = jobs[head]
                // Its slot lets go of the closure at once: what a job captured (a lease, the chunks
                // it holds, counted in the memory budget) must not live on in the queue until
                // the next compaction.
                jobs[head] = (nil, Self.ran)
                head += 1
                if head > 64 && head * 2 > jobs.count {   // drop the slots run, now and then
                    jobs.removeFirst(head)
                    head = 0
                }
                guard let key = job.key else {
                    condition.unlock()
                    job.run()
                    condition.lock()
                    continue
                }
                if busy.contains(key) {
                    held[key, default: []].append(job.run)  // its key's running job runs it next
                    continue
                }
                busy.insert(key)
                var next: (@Sendable () -> Void)? = job.run
                while let run = next {
                    condition.unlock()
                    run()
                    condition.lock()
                    next = held[key].flatMap { $0.isEmpty ? nil : $0.first }
                    if next != nil { held[key]!.removeFirst() }
                    if held[key]?.isEmpty == true { held[key] = nil }
                }
                busy.remove(key)
            } else if finished {
                running -= 1
                condition.broadcast()
                condition.unlock()
                return
            } else {
                condition.wait()
            }
        }
    }
}
