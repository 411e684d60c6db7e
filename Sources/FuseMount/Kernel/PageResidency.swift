import Atomics
import CacheCore
import CFuse3
import Glibc

/// Whether a read's bytes from data files are all in the page cache, so that the splice of its
/// reply copies from memory and cannot wait for the disk. The FUSE loop then sends the reply
/// itself: a warm reader's reply costs no hand-off to the disk lane and back, and the lane's
/// threads are left to the replies that do wait for the disk (and to `DataFileReadAhead`,
/// whose reads are what puts a sequential reader's next bytes in memory).
///
/// Asked with `cachestat(2)` (Linux 6.5), one call per piece of data file, a look-up in the
/// page cache's tree that reads nothing. On an older kernel it fails and every such reply goes
/// to the lane. A page can leave the cache between the look-up and the splice; the loop then
/// waits for that read, as it does for every splice of bytes not in memory.
enum PageResidency {
    static let pageSize = Int64(sysconf(Int32(_SC_PAGESIZE)))

    /// How many pages `count` bytes at `offset` touch.
    static func pages(offset: Int64, count: Int, pageSize: Int64 = pageSize) -> Int64 {
        guard count > 0 else { return 0 }
        let first = offset / pageSize
        let last = (offset + Int64(count) - 1) / pageSize
        return last - first + 1
    }

    /// True when every data-file piece of a read's answer is in the page cache.
    static func inMemory(_ pieces: [ReadLease.Piece], cachedPages: (Int32, Int64, Int) -> Int64 = cached) -> Bool {
        for piece in pieces {
            guard case let .file(fd, offset, count) = piece, count > 0 else { continue }
            if cachedPages(fd, offset, count) < pages(offset: offset, count: count) { return false }
        }
        return true
    }

    /// The kernel's count of cached pages of the range, or -1 when it cannot say.
    static func cached(_ fd: Int32, _ offset: Int64, _ count: Int) -> Int64 {
        guard !unavailable.load(ordering: .relaxed) else { return -1 }
        let n = cfuse3_cached_pages(fd, UInt64(offset), UInt64(count))
        if n == -Int64(ENOSYS) || n == -Int64(EPERM) {
            unavailable.store(true, ordering: .relaxed)   // a kernel before 6.5, or a seccomp filter
        }
        return max(-1, n)
    }

    /// `cachestat` failed as it always will here: not asked again, each hit goes to the lane.
    private static let unavailable = ManagedAtomic<Bool>(false)
}

/// Who sends a read's reply whose bytes are spliced from data files. A pure rule; the read's
/// completion asks it with what it knows where it runs.
enum SpliceSender: Equatable {
    /// Right where the read was answered: no hand-off, no thread of the lane.
    case inPlace
    /// A job of the disk lane, which may wait on the disk without holding up the loop.
    case lane

    /// Files open at most this many, the loop sends a hit whose pages are all in memory. Past
    /// that, the copies of several readers' replies run side by side on the lane's threads:
    /// eight warm readers sent by the one loop thread were 5-6% slower than before the loop sent
    /// any (docs/benchmarks.md), their copies at 2.5 GB/s on one core. A few players (and a
    /// proxy beside them) stay on the loop, which keeps the daemon's threads few where that
    /// matters most (docs/threads.md).
    static let filesSentOnLoop = 4

    /// - Parameters:
    ///   - onLoop: the completion runs on the FUSE loop (a hit, answered inside the request).
    ///   - filesOpen: files open when the read came.
    ///   - inMemory: whether all the reply's data-file pages are in the page cache; asked only
    ///     when the answer depends on it (a `cachestat` call per piece).
    ///   - onPool: whether it runs on a thread of the pool for blocking I/O (a read that waited
    ///     and was answered by a job, whose thread may wait on the disk: that is its job); asked
    ///     only off the loop.
    static func choose(onLoop: Bool, filesOpen: Int, inMemory: () -> Bool, onPool: () -> Bool) -> SpliceSender {
        if onLoop { return filesOpen <= filesSentOnLoop && inMemory() ? .inPlace : .lane }
        return onPool() ? .inPlace : .lane
    }
}

/// Marks the FUSE loop's thread, so that a read's completion can tell it runs there (a hit,
/// answered inside the request) from one that runs later on another thread.
enum LoopThread {
    private static let loop = ThreadMark()

    /// Called by the loop's thread before it serves requests, and with false when it ends.
    static func mark(_ on: Bool) { loop.mark(on ? UnsafeRawPointer(bitPattern: 1) : nil) }

    static var isCurrent: Bool { loop.current != nil }
}

/// Counts of the replies spliced from data files: sent where the read was answered (the loop,
/// a thread of the pool) or handed to the disk lane. Relaxed atomics: no lock on the read path.
final class SplicedReplies: Sendable {
    let sentInPlace = ManagedAtomic<Int>(0)
    let sentByLane = ManagedAtomic<Int>(0)
}
