/// Read descriptors of data files that readers closed, kept for the next reader of the same
/// version of the same entry.
///
/// Why: the proxy makes a reader per request, so a keep-alive client's ranged hits each opened
/// the data file (building its path, `open`, later `close`): about 5% of a warm hit's CPU. A
/// reader that closes gives its descriptor back here; the next reader of that entry and version
/// takes it instead of opening. A descriptor is taken out while a reader holds it (never shared
/// by two readers, so each keeps the kernel's read-ahead state to itself, and a client's next
/// request continues the read-ahead of its last one).
///
/// Never another version's bytes: a file is kept under its entry's handle (key and a number
/// never reused, so a new entry for the same key is another one) and its generation, given
/// back only while the entry is current at that generation (under the shard lock), and every file of an entry is dropped when it moves to a new
/// generation or is removed (`dropAll(of:)`, under the shard lock too): the only times a data
/// file is deleted. Eviction punches holes in the same file, which a kept descriptor sees.
/// At most `capacity` are kept; the oldest go first.
final class IdleDataFiles: Sendable {
    private struct Slot {
        let entry: EntryHandle
        let generation: Int64
        let file: DataFile
    }
    private let slots = LockedValue<[Slot]>([])
    let capacity: Int

    init(capacity: Int = 64) { self.capacity = capacity }

    /// A kept descriptor of `entry`'s data file at `generation`, taken out (nil: open one).
    func take(_ entry: EntryHandle, generation: Int64) -> DataFile? {
        slots.withLock { s in
            guard let i = s.lastIndex(where: { $0.entry == entry && $0.generation == generation }) else { return nil }
            return s.remove(at: i).file
        }
    }

    /// Keeps `file` for the next reader. Call under the entry's shard lock, with the entry
    /// current at `generation`. Returns the descriptor it let go of to make room, if any, to be
    /// released by the caller after its locks (closing is a system call).
    func give(_ file: DataFile, of entry: EntryHandle, generation: Int64) -> DataFile? {
        slots.withLock { s in
            s.append(Slot(entry: entry, generation: generation, file: file))
            return s.count > capacity ? s.removeFirst().file : nil
        }
    }

    /// Forgets every descriptor of `entry` (a new generation, a removal). Call under its shard
    /// lock. Their closes run there too, and are cheap: both callers delete the data file only
    /// after the index commit, so none of these is the last link to a file's blocks.
    func dropAll(of entry: EntryHandle) {
        slots.withLock { s in s.removeAll { $0.entry == entry } }
    }

    /// Forgets every kept descriptor (tests: the next read opens its file).
    func removeAll() { slots.withLock { $0.removeAll() } }

    /// How many are kept (tests).
    var count: Int { slots.withLock { $0.count } }
}
