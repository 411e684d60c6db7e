import CoreTypes

/// How much a transfer matters to the readers right now, most urgent first.
///
/// Every byte range the engine asks an origin for has a class. A read that somebody is waiting on
/// (a FUSE read, a proxy response's next bytes) always goes first: on a link that is shared by all
/// connections, under `--bwlimit` and within `--max-connections`, transfers of the lower classes
/// yield to it (the fetcher pauses them) as soon as such a read is behind, and go on once it is
/// not. Without this, the parallel streams that fill a long fat link starve the playhead on a thin
/// one: a player's next bytes queue behind megabytes of read-ahead it will not need for a minute.
///
/// The cases are declared most urgent first and compare by `rank`; the raw values are codes
/// (status, atomics) that stay as they were when a class is added.
public enum FetchPriority: Int, Sendable, Comparable, CaseIterable, Codable, CustomStringConvertible {
    /// A read is waiting on bytes this transfer delivers.
    case waiting = 0
    /// A scanner's read (`ReaderClass.scanner`) is waiting on bytes this transfer delivers: it
    /// goes before every read-ahead (a copy's `.near` streams follow each other for as long as
    /// the copy runs, and a probe behind them would wait all that time) and yields to every
    /// player's waiting read at once, as all scan fetches do. A probe's fetch is what it asks
    /// plus what it earned by reading on (`EarnedReadAhead`), so read-ahead gives up little for it.
    case waitedScan = 5
    /// Read-ahead of a reader that reads as fast as the bytes come (`cat`, `cp`, a copy): it will
    /// wait on these bytes within moments, so its streams fill the link.
    case near = 1
    /// Read-ahead of a reader that paces itself (a player), or of one not yet known: wanted, but
    /// seconds from now.
    case far = 2
    /// A scanner's fetches (`ReaderClass.scanner`: a media server probing its library) that no
    /// read waits on (its margin): after every player's, before warm-up.
    case scan = 3
    /// Warm-up (`preload`): only what no reader needs.
    case preload = 4

    /// The order: 0 most urgent.
    public var rank: Int {
        switch self {
        case .waiting: return 0
        case .waitedScan: return 1
        case .near: return 2
        case .far: return 3
        case .scan: return 4
        case .preload: return 5
        }
    }

    public static func < (a: FetchPriority, b: FetchPriority) -> Bool { a.rank < b.rank }

    public var description: String {
        switch self {
        case .waiting: return "waiting"
        case .waitedScan: return "waited scan"
        case .near: return "near"
        case .far: return "far"
        case .scan: return "scan"
        case .preload: return "preload"
        }
    }
}
