import CoreTypes

/// When a transfer last warned that it could not cache (a full disk, the cap full of pinned or
/// read bytes): every transfer of the engine meets the same full disk, so once a minute among
/// all of them is enough (`EntrySink`'s writer asks).
///
/// Threads: a transfer's writer (a job of the writer lane); a leaf lock.
final class NoRoomWarnings: Sendable {
    /// Seconds between two warnings.
    static let interval = 60.0
    private let last = LockedValue<Double?>(nil)

    /// True at most once a `interval`: whether a full disk is worth a warning at `now` (seconds of
    /// the engine's wall clock).
    func shouldWarn(now: Double) -> Bool {
        last.withLock { last in
            if let last, now - last < Self.interval { return false }
            last = now
            return true
        }
    }
}
