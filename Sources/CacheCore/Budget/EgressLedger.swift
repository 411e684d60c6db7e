import Foundation
import Logging

/// What each origin has used of its egress budget (`--egress-budget`), and whether a fetch of a
/// class may still go to it. One per daemon (or command) holding the cache, shared by the
/// fetcher, which asks and counts, and the status document, which shows it.
///
/// Design: the fetcher's loop asks `refusal` once per request it is about to send (and of each
/// running transfer after a turn that brought bytes), and counts the bytes of every turn with
/// `add`: a lock and a dictionary look-up each, no I/O but the save below. Classes yield in
/// order as a budget nears its end (`EgressBudget.share`); a transfer is stopped once its class's
/// share is used, so the budget is passed by at most the bytes of one turn of the running
/// transfers (a receive buffer each).
///
/// Persistence: `<cache-dir>/egress-budget.json` (owner-only), the use per origin and period,
/// written at most every 4 MiB or 10 s of use (on the caller's thread: a file of a few hundred
/// bytes, written then renamed), when a budget is spent, and at `save()` (the engine's stop). A
/// restart reads it: the use of the current period survives it. A file that cannot be read is
/// logged and started afresh (the budget then counts from zero); one that cannot be written is
/// logged once.
///
/// Periods: an account lasts until its period's end, then a new period starts from zero. A clock
/// that goes back never gives a budget back (the account stands until its own end), and one that
/// jumps forward past the end starts the period holding the new time.
public final class EgressLedger: Sendable {
    /// Budgets by origin (`scheme://host:port`, `originKey`), and one for every other origin.
    public struct Rules: Sendable, Equatable, CustomStringConvertible {
        public var everyOrigin: EgressBudget?
        public var origins: [String: EgressBudget]

        public init(everyOrigin: EgressBudget? = nil, origins: [String: EgressBudget] = [:]) {
            self.everyOrigin = everyOrigin
            self.origins = origins
        }

        public var isEmpty: Bool { everyOrigin == nil && origins.isEmpty }

        public func budget(for origin: String) -> EgressBudget? { origins[origin] ?? everyOrigin }

        public var description: String {
            ((everyOrigin.map { ["\($0)"] } ?? []) + origins.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" })
                .joined(separator: ", ")
        }
    }

    /// Why a fetch may not go now.
    public struct Refusal: Sendable, Equatable {
        public var origin: String
        public var budget: EgressBudget
        public var used: Int64
        /// When the period ends and the budget starts again.
        public var resetsAt: Date
        /// Only the lower classes are refused (the budget is near its end, not spent).
        public var spent: Bool
    }

    struct Account: Codable, Equatable {
        var origin: String
        var period: String
        var start: Date
        var end: Date
        var used: Int64
    }

    private struct State {
        var accounts: [String: Account] = [:]
        var unsaved: Int64 = 0
        var savedAt: Date
        var writeFailed = false
    }

    public let rules: Rules
    private let file: String?
    private let calendar: Calendar
    private let clock: @Sendable () -> Date
    private let logger: Logger
    private let state: LockedValue<State>
    private let writing = LockedValue(())

    static let saveEveryBytes: Int64 = 4 << 20
    static let saveEverySeconds: TimeInterval = 10

    /// - Parameters:
    ///   - file: where the use is kept (nil: in memory only, tests).
    ///   - calendar: whose midnights end the periods (the local time zone's).
    ///   - clock: the wall clock (`EngineClock.wall`; tests: one of their own).
    public init(rules: Rules, file: String?, calendar: Calendar = .current, logger: Logger,
                clock: @escaping @Sendable () -> Date) {
        self.rules = rules
        self.file = file
        self.calendar = calendar
        self.clock = clock
        self.logger = logger
        var s = State(savedAt: clock())
        if let file, FileManager.default.fileExists(atPath: file) {
            do {
                let data = try Data(contentsOf: URL(fileURLWithPath: file))
                for a in try Self.decoder.decode(Saved.self, from: data).accounts { s.accounts[a.origin] = a }
            } catch {
                logger.warning("the egress budgets' use could not be read: counting from zero",
                               metadata: ["file": "\(file)", "error": "\(error)"])
            }
        }
        state = LockedValue(s)
    }

    /// The key of `url`'s origin: `scheme://host:port`, lower case, the port always written, no
    /// login. nil: not an http(s) URL.
    public static func originKey(of url: String) -> String? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        var hostPort = (authority.split(separator: "@", omittingEmptySubsequences: false).last.map(String.init) ?? "").lowercased()
        guard !hostPort.isEmpty else { return nil }
        let hasPort: Bool
        if hostPort.hasPrefix("[") { hasPort = hostPort.contains("]:") } else { hasPort = hostPort.contains(":") }
        if !hasPort { hostPort += scheme == "https" ? ":443" : ":80" }
        return "\(scheme)://\(hostPort)"
    }

    /// Whether `origin` (a key) has a budget at all.
    public func governs(_ origin: String) -> Bool { rules.budget(for: origin) != nil }

    /// Why a fetch of class `priority` may not go to `origin` now; nil: it may.
    public func refusal(_ origin: String, priority: FetchPriority) -> Refusal? {
        guard let budget = rules.budget(for: origin) else { return nil }
        let now = clock()
        return state.withLock { s -> Refusal? in
            let a = account(&s, origin, budget, now)
            guard a.used >= budget.share(for: priority) else { return nil }
            return Refusal(origin: origin, budget: budget, used: a.used, resetsAt: a.end, spent: a.used >= budget.bytes)
        }
    }

