import Foundation

/// The cache's figures kept as entries change, so the status summary (`status.json?view=summary`,
/// what the status page polls) and the metric gauges answer without walking every entry: at a
/// million entries that walk took 6.5 s a poll (docs/benchmarks.md, issue 51).
///
/// *What it owns.* `CacheTotals`, the sums over live entries (entries, bytes, slices, and the same
/// by folder), and the names of the folders seen (each entry keeps its folder's number, not its
/// name). *How it stays exact.* Each entry reports what it adds (`EntryFigures`) whenever its
/// state machine changes (`EntryState.machine`'s observer), and the totals take the difference
/// from what it reported before: a new version, bytes written or evicted, an error noted, the
/// entry becoming live or being removed all pass through the machine. *Threads.* Any: reports
/// come under the entry's shard lock; the totals have one leaf lock of their own, taken only
/// when an entry's figures changed. *Blocks on* nothing.
final class RunningTotals: Sendable {
    fileprivate struct State {
        var totals = CacheTotals()
        /// False until the entries of the index at start are counted in (`addCounted`).
        var counted = true
        /// Folder numbers by place, and places by number.
        var numbers: [FolderPlace: Int32] = [:]
        var places: [FolderPlace] = []
    }

    fileprivate let state = LockedValue(State())
    let sliceSize: Int64

    init(sliceSize: Int64) { self.sliceSize = sliceSize }

    /// The sums now: exact once `counted`; before, only the changes since the start.
    var totals: CacheTotals { state.withLock { $0.totals } }

    /// Whether the entries the index held at start are counted in (`countStarted` ... `addCounted`).
    var counted: Bool { state.withLock { $0.counted } }
    private let countedSignal = ConditionLock(true)

    /// The index's entries are being counted (in the background): changes are kept from now on,
    /// the count is added when it ends.
    func countStarted() {
        state.withLock { $0.counted = false }
        countedSignal.withLock { $0 = false }
    }

    /// The count of the entries the index held at start, added to the changes kept since.
    func addCounted(_ counted: CacheTotals) {
        state.withLock {
            $0.totals.add(counted)
            $0.counted = true
        }
        countedSignal.withLock { $0 = true }
        countedSignal.broadcast()
    }

    /// Waits until the index's entries are counted in (tests, the bench).
    func waitCounted() { countedSignal.wait(until: { $0 }) }

    /// Where folder `number` is.
    func place(_ number: Int32) -> FolderPlace? {
        state.withLock { Int(number) < $0.places.count ? $0.places[Int(number)] : nil }
    }

    /// The number of folder `place` (given the first time it is seen).
    func folderNumber(_ place: FolderPlace) -> Int32 {
        state.withLock { s in
            if let n = s.numbers[place] { return n }
            let n = Int32(s.places.count)
            s.numbers[place] = n
            s.places.append(place)
            return n
        }
    }

    /// An entry that added `old` now adds `new` (nil: nothing, it is not live).
    func replace(_ old: EntryFigures?, with new: EntryFigures?) {
        guard old != new else { return }
        state.withLock { $0.totals.replace(old, with: new) }
    }

    /// Starts over from `figures` (the entries loaded at start).
    func reset(to figures: [EntryFigures]) {
        var t = CacheTotals()
        for f in figures { t.replace(nil, with: f) }
        state.withLock { $0.totals = t }
    }
}

/// A folder of the status page: the origin of a URL and its path up to the last `/`,
/// percent-decoded (`FileStatus.placement`).
struct FolderPlace: Hashable, Sendable {
    var origin: String
    var path: String
}

/// What one live entry adds to the totals.
struct EntryFigures: Equatable, Sendable {
    /// Its folder's number (`RunningTotals.folderNumber`).
    var folder: Int32
    /// A directory listing (`FileStatus.kind`), not a file.
    var listing: Bool
    /// Its length, 0 while unknown.
    var lengthBytes: Int64
    var cachedBytes: Int64
    /// Slices holding any of its bytes.
    var slices: Int
    /// It has errors noted.
    var withErrors: Bool
    /// The Content-Type `listing` was worked out from (an HTML page is a listing): worked out
    /// again only when this changes.
    var contentType: String?

