import Atomics

/// The ids and generations the engine hands out: readers', fetches' and new entries' ids, and
/// versions' generations.
///
/// Generations are unique in the process, not only per entry: an entry removed and made anew for
/// the same URL (`cache rm`, a playlist refresh) must not start again at a version its old
/// readers are bound to. The first is above every stored one and above the index's generation
/// floor (`EngineCore`'s start says which).
///
/// Threads: any, under a shard lock or not; two atomic counters, no lock.
final class EngineIDs: Sendable {
    private let lastID = ManagedAtomic<Int>(1)
    private let lastGeneration: ManagedAtomic<Int64>

    /// - Parameter lastGeneration: the start's floor: every generation handed out is above it.
    init(lastGeneration: Int64) {
        self.lastGeneration = ManagedAtomic(lastGeneration)
    }

    /// What a start after a crash adds to the last generation known (`EngineCore`): more than
    /// any process hands out in its life.
    static let gapAfterACrash: Int64 = 1 << 32

    /// The last generation handed out: what a clean stop keeps as the floor.
    var lastHandedOut: Int64 { lastGeneration.load(ordering: .relaxed) }

    /// An id not handed out before in this process.
    func makeID() -> Int { lastID.wrappingIncrementThenLoad(ordering: .relaxed) }

    /// A generation no reader in this process was ever bound to.
    func makeGeneration() -> Int64 { lastGeneration.wrappingIncrementThenLoad(ordering: .relaxed) }
}
