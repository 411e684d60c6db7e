/// The fetches running for one entry, and who still wants them. Pure state: the engine applies
/// what it returns (cancelling transfers, stopping them early).
///
/// A fetch delivers `cursor..<end` (end nil: to EOF). Readers register interest in the fetches
/// their plans start or wait on; when the last interested reader goes away, the fetch is
/// cancelled, so bytes nobody wants are not downloaded.
struct InFlightTable: Sendable {
    struct Fetch: Sendable, Equatable {
        var id: Int
        var generation: Int64
        var start: Int64
        var cursor: Int64
        var end: Int64?
        var interest: Set<Int>
        /// Kept alive without readers (the metadata probe, a body the origin sends whole).
        var pinned: Bool
    }

    private(set) var fetches: [Int: Fetch] = [:]

    var isEmpty: Bool { fetches.isEmpty }

    /// What the planner needs to know about the fetches of `generation`.
    func running(generation: Int64) -> [ReadPlanner.RunningFetch] {
        fetches.values.filter { $0.generation == generation }.sorted { $0.cursor < $1.cursor }
            .map { ReadPlanner.RunningFetch(id: $0.id, cursor: $0.cursor, end: $0.end) }
    }

    mutating func start(id: Int, generation: Int64, start: Int64, end: Int64?, reader: Int?, pinned: Bool = false) {
        fetches[id] = Fetch(id: id, generation: generation, start: start, cursor: start, end: end,
                            interest: reader.map { [$0] } ?? [], pinned: pinned)
    }

    mutating func addInterest(_ reader: Int, in id: Int) { fetches[id]?.interest.insert(reader) }

    /// The origin sent the body from `cursor` (0: it ignored the range) up to `end`.
    mutating func rebase(_ id: Int, cursor: Int64, end: Int64?, generation: Int64, pinned: Bool) {
        fetches[id]?.cursor = cursor
        fetches[id]?.start = cursor
        fetches[id]?.end = end
        fetches[id]?.generation = generation
        fetches[id]?.pinned = pinned
    }

    enum Progress { case proceed, stop }

    /// Bytes up to `cursor` were delivered. `.stop` when the fetch has done its job (reached a
    /// truncated end) or nobody wants it any more.
    mutating func advance(_ id: Int, to cursor: Int64) -> Progress {
        guard var f = fetches[id] else { return .stop }
        f.cursor = max(f.cursor, cursor)
        fetches[id] = f
        if let end = f.end, f.cursor >= end { return .stop }
        if f.interest.isEmpty && !f.pinned { return .stop }
        return .proceed
    }

    /// Stop fetch `id` at `end` (a reader seeked past it and a new fetch takes over from there).
    mutating func truncate(_ id: Int, at end: Int64) {
        guard var f = fetches[id] else { return }
        if let e = f.end { f.end = min(e, end) } else { f.end = end }
        fetches[id] = f
    }

    @discardableResult
    mutating func finish(_ id: Int) -> Fetch? { fetches.removeValue(forKey: id) }

    /// The reader went away: returns the fetches nobody wants any more (to cancel).
    mutating func release(reader: Int) -> [Int] {
        var orphaned: [Int] = []
        for (id, var f) in fetches where f.interest.contains(reader) {
            f.interest.remove(reader)
            fetches[id] = f
            if f.interest.isEmpty && !f.pinned { orphaned.append(id) }
        }
        return orphaned
    }

    /// Removes every fetch (entry removed or changed remotely); returns their ids.
    mutating func removeAll(generation: Int64? = nil, keeping kept: Int? = nil) -> [Int] {
        let ids = fetches.values.filter { (generation == nil || $0.generation == generation) && $0.id != kept }.map(\.id)
        for id in ids { fetches.removeValue(forKey: id) }
        return ids
    }
}
