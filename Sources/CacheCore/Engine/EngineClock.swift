import Foundation

/// The engine's time: the one place in CacheCore that reads a clock. Tests inject their own
/// (`CacheConfiguration.engineClock`, or its wall clock alone through `clock`), so expiry,
/// max age, deadlines and status ages follow a clock the test moves, never the machine's.
///
/// Two clocks, because they answer two questions: the wall clock says *when* (what reads are
/// stamped with and entries aged by, deadlines of opens and reads, validation times, the times on
/// the status page), and is kept in the index across restarts; the monotonic one says *how long*
/// (a read's time to first byte, a scan's age), which a wall clock set back or forward must not
/// change.
public struct EngineClock: Sendable {
    /// Wall-clock time.
    public var wall: @Sendable () -> Date
    /// Nanoseconds of a monotonic clock (since boot on Linux).
    public var uptimeNanoseconds: @Sendable () -> UInt64

    public init(wall: @escaping @Sendable () -> Date, uptimeNanoseconds: @escaping @Sendable () -> UInt64) {
        self.wall = wall
        self.uptimeNanoseconds = uptimeNanoseconds
    }

    /// The machine's clocks.
    public static let system = EngineClock(wall: { Date() }, uptimeNanoseconds: { DispatchTime.now().uptimeNanoseconds })

    /// Seconds since 1970 by the wall clock (how `EntryState` and the index keep times).
    public var now: Double { wall().timeIntervalSince1970 }
    /// Seconds of the monotonic clock.
    public var uptime: Double { Double(uptimeNanoseconds()) / 1e9 }
}
