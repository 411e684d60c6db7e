import CacheCore
import Foundation
import Logging

/// A sink that wants to hear when an attempt of its transfer could not reach the origin at all
/// (connection refused, no route, a failed name lookup, a connect timeout), before the source
/// retries it. Sources call it; the source may still retry unless the transfer is cancelled.
public protocol OriginReachObserving: AnyObject {
    func fetchCouldNotReach(_ error: FetchError)
}

/// Offline mode: the engine's source, wrapped so that an origin that cannot be reached costs one
/// failure, not one per request. A layer of `FetchLayers.standard`, inside the `FetchTracker`;
/// the engine reads it only as `OriginHealthReporting` (an entry of an origin that is down is
/// served as cached, not revalidated; the status page lists the origins down).
///
/// Owns one `OriginHealth` per origin (`scheme://host:port` of the requested URL). While an
/// origin is down, `start` fails a transfer at once (off the caller's stack, as a job of the
/// engine's pool, with a network error that says
/// so) instead of passing it on: reads of bytes never cached fail within milliseconds, and the
/// engine serves what it holds without asking (`isDown`). The first attempt that cannot reach an
/// origin marks it down and ends its transfer then (the source's retries of it are cancelled).
/// One probe at a time (a 1-byte ranged GET of the last URL of that origin that was answered, else
/// the last one asked) checks whether it is back, backing off (`OriginHealth`); any answer of any
/// transfer brings it back up. (The last URL asked may be the one that hangs: an origin that
/// stalls on one URL stayed "down" for as long as nothing else was asked of it.)
/// An origin nothing has asked for in `forgetAfter` (a mount that was refused, a folder let go)
/// is forgotten at its next failed probe rather than probed every ten seconds for the daemon's
/// life: the next request finds it afresh.
///
/// Threads: `start` runs on the engine's callers; sink callbacks on the source's thread; probe
/// timers on `scheduler`'s thread (they only start a probe: the curl loop's inbox). One lock guards
/// the table; nothing is called under it.
public final class OriginHealthSource: RangeSource, OriginHealthReporting, Sendable {
    let inner: RangeSource
    let logger: Logger
    let now: @Sendable () -> Date
    private let scheduler: Scheduler
    private struct Table {
        var origins: [String: Origin] = [:]
        var stopped = false
        /// Where a failure at `start` is answered (`answerOn`); none: on `scheduler`'s thread.
        var pool: BlockingIOPool?
    }
    private let table = LockedValue(Table())
    private let firstProbeDelay: TimeInterval
    private let maxProbeDelay: TimeInterval
    private let forgetAfter: TimeInterval

    struct Origin {
        var health: OriginHealth
        /// The last URL asked of it: what a probe asks for (one byte) if none was answered.
        var probeURL: String
        /// The last URL it answered with a head: what a probe asks for.
        var answeredURL: String?
        /// When a request (not a probe) last asked it.
        var lastAsked: Date
    }

    /// - Parameters:
    ///   - now: the engine's wall clock: when an origin went down, when its next probe is due
    ///     (the status page shows both).
    ///   - scheduler: where the probe timers run (the engine clock's scheduler; tests: a manual one, whose
    ///     `advance(by:)` sends a due probe on the test's thread).
    ///   - forgetAfter: how long an origin down and asked nothing is still probed.
    public init(_ inner: RangeSource, logger: Logger, firstProbeDelay: TimeInterval = 1, maxProbeDelay: TimeInterval = 10,
                forgetAfter: TimeInterval = 600, now: @escaping @Sendable () -> Date, scheduler: Scheduler) {
        self.inner = inner
        self.scheduler = scheduler
        self.logger = logger
        self.firstProbeDelay = firstProbeDelay
        self.maxProbeDelay = maxProbeDelay
        self.forgetAfter = forgetAfter
        self.now = now
    }

    /// Answers the transfers failed at `start` (an origin down) as jobs of `pool` (the engine's).
    public func answerOn(_ pool: BlockingIOPool) {
        table.withLock { $0.pool = pool }
    }

    // MARK: Reading the table

    /// The origin of `url` is down now: requests to it fail at once.
    public func isDown(url: String) -> Bool {
        // Most of the time no origin is down: the URL is then not split for its origin's name
        // (every open asks, and that split was 4% of the daemon's CPU per small cached file).
        guard table.withLock({ $0.origins.values.contains { $0.health.isDown } }) else { return false }
        let name = OriginDown.name(of: url)
        return table.withLock { $0.origins[name]?.health.isDown ?? false }
    }

    /// The origins that are down, by name.
    public func downOrigins() -> [OriginDown] {
        table.withLock {
            $0.origins.compactMap { name, o -> OriginDown? in
                guard case let .down(since, error, failures, next, _) = o.health.state else { return nil }
                return OriginDown(origin: DisplayURL.redacted(name), since: since, lastError: DisplayURL.redactingPasswords(in: error),
                                  failedAttempts: failures, nextProbeAt: next)
            }.sorted { $0.origin < $1.origin }
        }
    }

