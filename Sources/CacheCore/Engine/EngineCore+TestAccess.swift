/// The parts' pieces as tests reach them: `core.writes.holdWrites()`, `core.index.flush()`,
/// `core.activeSinks.wait(…)`, `core.handles.existing(id)`. The engine's own code never uses these:
/// it goes through each part's API (`SliceStore`, `FetchCoordinator`), so that what a part owns
/// is changed only by it. Stored references, no work.
extension EngineCore {
    /// The slice store's writer lanes.
    var writes: WriteQueue { store.writes }
    /// The slice store's index.
    var index: CacheIndex { store.index }
    /// The slice store's kept read descriptors.
    var idleFiles: IdleDataFiles { store.idleFiles }
    /// The fetch coordinator's handles of running transfers, by fetch id.
    var handles: HandleTable { fetches.handles }
    /// The fetch coordinator's count of sinks not finished yet.
    var activeSinks: ConditionLock<Int> { fetches.activeSinks }
}

extension CacheEngine {
    /// Tests: true once `url` has `bytes` cached, looked at again each time a transfer's sink
    /// finished writing (the event that makes it so); false if none comes within `timeout`.
    func waitUntilCached(url: String, bytes: Int64, timeout: Double = 30) -> Bool {
        core.fetches.waitForSinkEnds(timeout: timeout) { status(url: url)?.cachedBytes == bytes }
    }
}
