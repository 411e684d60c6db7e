import CacheCore

/// The class of each process that opens files of the mount, remembered per process: a scan or
/// a `cat` of a folder opens thousands of files from one process, and reading its names from
/// /proc for each open (`ProcessName`: `comm`, then the executable's link) was a tenth of the
/// daemon's CPU per small file (perf, docs/benchmarks.md, issue 51).
///
/// *What it owns.* A table from pid to the process it last saw there and its class. A process is
/// named by its pid, its start time and its `comm` (`ProcessStat`: one read of `/proc/PID/stat`,
/// which holds both): a pid the kernel hands to a new process has another start time, and an
/// `exec` (a shell's child becoming `cat`) changes the `comm`, so neither is taken for the
/// process remembered. *Threads.* Any (the FUSE loop in practice); one leaf lock, held for a
/// dictionary look-up, never while /proc is read. *Blocks on* nothing but that read.
///
/// Bounded: at `capacity` processes the table starts over (a working set that large is a fleet
/// of one-shot processes, each of which pays its own look-up anyway).
final class ReaderClassMemo: Sendable {
    /// Who a pid was when its class was worked out.
    struct Identity: Equatable, Sendable {
        var startTime: UInt64
        var comm: String
    }

    private let table = LockedValue<[Int32: (identity: Identity, readerClass: ReaderClass)]>([:])
    let capacity: Int

    init(capacity: Int = 1024) { self.capacity = capacity }

    /// The class of the process `pid` that is `identity` now (nil: its /proc entry could not be
    /// read, it is gone), worked out by `classify` the first time and after the pid changed hands.
    func readerClass(pid: Int32, identity: Identity?, classify: () -> ReaderClass) -> ReaderClass {
        guard let identity else { return classify() }
        if let known = table.withLock({ $0[pid] }), known.identity == identity { return known.readerClass }
        let c = classify()
        table.withLock { t in
            if t.count >= capacity, t[pid] == nil { t.removeAll(keepingCapacity: true) }
            t[pid] = (identity, c)
        }
        return c
    }

    /// Processes remembered now (tests).
    var count: Int { table.withLock { $0.count } }
}
