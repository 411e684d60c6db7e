/// Who reads: the class an open file's reader falls in, by the process that opened it (the mount
/// asks the kernel which one; see FuseMount's `ReaderClassTable`), and what that class costs the
/// link.
///
/// Why: a media server's library scan probes every film (`ffprobe`, `mediainfo`), each probe
/// reading a few dozen KiB. Read-ahead made for players turns every probe into megabytes from the
/// origin, and the probes' fetches, if they ranked as a player's, would take a playing film's link.
/// So:
/// - `scanner`: read-ahead is a small fixed margin (`scanMargin`) past what it asks; its fetches,
///   even those it waits on, rank `.scan`, below every player's read-ahead.
/// - `player`: a reader known to read on (players, copies): read-ahead as it always was.
/// - `unknown`: a process nobody listed. It *earns* read-ahead: none past its own requests until
///   it made `earnAfter` reads in a row that continue each other, then as a player's. A probe tool
///   nobody listed still costs about what it reads; `cat` pays a round trip or two at its start.
/// - `background`: warm-up (`preload`) and configured extractors: its fetches rank `.preload`,
///   taking only what the link has left.
public enum ReaderClass: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    case player, unknown, scanner, background

    /// A scanner's read-ahead past each request: enough to join a probe's next small read (a
    /// header a few bytes past a 32 KiB buffer) without another round trip, small beside the
    /// 32 KiB reads a probe makes (at most 1.5x what it reads).
    public static let scanMargin: Int64 = 16 << 10
    /// Reads in a row, each continuing the one before, after which an unknown reader gets
    /// read-ahead.
    public static let earnAfter = 2

    /// The class of its fetches, whether or not a read waits on them; nil: as its pace says
    /// (`.waiting` while a read waits, else near or far read-ahead).
    public var fixedFetchClass: FetchPriority? {
        switch self {
        case .scanner: return .scan
        case .background: return .preload
        case .player, .unknown: return nil
        }
    }

    public var description: String { rawValue }
}
