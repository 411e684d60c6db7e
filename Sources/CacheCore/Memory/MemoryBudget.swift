import Foundation

/// The one backpressure controller for the memory of arriving bytes: the pooled chunks
/// (`ChunkStorage`) that libcurl's bytes land in, once, and that the writer, the waiting reads
/// and their answers share by reference.
///
/// A chunk is counted in one or both of two shares, by who needs it:
/// - **queued**: from the moment a transfer takes it until the writer is done with it (its bytes
///   are on disk, or refused). Capped in all (`queued`, 4 MiB) and per transfer (`perTransfer`,
///   1 MiB); a transfer refused room pauses (the fetch thread goes on with the others) and its
///   `onRoom` runs once the queue is down to half of `queued` and its own part to half its share.
/// - **retained**: while reads hold it, waiting or answered and not yet replied. A waiting read
///   retains a chunk only if the share has room (`retained`, 16 MiB); one that cannot lets go
///   of what it holds and is answered from the writer's queue and the data file once its bytes
///   are all there. Answers that point at pending bytes, and bytes the disk refused (nothing
///   else holds them), are retained past the cap: they live for one reply.
///
/// Why this cannot deadlock: a transfer waits only for the queued share, and that share is
/// given back by the writer lanes as they finish their jobs, which never wait for a read; what
/// reads hold is counted in the other share and never keeps a transfer paused. A read waiting
/// for a transfer's later bytes therefore never holds that transfer back, however much it holds.
/// A chunk both queued and retained counts in both: the live chunks stay within the sum of the
/// two caps (plus one chunk: an empty queue takes any) and what was retained past the cap.
///
/// Leaf lock: taken from shard locks, chunk locks and completion threads; `onRoom` runs after it
/// is let go.
///
/// Map of this folder (`Memory/`): memory of arriving bytes, bounded.
/// - `MemoryBudget.swift` (this file): the one backpressure controller (queued and held shares).
/// - `ChunkStorage.swift`: pooled buffers bytes land in once, shared by reference.
/// - `StringBytes.swift`: a byte search over strings without Foundation (used by other modules).
/// Neighbours: a leaf; `Fetch/` takes chunks, `Entry/` (`PendingBytes`) and `Read/` (leases)
/// hold them, `Engine/` owns the budget.
final class MemoryBudget: Sendable {
    struct Limits: Sendable, Equatable {
        /// Bytes that may wait for the disk, in all and per transfer.
        var queued: Int64
        var perTransfer: Int64
        /// Bytes that reads may hold.
        var retained: Int64
    }

    struct Usage: Sendable, Equatable {
        var queued: Int64 = 0
        var retained: Int64 = 0
        /// The most ever queued and retained at once.
        var peakQueued: Int64 = 0
        var peakRetained: Int64 = 0
        /// Transfers waiting for room in the queue.
        var paused = 0
    }

    let limits: Limits
    private struct State {
        var usage = Usage()
        var queuedBy: [Int: Int64] = [:]
        /// Transfers refused room, with what resumes them.
        var paused: [Int: @Sendable () -> Void] = [:]
    }
    private let state = LockedValue(State())

    init(limits: Limits) { self.limits = limits }

    var usage: Usage {
        state.withLock { s in
            var u = s.usage
            u.paused = s.paused.count
            return u
        }
    }

    // MARK: Queued

    /// Takes `bytes` of the queued share for `transfer`, or, when that would exceed it, takes
    /// nothing, remembers `onRoom` and returns false: the transfer pauses until `onRoom` runs.
    func reserve(_ bytes: Int64, transfer: Int, onRoom: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { s in
            let mine = s.queuedBy[transfer] ?? 0
            // An empty queue takes any chunk, so a budget smaller than one chunk cannot stall.
            guard s.usage.queued == 0
                    || (s.usage.queued + bytes <= limits.queued && mine + bytes <= limits.perTransfer) else {
                s.paused[transfer] = onRoom
                return false
            }
            s.usage.queued += bytes
            s.queuedBy[transfer] = mine + bytes
            if !s.paused.isEmpty { s.paused[transfer] = nil }   // it goes on (a source that cannot pause asked again)
            s.usage.peakQueued = max(s.usage.peakQueued, s.usage.queued)
            return true
        }
    }

    /// Gives back queued bytes of `transfer` (the writer is done with them). A paused transfer
    /// resumes once the queue is down to half the budget and its own part to half its share:
    /// resuming at the first byte of room would pause it again at the next chunk.
    func release(_ bytes: Int64, transfer: Int) {
        guard bytes > 0 else { return }
        let wake: [@Sendable () -> Void] = state.withLock { s in
            s.usage.queued -= bytes
            let left = (s.queuedBy[transfer] ?? 0) - bytes
            s.queuedBy[transfer] = left > 0 ? left : nil
            var wake: [@Sendable () -> Void] = []
            if !s.paused.isEmpty, s.usage.queued <= limits.queued / 2 {
                for (t, resume) in s.paused where (s.queuedBy[t] ?? 0) <= limits.perTransfer / 2 {
                    s.paused[t] = nil
                    wake.append(resume)
                }
            }
            return wake
        }
        wake.forEach { $0() }
    }

    /// The transfer ended: it will not need resuming.
    func forget(transfer: Int) {
        state.withLock { _ = $0.paused.removeValue(forKey: transfer) }
    }

    // MARK: Retained

    /// Takes `bytes` of the retained share if they fit (always, `force`); false takes nothing.
    func retain(_ bytes: Int64, force: Bool) -> Bool {
        state.withLock { s in
            guard force || s.usage.retained + bytes <= limits.retained else { return false }
            s.usage.retained += bytes
            s.usage.peakRetained = max(s.usage.peakRetained, s.usage.retained)
            return true
        }
    }

    func unretain(_ bytes: Int64) {
        state.withLock { $0.usage.retained -= bytes }
    }
}
