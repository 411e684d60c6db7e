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
/// left again. Loop thread only (the write callbacks run there too); the clock is passed in, so
/// tests drive it without waiting.
///
/// Tokens go in order: the higher class first, and within a class the older transfer (a lower
/// id). While a transfer waits for a token, one after it gets none, and when a token is left the
/// first one waiting gets it. So under a limit the bytes a reader waits for never share it with
/// read-ahead, and read-ahead arrives nearest first (the planner starts a reader's streams in the
/// order of their offsets), as one stream would bring it, instead of eighteen streams each
/// crawling at an eighteenth of the rate while the player catches up with the first. No token is
/// left unused: a transfer with nothing to receive asks for none, and the next one gets them.
final class Throttle {
    private var bucket: TokenBucket
    /// The transfers waiting for a token, by their class now (`reclass` keeps it current).
    private var paused: [Int: FetchPriority] = [:]

    init(bytesPerSecond: Int64, now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        bucket = TokenBucket(bytesPerSecond: bytesPerSecond, now: now)
    }

    /// Whether `count` bytes of `transfer` pass now; if not, the transfer pauses.
    func admit(_ count: Int, transfer: Int, priority: FetchPriority,
               now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Bool {
        if let first = first, Self.rank(first) < Self.rank((transfer, priority)) {
            paused[transfer] = priority
            return false
        }
        if bucket.take(count, now: now) {
            paused[transfer] = nil
            return true
        }
        paused[transfer] = priority
        return false
    }

    /// Transfer `transfer` changed class. One paused as read-ahead that a read now waits on must
    /// get the next tokens: left at its old class, it waited behind every read-ahead stream
    /// (under `--bwlimit 1M`, mpv's last read then took 4-8 s while five near streams ran).
    func reclass(_ transfer: Int, _ priority: FetchPriority) {
        if paused[transfer] != nil { paused[transfer] = priority }
    }

    /// The first transfer waiting, once a token is left (it is then no longer paused here).
    func due(now: UInt64) -> [Int] {
        guard let first, bucket.wait(now: now) == 0 else { return [] }
        paused[first.key] = nil
        return [first.key]
    }

    /// The transfer ended or moved on: it waits for no token.
    func forget(_ transfer: Int) { paused[transfer] = nil }

    /// Nanoseconds until paused transfers are due; nil when none is paused.
    func wait(now: UInt64) -> UInt64? { paused.isEmpty ? nil : bucket.wait(now: now) }

    private var first: (key: Int, value: FetchPriority)? { paused.min { Self.rank($0) < Self.rank($1) } }

    private static func rank(_ t: (key: Int, value: FetchPriority)) -> (Int, Int) { (t.value.rawValue, t.key) }
}
