import CacheCore
import Glibc

/// The class of each process that opens files of the mount, remembered per process: a scan or
/// a `cat` of a folder opens thousands of files from one process, and reading its names from
/// /proc for each open (`ProcessName`: `comm`, then the executable's link) was a tenth of the
/// daemon's CPU per small file, and a fresh read of `/proc/PID/stat` per open still an eighth
/// (perf, docs/benchmarks.md, issue 51).
///
/// *What it owns.* A table from pid to the process it last saw there, its `comm` and its class,
/// and a descriptor of that process's `/proc/PID/comm` (`ProcessWatch`), kept open: such a
/// descriptor names the process, not its number, so once the process is gone (its pid free or
/// handed to another) a read through it fails, and while it lives a read gives its `comm` now.
/// An open then costs one read of a few bytes (no path walk in /proc, no `stat` line printed):
/// a pid that now belongs to another process is looked up again, and so is a process that ran
/// another program since (`exec`: a shell's child opening a file for a redirection, then
/// becoming `ffprobe`, changes its `comm`).
/// *Threads.* Any (the FUSE loop in practice); one leaf lock, held for the look-up and the read
/// through a kept descriptor (so no other thread closes it meanwhile: a read of the kernel's
/// memory, which waits on nothing), never while a new process is looked up or classified.
/// *Blocks on* nothing but those reads of /proc.
///
/// A process checked less than `trustFor` ago (1 ms) is not read again: a `cat` or a scan of a
/// folder of small cached files opens a file every few dozen microseconds, and the read was a
/// tenth of such an open's work on the FUSE loop (issue 51). Nothing is lost by it: no process
/// runs another program and opens a file again within a millisecond of its last open (`exec` of
/// a scanner alone takes longer), and the kernel does not give a pid to a new process that soon.
///
/// Bounded: at `capacity` processes the table starts over, closing every descriptor (a working
/// set that large is a fleet of one-shot processes, each of which pays its own look-up anyway).
final class ReaderClassMemo: Sendable {
    private struct Known {
        var watch: Int32
        var comm: String
        var readerClass: ReaderClass
        /// When its `comm` was last read (monotonic nanoseconds; 0: never trusted).
        var checkedAt: UInt64 = 0
    }

    private let table = LockedValue<[Int32: Known]>([:])
    private let source: ProcessWatching
    let capacity: Int

    let trustFor: UInt64
    static let defaultTrust: UInt64 = 1_000_000

    init(capacity: Int = 256, source: ProcessWatching = ProcessWatch(), trustFor: UInt64 = ReaderClassMemo.defaultTrust) {
        self.capacity = capacity
        self.source = source
        self.trustFor = trustFor
    }

    deinit {
        table.withLock { t in
            for known in t.values { source.close(known.watch) }
        }
    }

    /// The class of the process `pid` now, worked out by `classify` the first time, after the
    /// pid changed hands and after the process ran another program. A process gone before it
    /// could be watched is classified (as whatever `classify` makes of it) and not remembered.
    /// `now` (monotonic nanoseconds): a process checked less than `trustFor` before is not read
    /// again; nil reads it every time.
    func readerClass(pid: Int32, now: UInt64? = nil, classify: () -> ReaderClass) -> ReaderClass {
        enum Seen { case known(ReaderClass), ranAnother(watch: Int32, comm: String), unknown }
        let seen: Seen = table.withLock { t in
            guard let known = t[pid] else { return .unknown }
            if let now, known.checkedAt != 0, now &- known.checkedAt < trustFor { return .known(known.readerClass) }
            if let comm = source.comm(known.watch) {
                if comm == known.comm, let now { t[pid]?.checkedAt = now }
                return comm == known.comm ? .known(known.readerClass) : .ranAnother(watch: known.watch, comm: comm)
            }
            source.close(known.watch)   // gone: the pid is free or another process's
            t[pid] = nil
            return .unknown
        }
        switch seen {
        case let .known(c):
            return c
        case let .ranAnother(watch, comm):
            let c = classify()
            table.withLock { t in
                guard t[pid]?.watch == watch else { return }   // another thread's meanwhile
                t[pid]?.comm = comm
                t[pid]?.readerClass = c
                t[pid]?.checkedAt = now ?? 0
            }
            return c
        case .unknown:
            guard let watch = source.watch(pid: pid) else { return classify() }
            guard let comm = source.comm(watch) else {
                source.close(watch)
                return classify()
            }
            let c = classify()
            table.withLock { t in
                if let other = t[pid] { source.close(other.watch) }   // another thread's meanwhile
                else if t.count >= capacity {
                    for known in t.values { source.close(known.watch) }
                    t.removeAll(keepingCapacity: true)
                }
                t[pid] = Known(watch: watch, comm: comm, readerClass: c, checkedAt: now ?? 0)
            }
            return c
        }
    }

    /// Processes remembered now (tests).
    var count: Int { table.withLock { $0.count } }
}

/// What the memo needs to know a process again: a handle on it (nil: it is gone, or /proc may
/// not be read), its `comm` through that handle (nil once the process is gone), and closing it.
protocol ProcessWatching: Sendable {
    func watch(pid: Int32) -> Int32?
    func comm(_ watch: Int32) -> String?
    func close(_ watch: Int32)
}

/// `/proc/PID/comm` opened once per process and read again at offset 0 (a fresh `comm` each
/// time): the open file holds the process's `struct pid`, not its number, so a read after the
/// process was reaped fails with ESRCH, even if its number was given to a new process.
struct ProcessWatch: ProcessWatching {
    func watch(pid: Int32) -> Int32? {
        guard pid > 0 else { return nil }
        let fd = "/proc/\(pid)/comm".withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
        return fd >= 0 ? fd : nil
    }

    func comm(_ watch: Int32) -> String? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer -> String? in
            let n = pread(watch, buffer.baseAddress, buffer.count, 0)
            guard n > 0 else { return nil }
            let end = buffer[n - 1] == UInt8(ascii: "\n") ? n - 1 : n
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<end]), as: UTF8.self)
        }
    }

    func close(_ watch: Int32) { _ = Glibc.close(watch) }
}
