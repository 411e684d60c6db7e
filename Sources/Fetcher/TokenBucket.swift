import CacheCore
import Dispatch

/// `--bwlimit`: one budget of origin bytes per second shared by every transfer of the multi loop.
///
/// Pure state with the clock passed in (uptime nanoseconds), so tests drive it without waiting.
/// Bytes pass while a token is left, and take their count: libcurl hands over whatever it read
/// (up to one receive buffer), so the bucket may go into debt by one chunk, and the transfers
/// then wait until the debt is paid. Over any stretch the rate holds to within one burst.
struct TokenBucket: Sendable, Equatable {
    let bytesPerSecond: Double
    /// Most tokens saved up while idle: 50 ms at the rate, at least 16 KiB.
    let burst: Double
    private(set) var tokens: Double
    private var refilledAt: UInt64

    init(bytesPerSecond: Int64, now: UInt64) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        burst = max(Double(16 << 10), self.bytesPerSecond / 20)
        tokens = burst
        refilledAt = now
    }

    mutating func refill(now: UInt64) {
        guard now > refilledAt else { return }
        tokens = min(burst, tokens + Double(now - refilledAt) / 1e9 * bytesPerSecond)
        refilledAt = now
    }

    /// Whether `count` bytes may pass now (then they are taken).
    mutating func take(_ count: Int, now: UInt64) -> Bool {
        refill(now: now)
        guard tokens > 0 else { return false }
        tokens -= Double(count)
        return true
    }

    /// Nanoseconds from `now` until a token is left (0: one is left now).
    func wait(now: UInt64) -> UInt64 {
        var b = self
        b.refill(now: now)
        return b.tokens > 0 ? 0 : UInt64((-b.tokens + 1) / bytesPerSecond * 1e9)
    }
}

/// The multi loop's side of `--bwlimit`: the bucket, and the transfers it paused until a token is
/// left again. The higher classes go first: while a transfer of a higher class waits for a token,
/// a lower one gets none, and tokens go to the highest class waiting. Under a limit, the bytes a
/// reader waits for thus never share it with read-ahead. Loop thread only (the write callbacks
/// run there too).
final class Throttle {
    private var bucket: TokenBucket
    private var paused: [Int: FetchPriority] = [:]

    init(bytesPerSecond: Int64) {
        bucket = TokenBucket(bytesPerSecond: bytesPerSecond, now: DispatchTime.now().uptimeNanoseconds)
    }

    /// Whether `count` bytes of `transfer` pass now; if not, the transfer pauses.
    func admit(_ count: Int, transfer: Int, priority: FetchPriority) -> Bool {
        if let first = paused.values.min(), first < priority {
            paused[transfer] = priority
            return false
        }
        if bucket.take(count, now: DispatchTime.now().uptimeNanoseconds) {
            paused[transfer] = nil
            return true
        }
        paused[transfer] = priority
        return false
    }

    /// The paused transfers of the highest class waiting, once a token is left (they are then no
    /// longer paused here).
    func due(now: UInt64) -> [Int] {
        guard let first = paused.values.min(), bucket.wait(now: now) == 0 else { return [] }
        let ids = paused.filter { $0.value == first }.map(\.key)
        for id in ids { paused[id] = nil }
        return ids
    }

    /// The transfer ended or moved on: it waits for no token.
    func forget(_ transfer: Int) { paused[transfer] = nil }

    /// Nanoseconds until paused transfers are due; nil when none is paused.
    func wait(now: UInt64) -> UInt64? { paused.isEmpty ? nil : bucket.wait(now: now) }
}
