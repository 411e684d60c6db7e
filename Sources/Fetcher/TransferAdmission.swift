import CacheCore

/// Which transfers may run now, and in what order the others start: the one admission policy of
/// both clients that fetch. The libcurl loop (`CurlMultiLoop`) runs a transfer while it holds an
/// easy handle attached to the multi handle; the tier node client (`NodeRangeSource` over NIO)
/// while it has a request in flight to its node. Each asks this policy, so a read that waits on a
/// tier node's bytes starts before read-ahead exactly as one through libcurl does.
///
/// Pure state, no lock, no calls out, and no clock of its own (`next` is given the time, which
/// only `--tpslimit` reads): the client keeps it where it keeps its transfers (the curl thread;
/// the node source's lock), tells it what happened and carries out what it says (`next`). Which
/// transfers *yield* once running is `TransferScheduler`'s.
///
/// Rules:
/// - Limits (`Limits`): at most `perOrigin` transfers running per origin (scheme, host and port)
///   and `total` in all; nil: no limit of that kind. With `requestRate` (`--tpslimit`), a
///   transfer starts only while its origin has a token (`RequestRate`); one that waits for a
///   token keeps its place in the order, and `tokenWait` says when to ask again.
/// - A transfer that arrives waits in the queue; `next` starts the first that the limits let
///   run: the highest class (`FetchPriority`: a waiting read, a scanner's waited read, near
///   read-ahead, far, scan, warm-up), so a probe's fetch starts before a copy's next stream;
///   within a class the origin with the fewest running (one slow origin with hundreds of
///   transfers queued cannot keep another waiting for them); then the oldest arrival.
/// - A waiting read (`.waiting`) that finds all `total` taken takes the place of a running
///   transfer of class far or lower that the client can resume (`preemptible`), the lowest class
///   first, then the one started last: the client stops it and it queues again as the newest.
///   A scanner's waited read (`.waitedScan`) neither takes a place nor gives one up: its fetch
///   is what the probe asks plus a small margin, so it gets the next free place, ahead of
///   read-ahead, and is soon done.
///   A per-origin cap is preempted only with `preemptsWithinOrigin` (libcurl's
///   `--max-connections-per-host`): a waiting read held back by its origin's cap takes the place
///   of that origin's read-ahead, scan or warm-up as above (else a player behind a warm-up on a
///   host capped at one connection waited for the whole warm-up). The node client's cap is never
///   preempted: its transfers are all to the same place.
struct TransferAdmission: Sendable {
    struct Limits: Sendable, Equatable {
        var perOrigin: Int?
        var total: Int?
        /// `--tpslimit`: requests per second per origin, and the most at once after a quiet
        /// spell (`--tpslimit-burst`); nil: no limit.
        var requestRate: (perSecond: Double, burst: Int)? {
            get { requestsPerSecond.map { ($0, requestBurst) } }
            set { requestsPerSecond = newValue?.perSecond; requestBurst = newValue?.burst ?? 1 }
        }
        private var requestsPerSecond: Double?
        private var requestBurst = 1
        /// A waiting read may take the place of its own origin's lower classes under `perOrigin`.
        var preemptsWithinOrigin = false

        init(perOrigin: Int?, total: Int?, requestRate: (perSecond: Double, burst: Int)? = nil,
             preemptsWithinOrigin: Bool = false) {
            self.perOrigin = perOrigin
            self.total = total
            self.requestRate = requestRate
            self.preemptsWithinOrigin = preemptsWithinOrigin
        }

        /// The libcurl loop's: no more transfers attached than it may open connections
        /// (`--max-connections`), and no more to one origin than `--max-connections-per-host`
        /// (each transfer one request in flight; libcurl's CURLMOPT_MAX_HOST_CONNECTIONS caps the
        /// connections under it, over which HTTP/2 multiplexes them); `--tpslimit`.
        static func curl(_ c: FetcherConfiguration) -> Limits {
            Limits(perOrigin: c.maxTransfersPerOrigin.map { max(1, $0) }, total: max(1, c.maxTotalConnections),
                   requestRate: c.requestsPerSecond > 0 ? (c.requestsPerSecond, c.requestBurst) : nil,
                   preemptsWithinOrigin: c.maxTransfersPerOrigin != nil)
        }

        /// The node client's: `--max-connections` requests in flight per node (several hosts
        /// asking a node for many slices at once ask for the same slices at once, and nginx's
        /// `proxy_cache_lock` makes the later ones wait in 500 ms steps); each node on its own.
        static func nodes(_ c: FetcherConfiguration) -> Limits {
            Limits(perOrigin: max(1, c.maxConnections), total: nil)
        }
    }

    enum Step: Equatable {
        /// `id` runs now.
        case start(Int)
        /// `victim` stops and queues again (as the newest); `id` runs in its place.
        case preempt(victim: Int, for: Int)
    }

    private struct Queued {
        let id: Int
        let origin: String
        var priority: FetchPriority
        let order: Int
    }

    private struct Running {
        let origin: String
        var priority: FetchPriority
        let order: Int
    }

    let limits: Limits
    private var rate: RequestRate?
    private var queue: [Queued] = []
    private var running: [Int: Running] = [:]
    private var runningPerOrigin: [String: Int] = [:]
    private var arrivals = 0

