/// Reading a cached file's data file from the disk ahead of a sequential reader without
/// passthrough: where, for one open handle. A pure value; `FileSystemCore` keeps one per handle
/// and carries out its answers (`KernelNotifier.readAhead`: the bytes go into the data file's
/// page cache on a thread of their own, nothing is copied and nothing is sent to the kernel).
///
/// Why: without passthrough each FUSE read of a warm file is answered by splicing its bytes from
/// the data file, and the kernel keeps only one or two of those reads in flight (its read-ahead
/// on the mount is one `max_read`). The data file's own read-ahead is driven by those splices,
/// which the threads of the disk lane send out of order: the kernel then takes them for
/// random reads and reads no further than each asks, so nearly every reply waited for the disk
/// with nothing else in flight. Reading `window` bytes ahead of the reader, in order, keeps the
/// disk busy the way a plain file's read-ahead does; the splices then find their bytes in memory.
///
/// A first read or a seek reads nothing ahead (the engine's read and the kernel's read-ahead
/// serve a probe); the second read in a row starts it. It goes ahead in steps of at least `step`
/// bytes, so a reader costs one job per `step` bytes read.
struct DataFileReadAhead: Equatable {
    /// How far past the end of the reader's latest read the data file is read.
    let window: Int64
    /// The least read ahead at once (but for the end of the file).
    let step: Int64
    /// How far from the end of the previous read a read may start and still be in sequence:
    /// the kernel's read-ahead sends a window of requests that the daemon may see slightly out
    /// of order.
    static let slack: Int64 = 4 << 20

    /// The end of the latest read the kernel asked for; -1 before the first.
    private(set) var lastEnd: Int64 = -1
    /// Read ahead (or queued to be) up to here; 0 before anything was.
    private(set) var until: Int64 = 0

    init(window: Int64, step: Int64 = 4 << 20) {
        self.window = max(window, 0)
        self.step = max(1, min(step, max(window, 1)))
    }

    /// What to read ahead after the kernel read `range` of a file of `size` bytes, whose bytes
    /// came from the data file: nil for nothing (yet).
    mutating func read(_ range: Range<Int64>, size: Int64) -> Range<Int64>? {
        let previousEnd = lastEnd
        guard window > 0, !range.isEmpty else { return nil }
        let inSequence = previousEnd >= 0 && abs(range.lowerBound - previousEnd) <= Self.slack
        guard inSequence else {
            // A first read or a seek: nothing ahead of the old position is of use any more.
            lastEnd = range.upperBound
            until = range.upperBound
            return nil
        }
        lastEnd = max(previousEnd, range.upperBound)
        let from = max(until, range.upperBound)
        let to = min(size, lastEnd + window)
        guard to > from, to - from >= step || to == size else { return nil }
        until = to
        return from..<to
    }

    /// The job for `range` could not be queued (the read-ahead lane is full): it is asked for
    /// again at the next read.
    mutating func refused(_ range: Range<Int64>) {
        if until == range.upperBound { until = range.lowerBound }
    }
}
