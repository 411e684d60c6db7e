import CoreTypes

/// How one reader consumes since its last seek: as fast as the bytes come (`cat`, a copy), or at
/// its own pace (a player). Pure: the engine feeds it every read and the time (uptime seconds).
///
/// Why it matters: a copy wants read-ahead that fills the link (large windows, parallel streams);
/// a player wants only what it consumes in the next few seconds, since on a thin link every byte
/// fetched ahead of need is taken from the bytes it waits for, and after a seek nobody reads it.
/// The two are told apart by the reads that had to wait for the network: a copy waits on nearly
/// every read, a player whose read-ahead keeps up on almost none. Until a run is `settle` seconds
/// old, the kind is unknown and the read-ahead grows as for a copy, but is classed far, so it
/// yields to any read that is behind.
public struct ReaderPace: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case unknown, greedy, paced }

    /// When and where the current run began, and the furthest byte it read.
    public private(set) var runStart: Double
    public private(set) var runFrom: Int64
    public private(set) var runTo: Int64
    /// When a read of this run last waited for the network.
    public private(set) var lastMiss: Double
    /// A moving share (0...1) of the reads that waited, the last ones weighing most.
    public private(set) var missShare: Double = 0
    public private(set) var reads = 0
    /// The run began with a seek (not with the reader's first read).
    public private(set) var afterSeek = false

    /// Seconds a run must last before its kind is judged: a player reads in a burst right after
    /// it opens or seeks, which must not pass for its rate.
    public static let settle = 1.0
    /// A paced reader's read-ahead covers this many seconds of its consumption at first, and
    /// grows by half of each second in which none of its reads waited, up to `maxLead`.
    public static let baseLead = 8.0
    public static let maxLead = 30.0
    /// Weight of the newest read in `missShare`.
    package static let weight = 0.2

    public init(now: Double, at offset: Int64) {
        runStart = now
        runFrom = offset
        runTo = offset
        lastMiss = now
    }

    /// A new run begins at `offset`: the reader's first read, or a seek.
    public mutating func restart(now: Double, at offset: Int64, seek: Bool = true) {
        self = ReaderPace(now: now, at: offset)
        afterSeek = seek
    }

    /// A read of this run ended at `end`; `missed`: it had to wait for the network.
    public mutating func note(readEnd end: Int64, missed: Bool, now: Double) {
        runTo = max(runTo, end)
        if missed { lastMiss = now }
        missShare = reads == 0 ? (missed ? 1 : 0) : missShare * (1 - Self.weight) + (missed ? Self.weight : 0)
        reads += 1
    }

    public func kind(now: Double) -> Kind {
        guard now - runStart >= Self.settle else { return .unknown }
        return missShare >= 0.5 ? .greedy : .paced
    }

    /// Bytes per second consumed in this run, over at least `rampFloor` seconds: a copy's first
    /// reads on a fast link then still reach the whole window within a few round trips, while
    /// one read right after a seek is not taken for a rate.
    public func rate(now: Double) -> Double {
        Double(max(0, runTo - runFrom)) / max(now - runStart, Self.rampFloor)
    }
    public static let rampFloor = 0.25

    /// Seconds of consumption the read-ahead should cover: more while the link keeps up.
    public func lead(now: Double) -> Double {
        min(Self.maxLead, Self.baseLead + 0.5 * max(0, now - max(runStart, lastMiss)))
    }

    /// The most read-ahead this reader needs: what it consumes in `lead` seconds (at least
    /// `floor`). A copy on a fast link consumes fast, so this bounds only slow readers.
    public func readAheadBound(now: Double, floor: Int64) -> Int64 {
        max(floor, ReadPlanner.bytes(catchingUpAt: rate(now: now), for: lead(now: now)))
    }

    /// The read-ahead of a run that began with a seek, while its kind is not known yet (its first
    /// `settle` seconds): `readAhead`, but at most what one of the entry's transfers was last
    /// measured to bring in `settle` seconds (`linkRate`), and never under `unknownFloor`. On a
    /// thin link a player's seek then starts one stream of about a second of the link, not eight
    /// of a MiB that share the link with the bytes it waits for (a 10 Mbit/s link carries a
    /// second of them in 8 s); on a fat one a copy's window is not cut (a connection brings
    /// megabytes in a second). Unmeasured (the first fetches of an entry): not bounded. A
    /// reader's first run is not bounded either: a copy from the start fills the link from its
    /// first round trips, and nothing of the reader's own waits yet.
    public static func boundWhileUnknown(_ readAhead: Int64, linkRate: Double?) -> Int64 {
        guard let linkRate else { return readAhead }
        return min(readAhead, max(unknownFloor, ReadPlanner.bytes(catchingUpAt: linkRate, for: settle)))
    }
    public static let unknownFloor: Int64 = 256 << 10

    /// The class of its read-ahead while no read waits on it.
    public func readAheadPriority(now: Double) -> FetchPriority {
        kind(now: now) == .greedy ? .near : .far
    }
}
