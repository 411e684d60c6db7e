import Foundation

/// The oldest evictable slices of the last scan, oldest first, which rounds of eviction take from
/// until it is used up or `maxAge` old (then they scan again). Slices that are not in it are
/// younger than all in it (new slices, slices read since) or were pinned at the scan; a candidate
/// read or pinned since is skipped when its turn comes. Keeps `limit` candidates at most.
/// Behind them, a second list taken from only as a last resort (`pop(lastResort:)`): the scan
/// share's slices (`ScanShare`), which a write for playback never takes.
/// Used under `lock`; its own leaf lock is for the compiler's sake (uncontended).
final class EvictionQueue: Sendable {
    private struct State {
        var candidates: [Evictor.Candidate] = []
        var next = 0
        /// Where the last-resort candidates begin in `candidates`.
        var lastResortStart = 0
        var scannedAt = -Double.infinity
    }
    private let state = LockedValue(State())
    let limit: Int
    let maxAge: Double

    init(limit: Int = 16 * Evictor.roundSlices, maxAge: Double = 30) {
        self.limit = limit
        self.maxAge = maxAge
    }

    var isEmpty: Bool { isEmpty(lastResort: false) }
    /// No candidate left to pop (with `lastResort`: of either list).
    func isEmpty(lastResort: Bool) -> Bool {
        state.withLock { $0.next >= (lastResort ? $0.candidates.count : $0.lastResortStart) }
    }
    var count: Int { state.withLock { max(0, $0.lastResortStart - $0.next) } }

    func isStale(now: Double) -> Bool { state.withLock { now - $0.scannedAt > maxAge } }

    /// Keeps the first `limit` of `scanned` (in the order given: oldest first), and behind them
    /// the first `limit` of `lastResort`.
    func refill(_ scanned: [Evictor.Candidate], lastResort: [Evictor.Candidate] = [], at now: Double) {
        let kept = Array(scanned.prefix(limit))
        let behind = Array(lastResort.prefix(limit))
        state.withLock {
            $0.candidates = kept + behind
            $0.lastResortStart = kept.count
            $0.next = 0
            $0.scannedAt = now
        }
    }

    /// The next candidate; past the first list only with `lastResort`.
    func pop(lastResort: Bool = false) -> Evictor.Candidate? {
        state.withLock {
            guard $0.next < (lastResort ? $0.candidates.count : $0.lastResortStart) else { return nil }
            $0.next += 1
            return $0.candidates[$0.next - 1]
        }
    }

    func clear() {
        state.withLock {
            $0.candidates = []
            $0.next = 0
            $0.lastResortStart = 0
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
