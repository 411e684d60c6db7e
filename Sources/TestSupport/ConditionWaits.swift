import Foundation

extension NSCondition {
    /// True once `condition` holds, looked at again each time `stamp` (read under this lock: a
    /// count of the changes its owner makes, each followed by a `broadcast`) moves; false if it
    /// still does not after `timeout`, which bounds a hang and is never a measurement.
    /// `condition` runs without this lock, so it may take the locks of the code under test.
    /// The one loop behind `OriginServer`'s, `RecordedLog`'s and the fake backends' waits.
    public func waitForChanges(of stamp: () -> Int, timeout: TimeInterval,
                               until condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var seen = withLock { stamp() }
        while try !condition() {
            lock()
            while stamp() == seen {
                guard wait(until: deadline) else {
                    unlock()
                    return try condition()
                }
            }
            seen = stamp()
            unlock()
        }
        return true
    }
}
