/// A point on the monotonic clock, in nanoseconds (since boot on Linux): what deadlines, retry
/// times and "how long" are measured on, since a wall clock set back or forward must not move
/// them. The wall clock (`Date`) is only for what users see and what the index keeps across
/// restarts. As NIO's `NIODeadline`, with the standard library's `Duration` as its `TimeAmount`;
/// CacheCore may not import NIO, so this is ours.
///
/// Read from `EngineClock.monotonic` (the one place that reads the clock; tests move theirs).
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds of the monotonic clock.
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// Seconds of the monotonic clock (what `Scheduler` and the tier state count in).
    public var seconds: Double { Double(nanoseconds) / 1e9 }

    public static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `amount` later (a negative one is clamped at this instant: nothing is due before now by it).
    public static func + (instant: Self, amount: Duration) -> Self {
        Self(nanoseconds: instant.nanoseconds &+ UInt64(max(0, amount.nanoseconds)))
    }

    /// How long from `b` to `a` (zero if `a` is not later).
    public static func - (a: Self, b: Self) -> Duration {
        .nanoseconds(a.nanoseconds > b.nanoseconds ? Int64(clamping: a.nanoseconds - b.nanoseconds) : 0)
    }

    public var description: String { "\(seconds)s" }
}

extension MonotonicInstant {
    /// `amount` earlier (clamped at the clock's zero).
    public static func - (instant: Self, amount: Duration) -> Self {
        Self(nanoseconds: instant.nanoseconds - min(instant.nanoseconds, UInt64(max(0, amount.nanoseconds))))
    }
}

extension Duration {
    /// This duration in seconds, for the calls that take a `TimeInterval` (a condition's wait).
    public var timeInterval: Double { Double(nanoseconds) / 1e9 }

    /// This duration in whole nanoseconds (clamped to `Int64`).
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return Int64(clamping: Int128(seconds) * 1_000_000_000 + Int128(attoseconds / 1_000_000_000))
    }
}
