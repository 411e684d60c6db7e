import CoreTypes

/// Who hears that a remote file changed (`CacheEngine.onRemoteChange`: the metrics' count, a
/// mount's `--on-change` command).
///
/// Threads: `add` from any; `notify` under a shard lock, so the observers run later, as a job of
/// the engine's pool, never under the lock. A leaf lock around the list only.
final class ChangeObservers: Sendable {
    private let observers = LockedValue<[@Sendable (EntryInfo) -> Void]>([])
    private let pool: BlockingIOPool

    init(pool: BlockingIOPool) { self.pool = pool }

    func add(_ observer: @escaping @Sendable (EntryInfo) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// Tells every observer that `info`'s file changed (as a job of the pool).
    func notify(_ info: EntryInfo) {
        let all = observers.withLock { $0 }
        guard !all.isEmpty else { return }
        pool.submit { all.forEach { $0(info) } }
    }
}