    /// No more probes (the engine shut down).
    public func stop() { table.withLock { $0.stopped = true } }

    // MARK: RangeSource

    public func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        let name = OriginDown.name(of: request.url)
        let asked = now()
        let (down, pool): ((Date, String)?, BlockingIOPool?) = table.withLock { table in
            var o = table.origins[name] ?? Origin(health: OriginHealth(firstProbeDelay: firstProbeDelay, maxProbeDelay: maxProbeDelay),
                                            probeURL: request.url, lastAsked: asked)
            o.probeURL = request.url
            o.lastAsked = asked
            table.origins[name] = o
            // Stopped, the engine's pool is finishing: a job would run on this stack.
            let pool = table.stopped ? nil : table.pool
            if case let .down(since, error, _, _, _) = o.health.state { return ((since, error), pool) }
            return (nil, pool)
        }
        if let (since, error) = down {
            let failure = FetchError.network(url: request.url, message:
                "the origin \(DisplayURL.redacted(name)) is down (since \(Self.clock(since)): \(error)); not asked until it answers a probe")
            let answer: @Sendable () -> Void = { sink.fetchDidFinish(failure) }
            if let pool { pool.submit(answer) } else { scheduler.after(.zero, answer) }
            return NotStarted()
        }
        let watched = WatchedSink(sink: sink, origin: name, url: request.url, owner: self, isProbe: false)
        let handle = inner.start(request, sink: watched)
        watched.setHandle(handle)
        return WatchedHandle(inner: handle, sink: watched)
    }

    // MARK: Events

    func unreachable(_ name: String, _ error: FetchError) {
        let when = now()
        let action = table.withLock { $0.origins[name]?.health.unreachable(Self.message(error), now: when) ?? .none }
        if case let .wentDown(at) = action {
            logger.warning("origin unreachable: serving what the cache holds, failing the rest at once, probing until it answers",
                           metadata: ["origin": "\(DisplayURL.redacted(name))", "error": "\(error)"])
            schedule(name, at: at)
        }
    }

    /// - Parameter url: the URL it answered with a head (nil: some other answer).
    func reached(_ name: String, url: String? = nil) {
        let when = now()
        let action = table.withLock { table -> OriginHealth.Action in
            if let url { table.origins[name]?.answeredURL = url }
            return table.origins[name]?.health.reached(now: when) ?? .none
        }
        if case let .cameBack(since) = action {
            logger.notice("origin reachable again", metadata: [
                "origin": "\(DisplayURL.redacted(name))", "down_for": "\(String(format: "%.1f", when.timeIntervalSince(since)))s"])
        }
    }

    func probeFailed(_ name: String, _ error: FetchError) {
        let when = now()
        let (action, forgotten) = table.withLock { table -> (OriginHealth.Action, Bool) in
            guard let o = table.origins[name] else { return (.none, false) }
            if when.timeIntervalSince(o.lastAsked) >= forgetAfter {
                table.origins[name] = nil
                return (.none, true)
            }
            return (table.origins[name]?.health.probeFailed(Self.message(error), now: when) ?? .none, false)
        }
        if forgotten {
            logger.notice("origin still unreachable and asked nothing for a while: no longer probed; the next request asks it afresh",
                          metadata: ["origin": "\(DisplayURL.redacted(name))", "error": "\(error)"])
        }
        if case let .probeLater(at) = action { schedule(name, at: at) }
    }

    /// Sets the probe timer for `at` on `scheduler`'s clock. When it fires, the probe is due
    /// by that clock (`probeDue(at:)`), whatever the wall clock says: a wall clock set back while
    /// the origin was down does not hold the probe back by as much, and a test's manual scheduler
    /// fires it when the test moves its clock.
    private func schedule(_ name: String, at: Date) {
        let delay = max(0, at.timeIntervalSince(now()))
        scheduler.after(.seconds(delay)) { [weak self] in self?.probeDue(name, at: at) }
    }

    private func probeDue(_ name: String, at deadline: Date) {
        let when = max(now(), deadline)
        let (action, url): (OriginHealth.Action, String?) = table.withLock { table in
            guard !table.stopped, var o = table.origins[name] else { return (.none, nil) }
            let action = o.health.probeDue(now: when)
            table.origins[name] = o
            return (action, o.answeredURL ?? o.probeURL)
        }
        switch action {
        case .sendProbe:
            guard let url else { return }
            logger.debug("probing origin", metadata: ["origin": "\(DisplayURL.redacted(name))"])
            let sink = WatchedSink(sink: nil, origin: name, url: url, owner: self, isProbe: true)
            sink.setHandle(inner.start(FetchRequest(url: url, start: 0, end: 1, priority: .waiting), sink: sink))
        case let .probeLater(at):
            schedule(name, at: at)
        default:
            break
        }
    }

    static func message(_ error: FetchError) -> String {
        switch error {
        case let .network(_, message): return message
        case .timeout: return "timed out"
        default: return "\(error)"
        }
    }

    /// `2026-11-28 00:33:12Z`: said in every failure while an origin is down, so no formatter
    /// is made for it.
    static func clock(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var t = tm()
        gmtime_r(&seconds, &t)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02dZ", Int(t.tm_year) + 1900, Int(t.tm_mon) + 1, Int(t.tm_mday),
                      Int(t.tm_hour), Int(t.tm_min), Int(t.tm_sec))
    }
}

