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
        EngineClock(wall: { self.now }, uptimeNanoseconds: EngineClock.system.uptimeNanoseconds,
                    scheduler: EngineClock.system.scheduler)
    }
}
