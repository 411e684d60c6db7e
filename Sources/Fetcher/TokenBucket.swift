import CacheCore
import Dispatch
import Foundation

/// `--bwlimit`: one budget of origin bytes per second shared by every transfer of the multi loop.
///
/// Pure state with the clock passed in (a `MonotonicInstant`), so tests drive it without waiting.
/// Bytes pass while a token is left, and take their count: libcurl hands over whatever it read
/// (up to one receive buffer), so the bucket may go into debt by one chunk, and the transfers
/// then wait until the debt is paid. Over any stretch the rate holds to within one burst.
struct TokenBucket: Sendable, Equatable {
    let bytesPerSecond: Double
    /// Most tokens saved up while idle: 50 ms at the rate, at least 16 KiB.
    let burst: Double
    private(set) var tokens: Double
    private var refilledAt: MonotonicInstant

    init(bytesPerSecond: Int64, now: MonotonicInstant) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        burst = max(Double(16 << 10), self.bytesPerSecond / 20)
        tokens = burst
        refilledAt = now
    }

    mutating func refill(now: MonotonicInstant) {
        guard now > refilledAt else { return }
        tokens = min(burst, tokens + (now - refilledAt).timeInterval * bytesPerSecond)
        refilledAt = now
    }

    /// Whether `count` bytes may pass now (then they are taken).
    mutating func take(_ count: Int, now: MonotonicInstant) -> Bool {
        refill(now: now)
        guard tokens > 0 else { return false }
        tokens -= Double(count)
        return true
    }

    /// How long from `now` until a token is left (zero: one is left now).
    func wait(now: MonotonicInstant) -> Duration {
        var b = self
        b.refill(now: now)
        return b.tokens > 0 ? .zero : .nanoseconds(Int64((-b.tokens + 1) / bytesPerSecond * 1e9))
    }

    // Whole tokens (`--tpslimit`: one request is one token, and none goes into debt).

    /// A bucket of `perSecond` tokens a second holding at most `burst`, full at `now`.
    init(perSecond: Double, burst: Double, now: MonotonicInstant) {
        bytesPerSecond = max(1e-3, perSecond)
        self.burst = max(1, burst)
        tokens = self.burst
        refilledAt = now
    }

    /// Whether a whole token is left now (then it is taken).
    mutating func takeWhole(now: MonotonicInstant) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// How long from `now` until a whole token is left (zero: one is left now).
    func waitWhole(now: MonotonicInstant) -> Duration {
        var b = self
        b.refill(now: now)
        return b.tokens >= 1 ? .zero : .nanoseconds(Int64(((1 - b.tokens) / bytesPerSecond * 1e9).rounded(.up)))
    }

    /// Whether the bucket is full at `now` (it is then the same as a fresh one).
    func isFull(now: MonotonicInstant) -> Bool {
        var b = self
        b.refill(now: now)
        return b.tokens >= burst
    }
}

/// The multi loop's side of `--bwlimit`: the bucket, and the transfers it paused until a token is
/// left again. Loop thread only (the write callbacks run there too); the clock is passed in, so
/// tests drive it without waiting.
///
/// Tokens go in order, and no token is left unused (a transfer with nothing to receive asks for
/// none, and the next one gets them). While a transfer waits for a token, one after it gets none,
/// and when a token is left the first one waiting gets it. The order:
/// - the higher class first: under a limit, the bytes a reader waits for never share it with
///   read-ahead;
/// - within a class, each reader's (`owner`'s) transfers oldest first (a lower id: the planner
///   starts a reader's streams in the order of their offsets), so its read-ahead arrives nearest
///   first, as one stream would bring it, not as eighteen streams each crawling at an
///   eighteenth of the rate while the player catches up with the first;
/// - across readers, the first waiting transfer of each in turn, the one served longest ago
///   first: two players under one limit each get their nearest bytes at half the rate, and
///   neither's read-ahead waits for all of the other's.
///
/// With a timetable (`--bwlimit "08:00,512K 23:00,off"`) the rate changes at its times: the loop
/// calls `follow` with the wall clock and uptime (at most one look a second), a new rate starts a
/// new bucket, and `off` lets every paused transfer go and admits all until the next limit.
final class Throttle {
    /// nil: no limit right now (a timetable's `off`).
    private var bucket: TokenBucket?
    private let timetable: BandwidthTimetable?
    private var rate: Int64
    private var nextLook = MonotonicInstant(nanoseconds: 0)
    private struct Paused { var priority: FetchPriority; var owner: Int? }
    /// The transfers waiting for a token, by their class now (`reclass` keeps it current).
    private var paused: [Int: Paused] = [:]
    /// When each reader last took tokens (a count of admissions), for the turns across readers.
    private var served: [Int: UInt64] = [:]
    private var admissions: UInt64 = 0