    init(limits: Limits) {
        self.limits = limits
        rate = limits.requestRate.map { RequestRate(perSecond: $0.perSecond, burst: $0.burst) }
    }

    /// Transfer `id` wants to run (first, or again after a retry, a redirect, a preemption).
    mutating func arrive(_ id: Int, origin: String, priority: FetchPriority) {
        arrivals += 1
        queue.append(Queued(id: id, origin: origin, priority: priority, order: arrivals))
    }

    /// Transfer `id` changed class (queued or running); no effect if it is neither.
    mutating func reclass(_ id: Int, _ priority: FetchPriority) {
        if running[id] != nil {
            running[id]!.priority = priority
        } else if let i = queue.firstIndex(where: { $0.id == id }) {
            queue[i].priority = priority
        }
    }

    /// Takes `id` out of the queue; false if it was not queued (it may be running, or its start
    /// may be on its way to it).
    mutating func withdraw(_ id: Int) -> Bool {
        guard let i = queue.firstIndex(where: { $0.id == id }) else { return false }
        queue.remove(at: i)
        return true
    }

    /// Transfer `id` stopped running, or is gone: its place is free; no effect if it was neither
    /// running nor queued.
    mutating func leave(_ id: Int) {
        if let r = running.removeValue(forKey: id) {
            runningPerOrigin[r.origin]! -= 1
            if runningPerOrigin[r.origin] == 0 { runningPerOrigin.removeValue(forKey: r.origin) }
        } else {
            _ = withdraw(id)
        }
    }

    /// What to start next, already counted as running; nil while nothing may. The client calls
    /// it until nil after every change. `preemptible` says which running transfers the client
    /// can stop and resume later (asked only when a waiting read finds every place taken).
    /// `now` (the monotonic clock's) is read only under a request rate.
    mutating func next(now: MonotonicInstant = MonotonicInstant(nanoseconds: 0), preemptible: (Int) -> Bool = { _ in false }) -> Step? {
        var best: Int?
        /// The oldest waiting read its origin's cap holds back (`preemptsWithinOrigin`).
        var capped: Int?
        for i in queue.indices {
            let q = queue[i]
            if let rate, !rate.allows(q.origin, now: now) { continue }
            if let cap = limits.perOrigin, runningPerOrigin[q.origin, default: 0] >= cap {
                if limits.preemptsWithinOrigin, q.priority == .waiting, capped.map({ q.order < queue[$0].order }) ?? true { capped = i }
                continue
            }
            guard let b = best else {
                best = i
                continue
            }
            let c = queue[b]
            if (q.priority, held(q.origin), q.order) < (c.priority, held(c.origin), c.order) { best = i }
        }
        if let c = capped, best.map({ queue[$0].priority != .waiting }) ?? true,
           let victim = victim(preemptible, origin: queue[c].origin) {
            return preempt(victim, for: c, now: now)
        }
        guard let b = best else { return nil }
        if let total = limits.total, running.count >= total {
            guard queue[b].priority == .waiting, let victim = victim(preemptible) else { return nil }
            return preempt(victim, for: b, now: now)
        }
        let q = queue.remove(at: b)
        _ = rate?.take(q.origin, now: now)
        start(q)
        return .start(q.id)
    }

    /// Under a request rate: how long from `now` until a queued transfer's origin has a token
    /// again (when `next` may say more); nil when no queued transfer waits for one.
    func tokenWait(now: MonotonicInstant) -> Duration? {
        guard let rate else { return nil }
        return queue.lazy.map { rate.wait($0.origin, now: now) }.filter { $0 > .zero }.min()
    }

    private func held(_ origin: String) -> Int { runningPerOrigin[origin, default: 0] }

    /// `victim` stops and queues again; the queued transfer at `index` runs in its place.
    private mutating func preempt(_ victim: Int, for index: Int, now: MonotonicInstant) -> Step {
        let v = running[victim]!
        leave(victim)
        let q = queue.remove(at: index)
        _ = rate?.take(q.origin, now: now)
        start(q)
        arrive(victim, origin: v.origin, priority: v.priority)
        return .preempt(victim: victim, for: q.id)
    }

    private mutating func start(_ q: Queued) {
        arrivals += 1
        running[q.id] = Running(origin: q.origin, priority: q.priority, order: arrivals)
        runningPerOrigin[q.origin, default: 0] += 1
    }

    /// The running transfer a waiting read takes the place of: far or lower, the lowest class,
    /// then the one started last.
    /// With `origin`, only among that origin's.
    private func victim(_ preemptible: (Int) -> Bool, origin: String? = nil) -> Int? {
        var victim: (id: Int, priority: FetchPriority, order: Int)?
        for (id, r) in running where r.priority >= .far && (origin == nil || r.origin == origin) {
            if let v = victim, (r.priority, r.order) <= (v.priority, v.order) { continue }
            guard preemptible(id) else { continue }
            victim = (id, r.priority, r.order)
        }
        return victim?.id
    }

    /// Transfers running and queued (tests, status).
    var counts: (running: Int, queued: Int) { (running.count, queue.count) }

    /// Running transfers to `origin`.
    func running(to origin: String) -> Int { held(origin) }
}
