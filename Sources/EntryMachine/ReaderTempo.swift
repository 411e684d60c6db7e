import CoreTypes

/// Watched or bulk: how a reader its name calls a player really reads, from the times of its
/// reads alone. Pure: the engine tells it when each read was asked and answered (uptime seconds)
/// and asks for the verdict.
///
/// Why: media servers run the same program for watching and for chores. Jellyfin's trickplay,
/// chapter images and keyframe extraction are `ffmpeg` reading whole films as fast as the link
/// allows, and by name (`ReaderClassTable`) they are players: two of them beside a watched film
/// on a thin link took two thirds of it, and the film stalled. A bulk reader's fetches rank like
/// warm-up's (`bulkFetchClass`), below every watched player's, and its waits promote nothing.
///
/// The signal is idle time: the share of the time in which the reader had no read outstanding
/// (between a read's answer and its next request). A player that is ahead idles whenever its
/// buffer is full; a bulk reader asks again as soon as it is answered, and its consumption
/// follows the link. The kernel's async read-ahead does not blur this: it asks for the next
/// window when the program reaches the current one, so a player's idle time still shows, once
/// per window, and a bulk reader still has a read outstanding nearly all the time. The bitrate
/// is not known, so "faster than real time" is judged by what can be seen: a reader that never
/// idles keeps asking for more than it is given.
///
/// A starving watched film waits on its reads too, and looks like a bulk reader while it waits.
/// What tells them apart is what came before: time it spent keeping pace is credit (`maxCredit`
/// at most) that its waiting spends first. So:
/// - Time is cut into windows of at least `window` seconds (closed at the first read after one
///   ends). A window in which the reader idled at least `idleShare` of the time kept pace: the
///   reader is watched, its busy stretch ends, and the window's length is credit.
/// - A window in which it did not spends credit; what credit does not cover adds to its busy
///   stretch, and a busy stretch of `bulkAfter` seconds makes it bulk (until a window keeps pace
///   again). A reader that just opened has no credit: a chore is judged within `bulkAfter`
///   seconds, while a film that opens beside bulk readers gets the link and keeps pace at once.
/// The verdict holds across seeks: it is about the program, not about one run of its reads.
public struct ReaderTempo: Sendable, Equatable {
    public enum Verdict: String, Sendable, Equatable, CustomStringConvertible {
        /// Keeps pace with something (a bitrate, a person), or waits while it has been keeping pace.
        case watched
        /// Has read as fast as it was given for `bulkAfter` seconds beyond its credit.
        case bulk
        public var description: String { rawValue }
    }

    /// Seconds a window lasts at least.
    public static let window = 2.0
    /// A window in which the reader idled this share of the time kept pace.
    public static let idleShare = 0.05
    /// Seconds of reading without keeping pace (beyond credit) after which a reader is bulk.
    public static let bulkAfter = 6.0
    /// The most credit time spent keeping pace earns: a watched film may starve this long before
    /// its waiting counts against it.
    public static let maxCredit = 30.0
    /// The class of a bulk reader's fetches: as warm-up's, they take what the others leave.
    public static let bulkFetchClass = FetchPriority.preload

    public private(set) var verdict: Verdict = .watched
    /// Reads asked and not answered yet.
    public private(set) var outstanding = 0
    /// When the last outstanding read was answered (the reader has been idle since), while none is.
    private var idleFrom: Double?
    private var windowStart: Double
    private var windowIdle = 0.0
    public private(set) var credit = 0.0
    /// Seconds of its current stretch of windows that neither kept pace nor were covered by credit.
    public private(set) var busy = 0.0

    public init(now: Double) {
        windowStart = now
        idleFrom = now
    }

    public var isBulk: Bool { verdict == .bulk }

    /// A read was asked. Returns the verdict this read is made under.
    @discardableResult
    public mutating func asked(now: Double) -> Verdict {
        countIdle(until: now)
        idleFrom = nil
        outstanding += 1
        if now - windowStart >= Self.window { closeWindow(now: now) }
        return verdict
    }

    /// A read was answered (with bytes or an error).
    public mutating func answered(now: Double) {
        outstanding = max(0, outstanding - 1)
        if outstanding == 0 { idleFrom = now }
    }

    private mutating func countIdle(until now: Double) {
        guard let from = idleFrom else { return }
        windowIdle += max(0, now - max(from, windowStart))
        idleFrom = now
    }

    private mutating func closeWindow(now: Double) {
        let length = now - windowStart
        if windowIdle >= Self.idleShare * length {
            verdict = .watched
            busy = 0
            credit = min(Self.maxCredit, credit + length)
        } else {
            let covered = min(credit, length)
            credit -= covered
            busy += length - covered
            if busy >= Self.bulkAfter { verdict = .bulk }
        }
        windowStart = now
        windowIdle = 0
    }
}