    /// `bytes` more came from `origin` (a key).
    public func add(_ origin: String, bytes: Int64) {
        guard bytes > 0, let budget = rules.budget(for: origin) else { return }
        let now = clock()
        let (spentNow, save) = state.withLock { s -> (Account?, Bool) in
            var a = account(&s, origin, budget, now)
            let before = a.used
            a.used += bytes
            s.accounts[origin] = a
            s.unsaved += bytes
            let spentNow = before < budget.bytes && a.used >= budget.bytes ? a : nil
            let save = spentNow != nil || s.unsaved >= Self.saveEveryBytes || now.timeIntervalSince(s.savedAt) >= Self.saveEverySeconds
            return (spentNow, save)
        }
        if let a = spentNow {
            logger.warning("egress budget spent: fetches from this origin fail until it resets; cached bytes are still served",
                           metadata: ["origin": "\(origin)", "budget": "\(budget)", "used": "\(a.used)",
                                      "resets": "\(Self.localTime(a.end, calendar))"])
        }
        if save { self.save() }
    }

    /// Writes the use now (the engine's stop; `add` when due).
    public func save() {
        guard let file else { return }
        let saved = state.withLock { s -> Saved in
            s.unsaved = 0
            s.savedAt = clock()
            return Saved(accounts: s.accounts.values.sorted { $0.origin < $1.origin })
        }
        writing.withLock { _ in
            do {
                let data = try Self.encoder.encode(saved)
                let temporary = file + ".new"
                guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else {
                    throw CocoaError(.fileWriteUnknown)
                }
                guard rename(temporary, file) == 0 else { throw CocoaError(.fileWriteUnknown) }
            } catch {
                let first = state.withLock { s in
                    defer { s.writeFailed = true }
                    return !s.writeFailed
                }
                if first {
                    logger.error("the egress budgets' use could not be saved: a restart would count from zero",
                                 metadata: ["file": "\(file)", "error": "\(error)"])
                }
            }
        }
    }

    /// Every origin with a budget that has an account (it was fetched from), and every origin
    /// named in the rules, with its use in the current period.
    public func status() -> [EgressBudgetStatus] {
        let now = clock()
        return state.withLock { s in
            var origins = Set(rules.origins.keys)
            for (o, _) in s.accounts where governs(o) { origins.insert(o) }
            return origins.sorted().compactMap { origin in
                guard let budget = rules.budget(for: origin) else { return nil }
                let a = account(&s, origin, budget, now)
                let refused = FetchPriority.allCases.filter { a.used >= budget.share(for: $0) }
                return EgressBudgetStatus(origin: origin, budget: "\(budget)", budgetBytes: budget.bytes, usedBytes: a.used,
                                          leftBytes: max(0, budget.bytes - a.used), periodStart: a.start, resetsAt: a.end,
                                          spent: a.used >= budget.bytes,
                                          yielding: Self.yielding(refused))
            }
        }
    }

    /// Seconds until `url`'s origin's budget resets, if it is spent (the proxy's `Retry-After`).
    public func retryAfter(url: String) -> Int? {
        guard let origin = Self.originKey(of: url), let r = refusal(origin, priority: .waiting) else { return nil }
        return max(1, Int(r.resetsAt.timeIntervalSince(clock()).rounded(.up)))
    }

    /// The account of `origin` at `now`: the stored one while its period lasts, a new one from
    /// zero once it ended (see the type's note on clocks).
    private func account(_ s: inout State, _ origin: String, _ budget: EgressBudget, _ now: Date) -> Account {
        let period = "\(budget.period)"
        if let a = s.accounts[origin], now < a.end, a.period == period || now >= a.start {
            return a
        }
        let w = budget.period.window(containing: now, calendar: calendar)
        var fresh = Account(origin: origin, period: period, start: w.start, end: w.end, used: 0)
        // A period that changed between runs: what was used still counts until the old one ends.
        if let a = s.accounts[origin], now < a.end { fresh.used = a.used }
        s.accounts[origin] = fresh
        return fresh
    }

    /// Who no longer fetches: "background", "background and scanners", "every reader", or nil.
    static func yielding(_ refused: [FetchPriority]) -> String? {
        if refused.contains(.waiting) { return "every reader" }
        if refused.contains(.scan) { return "background and scanners" }
        if refused.contains(.preload) { return "background" }
        return nil
    }

    static func localTime(_ date: Date, _ calendar: Calendar) -> String {
        let f = ISO8601DateFormatter()
        f.timeZone = calendar.timeZone
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: date)
    }

    private struct Saved: Codable {
        var version = 1
        var accounts: [Account]
    }

    private static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .secondsSince1970
        e.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return e
    }

    private static var decoder: JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .secondsSince1970
        return d
    }
}

/// One origin's budget in the status document (`StatusDocument.budgets`) and /metrics.
public struct EgressBudgetStatus: Sendable, Codable, Equatable {
    /// `scheme://host:port`.
    public var origin: String
    /// As written: `1M/day`, `10G/month@15`.
    public var budget: String
    public var budgetBytes: Int64
    public var usedBytes: Int64
    public var leftBytes: Int64
    public var periodStart: Date
    /// When the period ends and the budget starts again.
    public var resetsAt: Date
    /// Every fetch from the origin fails until `resetsAt` (cached bytes are still served).
    public var spent: Bool
    /// Which readers no longer fetch as the budget nears its end: "background", "background and
    /// scanners", "every reader"; absent while all do.
    public var yielding: String?
}
