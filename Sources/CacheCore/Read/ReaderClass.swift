/// Who reads: the class an open file's reader falls in, by the process that opened it (the mount
/// asks the kernel which one; see FuseMount's `ReaderClassTable`), and what that class costs the
/// link.
///
/// Why: a media server's library scan probes every film (`ffprobe`, `mediainfo`), each probe
/// reading a few dozen KiB. Read-ahead made for players turns every probe into megabytes from the
/// origin, and the probes' fetches, if they ranked as a player's, would take a playing film's link.
/// So:
/// - `scanner`: read-ahead is a small fixed margin (`scanMargin`) past what it asks, none past a
///   read the cache answers whole (`EngineCore.scannerMargin`); the slices it reads go to the
///   cap's scan share (`ScanShare`); its fetches
///   rank `.scan`, below every player's read-ahead, and those it waits on `.waitedScan`: after
///   every player's waiting read, before read-ahead (behind a copy's streams a probe would wait
///   for the whole copy).
/// - `player`: a reader known to read on (players, copies): read-ahead as it always was. How it
///   reads decides the rest (`ReaderTempo`): one that reads as fast as it is given for long (a
///   media server's trickplay job is `ffmpeg` too) is bulk, and its fetches yield like warm-up's.
/// - `unknown`: a process nobody listed. It *earns* read-ahead: none past its own requests until
///   it made `earnAfter` reads in a row that continue each other, then as a player's. A probe tool
///   nobody listed still costs about what it reads; a program reading big blocks from the start
///   earns it with its first read (`earnsAtOnce(firstRead:)`), one reading small ones pays a
///   round trip or two at its start.
/// - `background`: warm-up (`preload`) and configured extractors: its fetches rank `.preload`,
///   taking only what the link has left. Through the mount (a thumbnailer seeking to one frame)
///   it earns read-ahead as an unknown reader does; the engine's own warm-up has it at once.
public enum ReaderClass: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    case player, unknown, scanner, background

    /// A scanner's read-ahead past each request: enough to join a probe's next small read (a
    /// header a few bytes past a 32 KiB buffer) without another round trip, small beside the
    /// 32 KiB reads a probe makes (at most 1.5x what it reads).
    public static let scanMargin: Int64 = 16 << 10
    /// Reads in a row, each continuing the one before, after which an unknown reader gets
    /// read-ahead.
    public static let earnAfter = 2
    /// A first read from byte 0 at least this long earns read-ahead at once. Measured through
    /// the mount as root (kernel read-ahead 1 MiB), the first request of each reader: 992 KiB
    /// for one reading 1 MiB blocks (`dd bs=1M`, the datapath benchmark), 256 KiB for
    /// `dd bs=128k`; 64 KiB for `ffprobe` and `ffmpegthumbnailer`, 128 KiB for `mediainfo` (the
    /// kernel's initial read-ahead for their small reads). Half a MiB lies between.
    public static let streamingFirstRead: Int64 = 512 << 10

    /// Whether a reader that earns read-ahead earns it with its first read: one from byte 0 at
    /// least `streamingFirstRead` long (a copy or `cat` reading in big blocks), so it fills the
    /// link from its first round trip, while a probe's small first read earns nothing.
    public static func earnsAtOnce(firstRead: Range<Int64>) -> Bool {
        firstRead.lowerBound == 0 && Int64(firstRead.count) >= streamingFirstRead
    }

    /// Whether a reader has read-ahead after a read that does not continue its last one (its
    /// first, or a seek): what it had earned, except on an origin whose ranges are unreliable
    /// (`RangeReliability`): there a read that starts anew asks only for its own bytes, and the
    /// reader earns read-ahead again by reading on (`earnAfter`), so a random read costs what it
    /// reads and a 200 to it (used from near the start) ends at its end. A first read a streaming
    /// reader makes (`earnsAtOnce`) earns it at once either way.
    public static func earnedAfterRestart(earned: Bool, first: Bool, request: Range<Int64>, rangesUnreliable: Bool) -> Bool {
        if first && earnsAtOnce(firstRead: request) { return true }
        return earned && !rangesUnreliable
    }

    /// Whether a reader of this class, reading through `door`, has read-ahead from its open on
    /// (else it earns it: `earnAfter`, `earnsAtOnce`). A player has; an unknown reader earns it;
    /// a scanner never gets more than `scanMargin`. A background reader through the mount (a
    /// thumbnailer: a header, then a jump to one frame) earns it, so it costs about what it
    /// reads; the engine's own warm-up (`preload`, its ranges read in chunks it wants fetched
    /// whole) has it at once.
    public func readsAheadFromOpen(door: ReadDoor) -> Bool {
        switch self {
        case .player: return true
        case .unknown, .scanner: return false
        case .background: return door != .fuse
        }
    }

    /// The class of its fetches while none of its reads waits on them (then
    /// `waitedFetchClass`); nil: as its pace says (near or far read-ahead).
    public var fixedFetchClass: FetchPriority? {
        switch self {
        case .scanner: return .scan
        case .background: return .preload
        case .player, .unknown: return nil
        }
    }

    /// The class a fetch takes while a read of this class waits on it (when that beats the
    /// fetch's own); nil: its waits change no fetch's class (warm-up takes what is left even
    /// while it waits).
    public var waitedFetchClass: FetchPriority? {
        switch self {
        case .player, .unknown: return .waiting
        case .scanner: return .waitedScan
        case .background: return nil
        }
    }

    public var description: String { rawValue }
}
