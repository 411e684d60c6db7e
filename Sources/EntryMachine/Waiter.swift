import CoreTypes

/// A read waiting for bytes to land, as the entry machine keeps it (`EntryReads.waiters`): whose
/// it is, which bytes of which version it wants, until when, and the class its wait gives the
/// transfers it waits on. A class, as one waiting read is one thing that the engine answers when
/// the machine hands it back (woken, failed, timed out, its reader gone).
///
/// How it is answered and the bytes that reached it meanwhile are `reply`'s: the engine makes it
/// (CacheCore's `WaitingRead`: the reader's data file, the completion, the chunks it holds in the
/// memory budget's retained share) and fills it as bytes arrive. The machine reads only which
/// bytes it has (`filled`), to tell whether it is complete and what it still needs fetched.
package final class Waiter {
    package let reader: Int
    package let range: Range<Int64>
    /// The version the read belongs to: its bytes come from this generation or not at all.
    package let generation: Int64
    /// When it times out, on the monotonic clock: a wall clock set back or forward must not
    /// move it (the sweeper's tick compares it with the engine clock's `monotonic`).
    package let deadline: MonotonicInstant
    /// When it began waiting, on the same clock: how long the oldest waiting read of a transfer
    /// has waited tells the fetcher whether read-ahead must yield to it.
    package let since: MonotonicInstant
    /// The class its wait gives the transfers it waits on (`ReaderClass.waitedFetchClass`):
    /// `.waiting` for a player's, `.waitedScan` for a scanner's; nil for a warm-up's, whose
    /// transfer keeps the lowest class.
    package internal(set) var waitClass: FetchPriority? = .waiting
    /// Its reader's class: the transfers it starts when planned again are that class's.
    package internal(set) var readerClass: ReaderClass = .player
    package internal(set) var replans = 0
    /// How it is answered, and the bytes that reached it: the engine's.
    package let reply: any WaiterReply

    init(reader: Int, range: Range<Int64>, generation: Int64, deadline: MonotonicInstant, since: MonotonicInstant, reply: any WaiterReply) {
        self.reader = reader
        self.range = range
        self.generation = generation
        self.deadline = deadline
        self.since = since
        self.reply = reply
    }

    /// Bytes of `range` that reached it in memory while it waited.
    package var filled: RangeSet { reply.filled }

    /// Whether every byte of `range` (clipped to `within`) is here, on disk (`cached`) or queued
    /// for the writer (`pending`).
    package func isComplete(within clip: Range<Int64>, cached: RangeSet, pending: RangeSet) -> Bool {
        let wanted = range.clamped(to: clip)
        for r in reply.filled.gaps(in: wanted) where !cached.contains(r) {
            for g in cached.gaps(in: r) where !pending.contains(g) { return false }
        }
        return true
    }
}

/// What the engine keeps of a waiting read beside the machine's `Waiter`: how it is answered and
/// the bytes that reached it. The machine asks only which bytes those are.
package protocol WaiterReply: AnyObject {
    /// Bytes of the read's range it holds (arrived while it waited), as ranges.
    var filled: RangeSet { get }
}