/// A transfer failed before it started (its origin is down).
private struct NotStarted: FetchHandle {
    func cancel() {}
}

private struct WatchedHandle: FetchHandle {
    let inner: FetchHandle
    let sink: WatchedSink
    func cancel() {
        sink.cancelledByCaller()
        inner.cancel()
    }
    func resume() { inner.resume() }
    func setPriority(_ priority: FetchPriority, waitedSeconds: Double) { inner.setPriority(priority, waitedSeconds: waitedSeconds) }
}

/// Passes one transfer's callbacks on, telling the health table what they say of the origin
/// (`OriginHealth.evidence`): a head or an HTTP status means it answered; an attempt that could
/// not reach it (the source's `OriginReachObserving` call, or a network error or timeout with no
/// answer, at this origin: not at a redirect's target) means it is down; the request's own fault
/// (a malformed URL) means nothing. A probe's sink (`sink` nil) only reports.
private final class WatchedSink: FetchSink, FetchRetryObserving, OriginReachObserving, Sendable {
    let sink: FetchSink?
    let origin: String
    let url: String
    /// Strong: a transfer may end after the engine let go of its source (shutdown order).
    let owner: OriginHealthSource
    let isProbe: Bool
    private struct State {
        var handle: FetchHandle?
        var cancelOnSet = false
        var callerCancelled = false
        /// Set by the source's callbacks (in order, on its thread), read at its finish.
        var answered = false
        var unreachable: FetchError?
    }
    private let state = LockedValue(State())

    init(sink: FetchSink?, origin: String, url: String, owner: OriginHealthSource, isProbe: Bool) {
        self.sink = sink
        self.origin = origin
        self.url = url
        self.owner = owner
        self.isProbe = isProbe
    }

    func setHandle(_ h: FetchHandle) {
        let cancel: Bool = state.withLock { s in
            s.handle = h
            return s.cancelOnSet
        }
        if cancel { h.cancel() }
    }

    func cancelledByCaller() { state.withLock { $0.callerCancelled = true } }

    private func cancelTransfer() {
        let h: FetchHandle? = state.withLock { s in
            if s.handle == nil { s.cancelOnSet = true }
            return s.handle
        }
        h?.cancel()
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        state.withLock { $0.answered = true }
        owner.reached(origin, url: url)
        if isProbe { return false }
        return sink!.fetchDidReceiveHead(head)
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool { sink?.fetchDidReceive(bytes) ?? false }
    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow { sink?.fetchOffer(bytes) ?? .stop }
    func fetchDidDrain() { sink?.fetchDidDrain() }

    func fetchWillRetry() { (sink as? FetchRetryObserving)?.fetchWillRetry() }

    /// The first attempt that cannot reach the origin ends the transfer (no retries against an
    /// origin that is away: the reader hears at once, and the probe finds when it is back). A
    /// transfer that had an answer before counts too: its reconnection found nobody.
    func fetchCouldNotReach(_ error: FetchError) {
        // A redirect's target that cannot be reached is not this origin (the source says so only
        // of the requested origin; this holds for any source).
        if let failed = Self.failedURL(error), OriginDown.name(of: failed) != origin { return }
        let first = state.withLock { s in
            defer { if s.unreachable == nil { s.unreachable = error } }
            return s.unreachable == nil
        }
        guard first else { return }
        if !isProbe { owner.unreachable(origin, error) }
        cancelTransfer()
    }

    /// The URL a network failure or timeout is about: the hop that failed.
    static func failedURL(_ error: FetchError) -> String? {
        switch error {
        case let .network(url, _), let .timeout(url): return url
        default: return nil
        }
    }

    func fetchDidFinish(_ error: FetchError?) {
        let (answered, unreachable, callerCancelled) = state.withLock { ($0.answered, $0.unreachable, $0.callerCancelled) }
        if isProbe && answered { return }   // reported with the head (then cancelled)
        var error = error
        if error == .cancelled, let unreachable, !callerCancelled { error = unreachable }
        let failedElsewhere = error.flatMap(Self.failedURL).map { OriginDown.name(of: $0) != origin } ?? false
        switch OriginHealth.evidence(of: error, answered: answered, isProbe: isProbe, failedElsewhere: failedElsewhere) {
        case .reached:
            owner.reached(origin)
        case .unreachable:
            if isProbe { owner.probeFailed(origin, error!) } else if unreachable == nil { owner.unreachable(origin, error!) }
        case .none:
            break
        }
        sink?.fetchDidFinish(error)
    }
}
