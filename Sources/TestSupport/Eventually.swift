import Foundation

/// Waits until `condition` holds, for at most `timeout` seconds; false if it never did.
///
/// The one way tests wait for a state change they cannot be told about: another process (a
/// daemon, nginx, the kernel's mount table), a background refresh, a socket's close. Where the
/// code under test can say "done" (a completion, a semaphore, a continuation), tests wait on that
/// instead. The condition is checked at once, then after pauses that start at a millisecond and
/// grow to 20 ms, so a condition that holds soon costs little and one that takes long does not
/// spin. The timeout is a bound on a hang, never a measurement: nothing asserts how long it took.
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
