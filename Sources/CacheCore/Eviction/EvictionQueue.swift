import Foundation

/// The oldest evictable slices of the last scan, oldest first, which rounds of eviction take from
/// until it is used up or `maxAge` old (then they scan again). Slices that are not in it are
/// younger than all in it (new slices, slices read since) or were pinned at the scan; a candidate
/// read or pinned since is skipped when its turn comes. Keeps `limit` candidates at most.
/// Used under `lock`; its own leaf lock is for the compiler's sake (uncontended).
final class EvictionQueue: Sendable {
    private struct State {
        var candidates: [Evictor.Candidate] = []
        var next = 0
        var scannedAt = -Double.infinity
    }
    private let state = LockedValue(State())
    let limit: Int
    let maxAge: Double

    init(limit: Int = 16 * Evictor.roundSlices, maxAge: Double = 30) {
        self.limit = limit
        self.maxAge = maxAge
    }

    var isEmpty: Bool { state.withLock { $0.next >= $0.candidates.count } }
    var count: Int { state.withLock { $0.candidates.count - $0.next } }

    func isStale(now: Double) -> Bool { state.withLock { now - $0.scannedAt > maxAge } }

    /// Keeps the oldest `limit` of `scanned` (oldest first).
    func refill(_ scanned: [Evictor.Candidate], at now: Double) {
        let kept = Array(scanned.prefix(limit))
        state.withLock {
            $0.candidates = kept
            $0.next = 0
            $0.scannedAt = now
        }
    }

    func pop() -> Evictor.Candidate? {
        state.withLock {
            guard $0.next < $0.candidates.count else { return nil }
            $0.next += 1
            return $0.candidates[$0.next - 1]
        }
    }

    func clear() {
        state.withLock {
            $0.candidates = []
            $0.next = 0
        }
    }
}

/// Bytes that transfers may write before the cap and the free space must be looked at again.
final class SpaceAllowance: Sendable {
    private let bytes = LockedValue<Int64>(0)

    /// Takes `n` bytes of the allowance, if that much is left.
    func take(_ n: Int64) -> Bool {
        bytes.withLock { bytes in
            guard bytes >= n else { return false }
            bytes -= n
            return true
        }
    }

    func refill(_ n: Int64) {
        bytes.withLock { $0 = max(0, n) }
    }
}
