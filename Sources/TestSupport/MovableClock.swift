import CacheCore
import Foundation

/// A wall clock that moves only when a test tells it to (the monotonic one is the machine's):
/// what the engine shows of time follows it, so a test neither waits nor allows for the clock.
public final class MovableClock: @unchecked Sendable {
    private let lock = NSLock()
    private var date: Date

    /// - Parameter start: where it stands until moved (a fixed date by default: nothing depends on
    ///   the machine's clock).
    public init(start: Date = Date(timeIntervalSince1970: 1_900_000_000)) { date = start }

    public var now: Date { lock.withLock { date } }

    public func advance(_ seconds: TimeInterval) { lock.withLock { date += seconds } }

    public var engineClock: EngineClock {
        EngineClock(wall: { self.now }, monotonic: EngineClock.system.readMonotonic, scheduler: EngineClock.system.scheduler)
    }
}

extension EngineClock {
    /// The machine's clocks and the process's timer thread, for a test whose outcome no clock
    /// can change (nothing in it expires, ages or waits for a deadline). A test of time gives its
    /// own instead: a `MovableClock`'s, or a manual `Scheduler`'s. Tests only: the daemon's parts
    /// get `EngineClock.system` from the executable's wiring and nowhere else.
    public static var realTime: EngineClock { .system }
}

extension EngineClock {
    /// Time that moves only with `scheduler.advance(by:)` (a `Scheduler.manual()`): its monotonic
    /// clock is the scheduler's, its wall clock `wallStart` plus as much. The engine's timers (the
    /// sweeper's tick, which fails late reads and opens) run on the test's thread as it advances,
    /// each at its own time; a scheduler never advanced is a clock that stands still.
    public static func manual(_ scheduler: Scheduler, wallStart: Date = Date(timeIntervalSince1970: 1_900_000_000)) -> EngineClock {
        let origin = scheduler.now
        return EngineClock(wall: { wallStart + (scheduler.now - origin).timeInterval }, monotonic: { scheduler.now },
                           scheduler: scheduler)
    }
}
