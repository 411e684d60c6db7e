import Foundation

/// The memory that reads waiting for bytes may hold, across the engine.
///
/// A waiting read copies the bytes that arrive for it into its own buffer, so it is answered from
/// memory, not read back. Without a bound, that memory grows with the reads in flight: the kernel
/// keeps up to 64 FUSE reads of a MiB each outstanding, and each proxy response one more. A read
/// that finds the budget spent copies nothing; when its bytes are all there it takes those still
/// queued for the writer from the queue (memory too) and the rest from the data file, which the
/// writer just wrote (the page cache, sent by splice). Bytes the writer could not store (a full
/// disk) are handed to such reads past the budget, since nothing else holds them.
///
/// Fill and release run under shard locks of any shard, and on completion threads: the count
/// has its own lock, held for an addition.
final class AssemblyBudget: Sendable {
    let limit: Int
    private let used = LockedValue(0)

    init(limit: Int) { self.limit = limit }

    /// Takes `bytes` if they fit (or unconditionally, `force`); false leaves nothing taken.
    func take(_ bytes: Int, force: Bool = false) -> Bool {
        used.withLock { used in
            guard force || used + bytes <= limit else { return false }
            used += bytes
            return true
        }
    }

    func give(_ bytes: Int) { used.withLock { $0 -= bytes } }

    var inUse: Int { used.withLock { $0 } }
}
