import Foundation

/// The daemon's time: the one value that reads the clocks, and the scheduler whose timers run
/// by them. The executable's wiring gives `system` to every part (the engine through
/// `CacheConfiguration.engineClock`, the fetcher through `FetcherConfiguration.clock`); tests
/// give their own, so expiry, max age, deadlines, retries, rate limits and status ages follow a
/// clock the test moves, never the machine's.
///
/// Two clocks, because they answer two questions: the wall clock says *when* (what reads are
/// stamped with and entries aged by, validation times, the times on the status page, an S3
/// signature's date, a bandwidth timetable's hour), and is kept in the index across restarts;
/// the monotonic one says *how long* and *until when* (the deadlines of opens and reads, a read's
/// time to first byte, a scan's age, a retry's and a rate limit's wait), which a wall clock set
/// back or forward must not change.
public struct EngineClock: Sendable {
    /// Wall-clock time.
    public var wall: @Sendable () -> Date
    /// Now, on the monotonic clock (`monotonic`).
    public var readMonotonic: @Sendable () -> MonotonicInstant
    /// Where timers run (the sweeper's tick): the process's one timer thread, or a manual
    /// scheduler a test advances.
    public var scheduler: Scheduler

    public init(wall: @escaping @Sendable () -> Date, monotonic: @escaping @Sendable () -> MonotonicInstant,
                scheduler: Scheduler) {
        self.wall = wall
        self.readMonotonic = monotonic
        self.scheduler = scheduler
    }

    /// The machine's clocks and the process's timer thread: given by the executable's wiring.
    public static let system = EngineClock(wall: { Date() }, monotonic: machineMonotonic, scheduler: .shared)

    /// The machine's monotonic clock (since boot on Linux): the one place CacheCore reads it
    /// (`system`'s, and `Scheduler.shared`'s).
    @Sendable static func machineMonotonic() -> MonotonicInstant {
        MonotonicInstant(nanoseconds: DispatchTime.now().uptimeNanoseconds)
    }

    /// Now, on the monotonic clock: what deadlines and "how long" are measured on.
    public var monotonic: MonotonicInstant { readMonotonic() }
    /// Seconds since 1970 by the wall clock (how `EntryState` and the index keep times).
    public var now: Double { wall().timeIntervalSince1970 }
    /// Seconds of the monotonic clock, for the parts that count time in `Double` seconds (reader
    /// tempo, the tier state, eviction's pace).
    public var uptime: Double { monotonic.seconds }
}
