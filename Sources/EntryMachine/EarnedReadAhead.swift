import CoreTypes

/// The read-ahead a reader earns by reading: every reader but a player (`ReaderClass`,
/// `readsAheadFromOpen`) pays for what it reads. Pure: no clock, no I/O, no locks; the engine
/// keeps one per such reader (`ReaderProgress.earning`, under the entry's shard lock) and
/// feeds it each read (`Reader.updateReadAhead`).
///
/// The rule. A *run* is a reader's reads from its first read, or its last seek, each continuing
/// the one before; what the run has *consumed* is the bytes it read past the furthest byte it had
/// read before (a read again behind it adds nothing, a jump over bytes others brought in adds only
/// its own). The first read of a run gets no window: it has read nothing yet. After each read
/// that continues the run, the window fetched ahead of it is
///
///     window = min(limit, consumed / 2, max(2 × window before, `start`))
///
/// So the window starts small and doubles while reads stay sequential, as mountpoint-s3's
/// prefetcher grows its read window from a small first request, and it never runs past half of
/// what this reader has already read in its run: a program that stops (or seeks) after reading
/// N bytes of a run has had at most N/2 fetched for nothing, so a probe, a thumbnailer or a
/// program nobody listed costs the origin at most 1.5× what it reads (a random reader exactly
/// what it reads), while one that reads on gets growing requests (a scanner reading a `.ts` from
/// its start: 1 MiB ahead once it has read 2 MiB, not a stream of 16 KiB margins).
public struct EarnedReadAhead: Sendable, Equatable {
    /// Where the current run began, and the furthest byte it read (`from == to`: no run yet).
    public private(set) var from: Int64 = 0
    public private(set) var to: Int64 = 0
    /// What the run read, counting each byte once (past `to` only).
    public private(set) var consumed: Int64 = 0
    /// The read-ahead after the last read.
    public private(set) var window: Int64 = 0

    /// The least the window doubles from: the second read of a run gets at most this.
    public static let start: Int64 = 16 << 10

    public init() {}

    /// The first read of a run (the reader's first, or a seek): no window yet.
    public mutating func started(by request: Range<Int64>) {
        from = request.lowerBound
        to = request.upperBound
        consumed = Int64(request.count)
        window = 0
    }

    /// A read that continues the run (`ReadPlanner.continuesSequentially`).
    /// - Parameter limit: the most read-ahead this reader may have (`maxReadAhead`, and what it
    ///   consumes in a few seconds).
    public mutating func continued(by request: Range<Int64>, limit: Int64) {
        consumed = consumed.addingClamped(max(0, request.upperBound - max(request.lowerBound, to)))
        from = min(from, request.lowerBound)
        to = max(to, request.upperBound)
        window = max(0, min(limit, consumed / 2, max(window.addingClamped(window), Self.start)))
    }
}
