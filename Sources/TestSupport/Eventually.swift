import Foundation

/// Waits until `condition` holds, for at most `timeout` seconds, by looking again and again;
/// false if it never did.
///
/// Only for a state nothing can tell a waiter about, each listed with its reason in
/// docs/development.md: the kernel's TCP counters of acknowledged bytes (`OriginServerWireTests`),
/// and the fallbacks of the event waits on a system without pidfd_open, inotify or /proc
/// (`ProcessExit`, `FileEvents`, `MountTableEvents`). Everything else waits on an event: a
/// completion, a semaphore, a condition the code under test signals (`OriginServer.wait`,
/// `RecordedLog.wait`, `CacheEngine.waitUntilCached`), or what the kernel reports about another
/// process.
/// The condition is checked at once, then after pauses that start at a millisecond and grow to
/// 20 ms. The timeout is a bound on a hang, never a measurement: nothing asserts how long it took.
@discardableResult
public func eventually(timeout: TimeInterval = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    var pause: useconds_t = 1_000
    while try !condition() {
        guard Date() < deadline else { return false }
        usleep(pause)
        pause = min(pause * 2, 20_000)
    }
    return true
}
