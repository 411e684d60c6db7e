import CacheCore

/// `--tpslimit N` and `--tpslimit-burst B`: at most N requests a second to each origin (scheme,
/// host and port), with up to B at once after a quiet spell; rclone's names, though rclone's
/// limit is one for all hosts, and here each origin has its own (a busy origin never slows
/// another, and the limit an origin asks for is about what it sees).
///
/// Pure state with the clock passed in (a `MonotonicInstant`): `TransferAdmission` keeps it and
/// starts a transfer only when its origin has a token, so every HTTP request counts, retries and
/// redirect hops included (each arrives at the admission again). A transfer waiting for a token
/// holds no connection; classes go in order, as for every other limit.
struct RequestRate: Sendable, Equatable {
    let perSecond: Double
    let burst: Int
    private var buckets: [String: TokenBucket] = [:]

    /// `perSecond` > 0; a burst below 1 is 1 (as rclone takes it).
    init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = max(1, burst)
    }

    /// Whether `origin` may be sent a request at `now` (nothing is taken).
    func allows(_ origin: String, now: MonotonicInstant) -> Bool {
        buckets[origin].map { $0.waitWhole(now: now) == .zero } ?? true
    }

    /// Takes `origin`'s token for a request at `now`; false if none is left.
    mutating func take(_ origin: String, now: MonotonicInstant) -> Bool {
        if buckets.count >= 1024 { buckets = buckets.filter { !$0.value.isFull(now: now) } }  // origins come and go
        var b = buckets[origin] ?? TokenBucket(perSecond: perSecond, burst: Double(burst), now: now)
        defer { buckets[origin] = b }
        return b.takeWhole(now: now)
    }

    /// How long from `now` until `origin` has a token (zero: it has one now).
    func wait(_ origin: String, now: MonotonicInstant) -> Duration {
        buckets[origin]?.waitWhole(now: now) ?? .zero
    }
}
