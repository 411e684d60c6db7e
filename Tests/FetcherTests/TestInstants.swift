import CacheCore

extension MonotonicInstant {
    /// `nanoseconds` after the clock's zero: the instants the pure admission and scheduling
    /// tests pass as their clock.
    static func at(_ nanoseconds: UInt64) -> MonotonicInstant { MonotonicInstant(nanoseconds: nanoseconds) }
}
