import CoreTypes

/// The fetches running for one entry, and who still wants them. Pure state: the engine applies
/// what it returns (cancelling transfers, stopping them early).
///
/// A fetch delivers `cursor..<end` (end nil: to EOF). Readers register interest in the fetches
/// their plans start or wait on; when the last interested reader goes away, the fetch is
/// cancelled, so bytes nobody wants are not downloaded.
package struct InFlightTable: Sendable {
    package struct Fetch: Sendable, Equatable {
        package var id: Int
        package var generation: Int64
        package var start: Int64
        package var cursor: Int64
        package var end: Int64?
        package var interest: Set<Int>
        /// Kept alive without readers (the metadata probe, a body the origin sends whole).
        package var pinned: Bool
        /// When it started and how much it delivered since: its rate tells the planner whether
        /// waiting for it beats asking for a new range.
        package var startedAt: Double
        package var delivered: Int64 = 0
        /// Its class when no read waits on it (read-ahead near or far, preload), and the reader
        /// that started it.
        package var base: FetchPriority = .far
        package var owner: Int?
        /// The class of that reader; nil: no reader's (the open's metadata probe). Its bytes are
        /// that class's fetched bytes, and its waste if none is read (`UnreadFetched`).
        package var readerClass: ReaderClass?
        /// Its class now, and when the oldest read still waiting on it started waiting (as the
        /// fetcher was last told; see `prioritize`).
        package var priority: FetchPriority = .far
        package var waitingSince: Double?
    }

    /// A change of class to pass on to the fetch's transfer.
    package struct PriorityChange: Sendable, Equatable {
        package var id: Int
        package var priority: FetchPriority
        package var waitedSeconds: Double
    }

    package private(set) var fetches: [Int: Fetch] = [:]
    /// The delivery rate of this entry's transfers as last measured: a fetch that has only just
    /// started is expected to go about as fast as the ones before it.
    package private(set) var observedRate: Double?

    package var isEmpty: Bool { fetches.isEmpty }

    /// What the planner needs to know about the fetches of `generation` at time `now`.
    package func running(generation: Int64, now: Double) -> [ReadPlanner.RunningFetch] {
        // A fetch that reached its (possibly truncated) end delivers nothing more: leave it out.
        fetches.values.filter { f in f.generation == generation && (f.end.map { $0 > f.cursor } ?? true) }
            .sorted { $0.cursor < $1.cursor }
            .map { f in
                ReadPlanner.RunningFetch(id: f.id, cursor: f.cursor, end: f.end,
                                         bytesPerSecond: Self.rate(of: f, now: now) ?? observedRate)
            }
    }

    private static func rate(of f: Fetch, now: Double) -> Double? {
        let elapsed = now - f.startedAt
        return f.delivered >= (256 << 10) && elapsed > 0.01 ? Double(f.delivered) / elapsed : nil
    }

    package mutating func start(id: Int, generation: Int64, start: Int64, end: Int64?, reader: Int?, readerClass: ReaderClass? = nil,
                        pinned: Bool = false, priority: FetchPriority = .far, now: Double) {
        fetches[id] = Fetch(id: id, generation: generation, start: start, cursor: start, end: end,
                            interest: reader.map { [$0] } ?? [], pinned: pinned, startedAt: now,
                            base: priority, owner: reader, readerClass: readerClass, priority: priority)
    }

    /// Classes the fetches again from the reads waiting now (`ranges` still missing, each with
    /// when it started waiting): a fetch that will deliver bytes of one is `.waiting`, since the
    /// oldest such read began; else one that delivers bytes a scanner waits on (`scanning`) is
    /// `.waitedScan` if that ranks above its own class; the others fall back to their base class.
    /// Returns what changed, for the fetcher: a fetch whose oldest waiting read changed is passed
    /// on too, since the fetcher judges from that read's wait whether the lower classes must yield.
    package mutating func prioritize(waiting: [(range: Range<Int64>, since: Double)], scanning: [(range: Range<Int64>, since: Double)] = [],
                             now: Double) -> [PriorityChange] {
        var changes: [PriorityChange] = []
        for (id, f) in fetches {
            let pending = f.cursor..<max(f.cursor, f.end ?? Int64.max)
            func oldest(_ reads: [(range: Range<Int64>, since: Double)]) -> Double? {
                reads.lazy.filter { $0.range.overlaps(pending) }.map(\.since).min()
            }
            var priority = f.base
            var since = oldest(waiting)
            if since != nil {
                priority = .waiting
            } else if f.base > .waitedScan, let s = oldest(scanning) {
                (priority, since) = (.waitedScan, s)
            }
            guard priority != f.priority || since != f.waitingSince else { continue }
            fetches[id]?.priority = priority
            fetches[id]?.waitingSince = since
            changes.append(PriorityChange(id: id, priority: priority, waitedSeconds: since.map { max(0, now - $0) } ?? 0))
        }
        return changes
    }

    /// The fetches `owner` started take the class of its verdict (`ReaderTempo`): its read-ahead
    /// drops to `ReaderTempo.bulkFetchClass` once it reads in bulk, and goes back to
    /// `watchedClass` once it keeps pace again. The classes take effect at the next `prioritize`.
    package mutating func rebase(owner: Int, bulk: Bool, watchedClass: FetchPriority) {
        let from: Set<FetchPriority> = bulk ? [.near, .far] : [ReaderTempo.bulkFetchClass]
        let to = bulk ? ReaderTempo.bulkFetchClass : watchedClass
        guard from != [to] else { return }
        for (id, f) in fetches where f.owner == owner && from.contains(f.base) { fetches[id]?.base = to }
    }

    package mutating func addInterest(_ reader: Int, in id: Int) { fetches[id]?.interest.insert(reader) }

    /// The origin sent the body from `cursor` (0: it ignored the range) up to `end`.
    package mutating func rebase(_ id: Int, cursor: Int64, end: Int64?, generation: Int64, pinned: Bool) {
        fetches[id]?.cursor = cursor
        fetches[id]?.start = cursor
        fetches[id]?.end = end
        fetches[id]?.generation = generation
        fetches[id]?.pinned = pinned
    }

    package enum Progress { case proceed, stop }

    /// Bytes up to `cursor` were delivered. `.stop` when the fetch has done its job (reached a
    /// truncated end) or nobody wants it any more.
    package mutating func advance(_ id: Int, to cursor: Int64, now: Double) -> Progress {
        guard var f = fetches[id] else { return .stop }
        f.delivered += max(0, cursor - f.cursor)
        f.cursor = max(f.cursor, cursor)
        fetches[id] = f
        if let r = Self.rate(of: f, now: now) { observedRate = r }
        if let end = f.end, f.cursor >= end { return .stop }
        if f.interest.isEmpty && !f.pinned { return .stop }
        return .proceed
    }

    /// Stop fetch `id` at `end` (a reader seeked past it and a new fetch takes over from there).
    package mutating func truncate(_ id: Int, at end: Int64) {
        guard var f = fetches[id] else { return }
        if let e = f.end { f.end = min(e, end) } else { f.end = end }
        fetches[id] = f
    }

    @discardableResult
    package mutating func finish(_ id: Int) -> Fetch? { fetches.removeValue(forKey: id) }

    /// The reader went away, or seeked elsewhere: it no longer wants its fetches, except those
    /// that deliver bytes of `keeping` (reads of it still waiting). Returns the fetches nobody
    /// wants any more; they stop at their next chunk.
    package mutating func release(reader: Int, keeping: [Range<Int64>] = []) -> [Int] {
        var orphaned: [Int] = []
        for (id, var f) in fetches where f.interest.contains(reader) {
            let pending = f.cursor..<max(f.cursor, f.end ?? Int64.max)
            if keeping.contains(where: { $0.overlaps(pending) }) { continue }
            f.interest.remove(reader)
            fetches[id] = f
            if f.interest.isEmpty && !f.pinned { orphaned.append(id) }
        }
        return orphaned
    }

    /// Removes every fetch (entry removed or changed remotely); returns their ids.
    package mutating func removeAll(generation: Int64? = nil, keeping kept: Int? = nil) -> [Int] {
        let ids = fetches.values.filter { (generation == nil || $0.generation == generation) && $0.id != kept }.map(\.id)
        for id in ids { fetches.removeValue(forKey: id) }
        return ids
    }
}
