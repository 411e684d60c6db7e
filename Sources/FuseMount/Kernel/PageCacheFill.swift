/// Filling the kernel's page cache ahead of a sequential reader of cached bytes: where, for one
/// open handle. A pure value; `FileSystemCore` keeps one per handle and carries out its answers
/// (`FUSE_NOTIFY_STORE` through `KernelNotifier.store`).
///
/// Why: without passthrough, every read of a warm file is a FUSE round trip of the kernel's
/// read-ahead size (128 KiB for a daemon run by a user, 1 MiB as root), one or two in flight at
/// a time, and the reader waits for each. The daemon instead copies the next `window` bytes of
/// the data file into the file's page cache itself (a splice on a thread of its own), and the
/// reader finds them there without asking: its reads run at page-cache speed while the daemon
/// fills the next stretch in parallel.
///
/// How the daemon knows to go on: a reader served from the page cache sends no more reads. So
/// one page in the middle of each stretch is left out (the tripwire): the reader's read of it
/// comes to us half a window before the stretch runs out, and starts the next one.
///
/// A stretch starts at `initial` bytes and doubles with each one up to `window`: a program that
/// reads a little in order (a media probe reading a header) costs the disk little, a player or
/// a copy soon gets the whole window.
///
/// Only bytes that were hits go ahead: a read that waited for the network resets the fill (the
/// engine's own read-ahead fetches, and the kernel's read-ahead asks for those bytes as they
/// come). A first read or a seek fills nothing; the second read in a row does.
struct PageCacheFill: Equatable {
    /// How far ahead of the reader one stretch reaches at most.
    let window: Int64
    /// The first stretch after a reader starts (or starts again).
    let initial: Int64
    static let page: Int64 = 4096

    /// The next stretch's length.
    private(set) var stretch: Int64

    /// The end of the latest read the kernel asked for.
    private(set) var lastEnd: Int64 = -1
    /// Filled (or queued to be) up to here; 0 while not filling.
    private(set) var end: Int64 = 0
    /// The page left out of the current stretch; nil while not filling.
    private(set) var tripwire: Int64?

    init(window: Int64, initial: Int64 = 1 << 20) {
        self.window = window
        self.initial = min(window, max(initial, 4 * Self.page))
        stretch = self.initial
    }

    /// What to put into the page cache after the kernel read `range` (a `hit`: all of it was in
    /// the cache), in the order to store it, in a file of `size` bytes.
    mutating func read(_ range: Range<Int64>, hit: Bool, size: Int64) -> [Range<Int64>] {
        let previousEnd = lastEnd
        lastEnd = range.upperBound
        guard window >= 4 * Self.page, hit else { return stop() }
        if end > 0 {
            if let wire = tripwire, range.overlaps(wire..<(wire + Self.page)) || (range.lowerBound >= wire && range.lowerBound < end) {
                return fill(from: end, size: size)   // the reader got halfway: the next stretch
            }
            if range.lowerBound >= end - 2 * window && range.upperBound <= end {
                // The kernel's own read-ahead inside the stretch (bytes not stored yet), or
                // what is left before the end of the file.
                return []
            }
            return stop()   // a seek: filling starts again once the reader reads on from there
        }
        guard range.lowerBound == previousEnd else { return [] }   // a first read or a seek
        return fill(from: range.upperBound, size: size)
    }

    private mutating func fill(from start: Int64, size: Int64) -> [Range<Int64>] {
        let stop = min(start + stretch, size)
        stretch = min(window, 2 * stretch)
        guard stop > start else {
            tripwire = nil   // the end of the file: nothing left to fill
            return []
        }
        end = stop
        guard stop - start >= 4 * Self.page else {
            tripwire = nil
            return [start..<stop]
        }
        let wire = (start + (stop - start) / 2) & ~(Self.page - 1)
        tripwire = wire
        return [start..<wire, (wire + Self.page)..<stop]
    }

    private mutating func stop() -> [Range<Int64>] {
        end = 0
        tripwire = nil
        stretch = initial
        return []
    }
}