    init(bytesPerSecond: Int64, now: MonotonicInstant) {
        bucket = TokenBucket(bytesPerSecond: bytesPerSecond, now: now)
        rate = bytesPerSecond
        timetable = nil
    }

    /// Follows `timetable`, starting with its rate at `date`.
    init(timetable: BandwidthTimetable, date: Date, calendar: Calendar = .current, now: MonotonicInstant) {
        self.timetable = timetable
        rate = timetable.bytesPerSecond(at: date, calendar: calendar)
        bucket = rate > 0 ? TokenBucket(bytesPerSecond: rate, now: now) : nil
        nextLook = now + .seconds(1)
    }

    /// The limit in force now (bytes per second; 0: none).
    var bytesPerSecond: Int64 { rate }

    /// With a timetable: takes its rate at `date` (looked at once a second of `now` at most).
    func follow(date: @autoclosure () -> Date, calendar: Calendar = .current, now: MonotonicInstant) {
        guard let timetable, now >= nextLook else { return }
        nextLook = now + .seconds(1)
        setRate(timetable.bytesPerSecond(at: date(), calendar: calendar), now: now)
    }

    /// A new limit from `now` on (0: none): a fresh bucket, so neither saved tokens nor a debt
    /// of the old rate carries over.
    func setRate(_ bytesPerSecond: Int64, now: MonotonicInstant) {
        guard bytesPerSecond != rate else { return }
        rate = bytesPerSecond
        bucket = bytesPerSecond > 0 ? TokenBucket(bytesPerSecond: bytesPerSecond, now: now) : nil
    }

    /// Whether `count` bytes of `transfer` (of reader `owner`) pass now; if not, it pauses.
    func admit(_ count: Int, transfer: Int, priority: FetchPriority, owner: Int? = nil, now: MonotonicInstant) -> Bool {
        let me = Paused(priority: priority, owner: owner)
        guard var bucket else {
            paused[transfer] = nil
            return true
        }
        defer { self.bucket = bucket }
        if let first, first != transfer, rank(first, paused[first]!) < rank(transfer, me) {
            paused[transfer] = me
            return false
        }
        if bucket.take(count, now: now) {
            paused[transfer] = nil
            admissions += 1
            if served.count >= 4096 { served.removeAll() }   // readers come and go: only the turn matters
            served[Self.group(transfer, owner)] = admissions
            return true
        }
        paused[transfer] = me
        return false
    }

    /// Transfer `transfer` changed class. One paused as read-ahead that a read now waits on must
    /// get the next tokens: left at its old class, it would wait behind every read-ahead stream
    /// (a player's read behind five near streams, seconds under `--bwlimit 1M`).
    func reclass(_ transfer: Int, _ priority: FetchPriority) {
        paused[transfer]?.priority = priority
    }

    /// The first transfer waiting, once a token is left (it is then no longer paused here).
    func due(now: MonotonicInstant) -> [Int] {
        guard let bucket else {
            // No limit now: every paused transfer goes on, in order.
            let all = paused.sorted { rank($0.key, $0.value) < rank($1.key, $1.value) }.map(\.key)
            paused.removeAll()
            return all
        }
        guard let first, bucket.wait(now: now) == .zero else { return [] }
        paused[first] = nil
        return [first]
    }

    /// The transfer ended or moved on: it waits for no token.
    func forget(_ transfer: Int) { paused[transfer] = nil }

    /// How long until paused transfers are due; nil when none is paused.
    func wait(now: MonotonicInstant) -> Duration? { paused.isEmpty ? nil : bucket?.wait(now: now) ?? .zero }

    /// The paused transfer that goes first.
    private var first: Int? { paused.min { rank($0.key, $0.value) < rank($1.key, $1.value) }?.key }

    /// (class, when its reader was last served, the transfer's age): within the highest class
    /// waiting, the reader served longest ago, and its oldest transfer.
    private func rank(_ transfer: Int, _ p: Paused) -> (Int, UInt64, Int) {
        (p.priority.rank, served[Self.group(transfer, p.owner)] ?? 0, transfer)
    }

    /// A transfer with no reader is its own group.
    private static func group(_ transfer: Int, _ owner: Int?) -> Int { owner ?? -1 - transfer }
}
