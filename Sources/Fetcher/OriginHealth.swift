import CacheCore
import Foundation

/// Whether one origin (`scheme://host:port`) can be reached, as a pure state machine: events in
/// (a request could not reach it, something reached it, a probe is due or ended), actions out.
/// Times are passed in, so tests run it as a table with no clock and no sockets.
///
/// An origin is **up** until a request cannot reach it (connection refused, no route, a failed
/// name lookup, a connect or read timeout): then it is **down** at once, from that first failure.
/// While it is down, requests fail at once (`admitsRequests` is false) instead of each waiting
/// out its own connect attempts and retries, and one small probe at a time asks whether it is
/// back, after 1 s, then 2, 4, ... up to `maxProbeDelay` between failed probes. The first probe
/// that gets any HTTP answer, or any other request that does, makes it up again.
public struct OriginHealth: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case up
        /// Down since `since`; `failures` counts the failed attempts (the first request and the
        /// probes since); the next probe is due at `nextProbe`; `probing`: one is under way.
        case down(since: Date, lastError: String, failures: Int, nextProbe: Date, probing: Bool)
    }

    /// What the owner does next.
    public enum Action: Sendable, Equatable {
        case none
        /// The origin just went down: say so once, and come back for a probe at this time.
        case wentDown(probeAt: Date)
        /// A probe failed: come back at this time.
        case probeLater(at: Date)
        /// Send one probe now.
        case sendProbe
        /// It answers again, after being down since this time: say so once.
        case cameBack(downSince: Date)
    }

    public private(set) var state: State = .up
    /// Delay before the first probe; doubles with each failed probe, up to `maxProbeDelay`: ten
    /// seconds bound how long an origin that is back stays marked down (nothing else asks it),
    /// at the cost of one 1-byte request per ten seconds while it is away.
    public var firstProbeDelay: TimeInterval = 1
    public var maxProbeDelay: TimeInterval = 10

    public init(firstProbeDelay: TimeInterval = 1, maxProbeDelay: TimeInterval = 10) {
        self.firstProbeDelay = firstProbeDelay
        self.maxProbeDelay = maxProbeDelay
    }

    public var isDown: Bool { if case .down = state { return true } else { return false } }

    /// Requests other than probes go to the origin only while it is up.
    public var admitsRequests: Bool { !isDown }

    /// The delay after `failures` failed attempts.
    func probeDelay(after failures: Int) -> TimeInterval {
        min(firstProbeDelay * pow(2, Double(max(0, failures - 1))), maxProbeDelay)
    }

    /// A request (not a probe) could not reach the origin.
    public mutating func unreachable(_ error: String, now: Date) -> Action {
        switch state {
        case .up:
            let at = now.addingTimeInterval(probeDelay(after: 1))
            state = .down(since: now, lastError: error, failures: 1, nextProbe: at, probing: false)
            return .wentDown(probeAt: at)
        case let .down(since, _, failures, nextProbe, probing):
            // A request admitted just before it went down ended the same way: nothing new.
            state = .down(since: since, lastError: error, failures: failures, nextProbe: nextProbe, probing: probing)
            return .none
        }
    }

    /// Any answer from the origin (a head, or an HTTP error status: it is there).
    public mutating func reached(now: Date) -> Action {
        guard case let .down(since, _, _, _, _) = state else { return .none }
        state = .up
        return .cameBack(downSince: since)
    }

    /// A timer set for `probeAt` fired (or anything else asks): probe if one is due and none runs.
    public mutating func probeDue(now: Date) -> Action {
        guard case let .down(since, error, failures, nextProbe, probing) = state, !probing else { return .none }
        guard now >= nextProbe else { return .probeLater(at: nextProbe) }
        state = .down(since: since, lastError: error, failures: failures, nextProbe: nextProbe, probing: true)
        return .sendProbe
    }

    /// The probe could not reach the origin either.
    public mutating func probeFailed(_ error: String, now: Date) -> Action {
        guard case let .down(since, _, failures, _, _) = state else { return .none }
        let at = now.addingTimeInterval(probeDelay(after: failures + 1))
        state = .down(since: since, lastError: error, failures: failures + 1, nextProbe: at, probing: false)
        return .probeLater(at: at)
    }

    /// What a finished transfer says about its origin.
    public enum Evidence: Sendable, Equatable {
        /// It answered (or, for a probe, is there): up.
        case reached
        /// It could not be reached: down (a request), or still down (a probe).
        case unreachable
        /// Nothing about the origin itself.
        case none
    }

    /// What a transfer to the origin that ended with `error` says about that origin. Only what
    /// concerns the origin itself counts against it: no connection, no address, a timeout (and
    /// 5xx after retries, which stays an answer). A request's own fault (a malformed URL, another
    /// scheme: `.refusedAddress`) says nothing, and a failure at another origin, where a redirect
    /// sent the request (`failedElsewhere`), says the origin answered.
    /// - Parameters:
    ///   - answered: the transfer had a head before it failed.
    ///   - isProbe: the transfer was the probe of an origin that is down.
    ///   - failedElsewhere: the error names a URL at another origin (a redirect's target).
    public static func evidence(of error: FetchError?, answered: Bool, isProbe: Bool, failedElsewhere: Bool) -> Evidence {
        switch error {
        case .http?:
            return answered ? .none : .reached
        case .network?, .timeout?:
            if failedElsewhere { return answered && !isProbe ? .none : .reached }
            // A read that stalls after the answer is a timeout too; a connection dropped
            // mid-body (a network error after the head) is not the origin being away.
            let away: Bool
            if case .timeout? = error { away = true } else { away = !answered }
            if away { return .unreachable }
            return isProbe ? .reached : .none
        case nil, .invalidResponse?, .remoteChanged?:
            return isProbe || !answered ? .reached : .none
        case .cancelled?, .refusedAddress?:
            return isProbe ? .unreachable : .none
        case .budgetSpent?:
            // Never sent: the budget's verdict, not the origin's.
            return .none
        }
    }
}
