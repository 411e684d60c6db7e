/// Which entries of a shard's table are let go first when it holds more than the entry budget
/// (`EntryLoader.trim`): SIEVE (Zhang et al., "SIEVE is simpler than LRU", NSDI 2024).
///
/// *Why SIEVE.* Entries are kept in the order they came in, each with one bit, set when it is
/// used again (an open after the one that loaded it). A hand walks from the oldest toward the
/// newest: an entry whose bit is set gets it cleared and stays where it is; one without is let
/// go. What a one-pass sweep brings in (a `find | xargs cat` of a folder larger than the budget,
/// the scrub, an eviction round's look) is never used again, so it is let go as the hand reaches
/// it, and the hand, letting one go for each that comes in, never gets past the newest to come
/// round to the entries used repeatedly: those stay, however long the sweep. An LRU list lets the
/// hot set go after a sweep of the budget's size; CLOCK (the same bit, but new entries behind the
/// hand) lets it go after two turns of the hand; 2Q needs a second queue and a ghost list of keys.
/// SIEVE is one list and a bit, and a use is one store (no move in the list, unlike LRU), which
/// suits a table touched at every open under its shard lock.
///
/// *Batches.* `letGo` lets several go in one walk: the caller lets go once the table is past the
/// budget by a margin and goes down to the budget (no sort, no walk over the whole table per load).
///
/// *What it may not let go.* The caller's `canLetGo` says which entries are in use (a reader, a
/// transfer, a pin, a waiter); the hand walks past those as past a set bit, and they stay. A walk
/// looks at each entry at most twice (one turn clears the bits, the second lets go), so a table
/// of entries all in use ends the walk with fewer let go than asked.
///
/// A pure value (keys, links in arrays, no references): nodes are slots of arrays, reused once
/// freed, so a use or a let-go allocates nothing once the arrays have grown to the table's size.
struct LetGoOrder<Key: Hashable> {
    private static var none: Int32 { -1 }
    private var slotOf: [Key: Int32] = [:]
    private var keys: [Key?] = []
    /// Toward the newest and toward the oldest.
    private var newer: [Int32] = []
    private var older: [Int32] = []
    private var visited: [Bool] = []
    private var free: [Int32] = []
    private var newest = none
    private var oldest = none
    /// Where the next walk starts (`none`: at the oldest).
    private var hand = none

    init() {}

    var count: Int { slotOf.count }

    func contains(_ key: Key) -> Bool { slotOf[key] != nil }

    /// Whether `key` was used since it came in or since the hand last passed it.
    func wasUsed(_ key: Key) -> Bool { slotOf[key].map { visited[Int($0)] } ?? false }

    /// Puts `key` in as the newest, not used yet; or, `nextOut`, where the hand looks next, so it
    /// is the first let go unless it is used before (an entry loaded for a look, not for a use).
    mutating func insert(_ key: Key, nextOut: Bool = false) {
        precondition(slotOf[key] == nil, "\(key) is in the let-go order already")
        let s: Int32
        if let reused = free.popLast() {
            s = reused
            keys[Int(s)] = key
            visited[Int(s)] = false
        } else {
            s = Int32(keys.count)
            keys.append(key)
            newer.append(Self.none)
            older.append(Self.none)
            visited.append(false)
        }
        slotOf[key] = s
        let at = nextOut ? (hand == Self.none ? oldest : hand) : Self.none
        if at == Self.none {
            // As the newest.
            older[Int(s)] = newest
            newer[Int(s)] = Self.none
            if newest != Self.none { newer[Int(newest)] = s } else { oldest = s }
            newest = s
        } else {
            // Just older than `at`, with the hand on it.
            let before = older[Int(at)]
            older[Int(s)] = before
            newer[Int(s)] = at
            older[Int(at)] = s
            if before != Self.none { newer[Int(before)] = s } else { oldest = s }
            hand = s
        }
    }

    /// `key` was used again (an open): the hand will pass it once.
    mutating func touch(_ key: Key) {
        if let s = slotOf[key] { visited[Int(s)] = true }
    }

    /// Takes `key` out (let go, or removed from the table).
    mutating func remove(_ key: Key) {
        guard let s = slotOf.removeValue(forKey: key) else { return }
        unlink(s)
    }

    /// Walks the hand and takes out up to `count` entries that `canLetGo` allows, the ones the
    /// hand finds unused first; returns them in the order let go.
    mutating func letGo(_ count: Int, canLetGo: (Key) -> Bool) -> [Key] {
        var out: [Key] = []
        guard count > 0 else { return out }
        out.reserveCapacity(count)
        var h = hand == Self.none ? oldest : hand
        var steps = 2 * slotOf.count
        while out.count < count, steps > 0, h != Self.none {
            steps -= 1
            let next = newer[Int(h)] == Self.none ? oldest : newer[Int(h)]
            if visited[Int(h)] {
                visited[Int(h)] = false
            } else if let key = keys[Int(h)], canLetGo(key) {
                out.append(key)
                slotOf.removeValue(forKey: key)
                unlink(h)
                if slotOf.isEmpty { h = Self.none; break }
            }
            h = next
        }
        hand = h
        return out
    }

    private mutating func unlink(_ s: Int32) {
        let (o, n) = (older[Int(s)], newer[Int(s)])
        if o != Self.none { newer[Int(o)] = n } else { oldest = n }
        if n != Self.none { older[Int(n)] = o } else { newest = o }
        if hand == s { hand = n }
        keys[Int(s)] = nil
        visited[Int(s)] = false
        free.append(s)
    }
}