    /// The slices `coverage` touches, `sliceSize` bytes each (as the status summary counts them).
    static func slices(_ coverage: RangeSet, sliceSize: Int64) -> Int {
        var slices = 0
        var last: Int64 = -1
        for r in coverage.ranges where !r.isEmpty {
            let first = r.lowerBound / sliceSize, end = (r.upperBound - 1) / sliceSize
            if end > last { slices += Int(end - max(first, last + 1) + 1) }
            last = max(last, end)
        }
        return slices
    }
}

/// Sums over the live entries: pure, so a table test can hold it against a walk of a model.
struct CacheTotals: Equatable, Sendable {
    struct Folder: Equatable, Sendable {
        var files = 0
        var listings = 0
        var lengthBytes: Int64 = 0
        var cachedBytes: Int64 = 0
        var withErrors = 0
    }

    var entries = 0
    var cachedBytes: Int64 = 0
    var slices = 0
    /// By folder number; a folder leaves when its last entry does.
    var folders: [Int32: Folder] = [:]

    /// An entry that added `old` (nil: nothing) now adds `new` (nil: nothing).
    mutating func replace(_ old: EntryFigures?, with new: EntryFigures?) {
        if let old { add(old, -1) }
        if let new { add(new, 1) }
    }

    private mutating func add(_ f: EntryFigures, _ sign: Int) {
        entries += sign
        cachedBytes += Int64(sign) * f.cachedBytes
        slices += sign * f.slices
        var folder = folders[f.folder] ?? Folder()
        if f.listing { folder.listings += sign } else { folder.files += sign }
        folder.lengthBytes += Int64(sign) * f.lengthBytes
        folder.cachedBytes += Int64(sign) * f.cachedBytes
        if f.withErrors { folder.withErrors += sign }
        // All zero, not just no file: while the start's count runs, a folder holds differences only.
        folders[f.folder] = folder == Folder() ? nil : folder
    }

    /// Adds `other`'s sums (the start's count to the changes made while it ran).
    mutating func add(_ other: CacheTotals) {
        entries += other.entries
        cachedBytes += other.cachedBytes
        slices += other.slices
        for (n, o) in other.folders {
            var f = folders[n] ?? Folder()
            f.files += o.files
            f.listings += o.listings
            f.lengthBytes += o.lengthBytes
            f.cachedBytes += o.cachedBytes
            f.withErrors += o.withErrors
            folders[n] = f == Folder() ? nil : f
        }
    }
}

extension RunningTotals {
    /// The totals as a clean stop keeps them (`CacheIndex.StoredTotals`), by folder place; nil
    /// until the start's count is in (then the next start counts again).
    func stored() -> CacheIndex.StoredTotals? {
        state.withLock { s in
            guard s.counted else { return nil }
            let folders = s.totals.folders.sorted { $0.key < $1.key }.map { n, f in
                let place = s.places[Int(n)]
                return CacheIndex.StoredTotals.Folder(origin: place.origin, path: place.path, files: f.files, listings: f.listings,
                                                      lengthBytes: f.lengthBytes, cachedBytes: f.cachedBytes, withErrors: f.withErrors)
            }
            return CacheIndex.StoredTotals(entries: s.totals.entries, cachedBytes: s.totals.cachedBytes, slices: s.totals.slices,
                                           folders: folders)
        }
    }

    /// Starts from what a clean stop kept (instead of counting the index): counted at once.
    func restore(_ stored: CacheIndex.StoredTotals) {
        var t = CacheTotals()
        t.entries = stored.entries
        t.cachedBytes = stored.cachedBytes
        t.slices = stored.slices
        for f in stored.folders {
            let n = folderNumber(FolderPlace(origin: f.origin, path: f.path))
            t.folders[n] = CacheTotals.Folder(files: f.files, listings: f.listings, lengthBytes: f.lengthBytes,
                                              cachedBytes: f.cachedBytes, withErrors: f.withErrors)
        }
        state.withLock { $0.totals = t }
    }
}
