import CoreTypes

/// Time passes for an entry: the sweeper's tick (4 Hz) fails the reads past their deadline, and
/// remembers each for `EntryReads.retryWindow`, so that the kernel's immediate retry of a failed
/// read-ahead (the same reader, the same bytes) fails at once instead of waiting `readTimeout`
/// again (`readRequested`'s `.timedOut`).
extension EntryStateMachine {
    /// Takes out the waiters whose deadline is `now` or earlier, in the order they came, and
    /// notes them as timed out at `now` (forgetting those noted more than `retryWindow` ago).
    /// The engine fails them (`timeout`), unpins their ranges and notes the error. `now`: the
    /// engine clock's monotonic time, which deadlines are on.
    package mutating func tick(now: MonotonicInstant) -> [Waiter] {
        guard reads.waiters.contains(where: { $0.deadline <= now }) else { return [] }
        let late = reads.waiters.filter { $0.deadline <= now }
        reads.waiters.removeAll { $0.deadline <= now }
        reads.timedOut.removeAll { now - $0.at > EntryReads.retryWindow }
        for w in late { reads.timedOut.append(EntryReads.TimedOut(reader: w.reader, range: w.range, at: now)) }
        return late
    }
}
