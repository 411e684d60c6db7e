import CoreTypes

/// Who reads: the class an open file's reader falls in, by the process that opened it (the mount
/// asks the kernel which one; see FuseMount's `ReaderClassTable`), and what that class costs the
/// link.
///
/// Why: a media server's library scan probes every film (`ffprobe`, `mediainfo`) and makes a
/// thumbnail of each, reading a few dozen KiB to a few MiB per film. Read-ahead made for players
/// turns every one into megabytes from the origin, and their fetches, if they ranked as a
/// player's, would take a playing film's link. So every reader but a player pays for what it
/// reads: its read-ahead is what it earned by reading (`EarnedReadAhead`: none with its first
/// read, then at most half of what it read since its last seek, doubling while it reads on), and:
/// - `scanner`: none ahead of a read the cache answers whole (`Reader.scannerWindow`: a
///   re-scan asks nothing); the slices it reads go to the cap's scan share (`ScanShare`); its
///   fetches rank `.scan`, below every player's read-ahead, and those it waits on `.waitedScan`:
///   after every player's waiting read, before read-ahead (behind a copy's streams a probe would
///   wait for the whole copy).
/// - `player`: a reader known to read on (players, copies): read-ahead from its open, as it
///   always was. How it reads decides the rest (`ReaderTempo`): one that reads as fast as it is
///   given for long (a media server's trickplay job is `ffmpeg` too) is bulk, and its fetches
///   yield like warm-up's.
/// - `unknown`: a process nobody listed: fetches as a player's, read-ahead as earned.
/// - `background`: warm-up (`preload`) and thumbnailers: its fetches rank `.preload`, taking only
///   what the link has left. Through the mount (a thumbnailer: a header, then a jump to one
///   frame) its read-ahead is earned; the engine's own warm-up, which says where it stops, has
///   it from its open.
public enum ReaderClass: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    case player, unknown, scanner, background

    /// Reads in a row, each continuing the one before, after which a player that lost its
    /// read-ahead at a seek (ranges unreliable: `earnedAfterRestart`) has it again.
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
    /// (else it earns it by reading: `EarnedReadAhead`). A player has. So has the engine's own
    /// warm-up (`preload`, directly or through a daemon's proxy; a pin's warm-up is through the
    /// mount): it reads chunks of ranges it wants fetched whole and says where it stops, so its
    /// read-ahead never runs past what it reads. Everyone else through the mount (a probe, a
    /// thumbnailer, a program nobody listed) pays for what it reads.
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

extension ReaderClass {
    /// Its place in `allCases`: where per-class counts keep it (`UnreadFetched`, `CacheMetrics`).
    package var index: Int { Self.allCases.firstIndex(of: self)! }
}
