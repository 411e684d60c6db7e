/// How much a transfer matters to the readers right now, most urgent first.
///
/// Every byte range the engine asks an origin for has a class. A read that somebody is waiting on
/// (a FUSE read, a proxy response's next bytes) always goes first: on a link that is shared by all
/// connections, under `--bwlimit` and within `--max-connections`, transfers of the lower classes
/// yield to it (the fetcher pauses them) as soon as such a read is behind, and go on once it is
/// not. Without this, the parallel streams that fill a long fat link starve the playhead on a thin
/// one: a player's next bytes queue behind megabytes of read-ahead it will not need for a minute.
public enum FetchPriority: Int, Sendable, Comparable, CaseIterable, Codable, CustomStringConvertible {
    /// A read is waiting on bytes this transfer delivers.
    case waiting = 0
    /// Read-ahead of a reader that reads as fast as the bytes come (`cat`, `cp`, a copy): it will
    /// wait on these bytes within moments, so its streams fill the link.
    case near = 1
    /// Read-ahead of a reader that paces itself (a player), or of one not yet known: wanted, but
    /// seconds from now.
    case far = 2
    /// A scanner's fetches (`ReaderClass.scanner`: a media server probing its library), even
    /// those it waits on: after every player's, before warm-up.
    case scan = 3
    /// Warm-up (`preload`): only what no reader needs.
    case preload = 4

    public static func < (a: FetchPriority, b: FetchPriority) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .waiting: return "waiting"
        case .near: return "near"
        case .far: return "far"
        case .scan: return "scan"
        case .preload: return "preload"
        }
    }
}
