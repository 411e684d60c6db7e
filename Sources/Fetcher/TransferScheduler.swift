import CacheCore

/// Which transfers yield so that the bytes a reader waits for come first. Pure state with the
/// clock passed in (a `MonotonicInstant`): the multi loop feeds it and applies what it decides
/// (pausing a held transfer's receiving with `curl_easy_pause`, so its connection's window closes
/// and the link carries the others).
///
/// Rules, per origin (scheme, host and port: transfers to one origin share a path, and those to
/// others may not):
/// - A `.waiting` transfer whose oldest waiting read has waited `patience` or longer is *behind*.
///   While one is, every transfer of a lower class to that origin is held, except the near
///   read-ahead of the reader the late read belongs to: a copy's own streams are what fills a link
///   that caps each connection, and on a link that one connection fills they take nothing from it.
/// - `.scan` and `.preload` transfers are held while any transfer of a higher class to that
///   origin runs: a library scan takes what the players leave, warm-up what the scan leaves.
/// - `.waitedScan` (a scanner's read waits on it) is held while a player's waiting read to that
///   origin runs, at once as every scan transfer is, and never for read-ahead: a film never waits
///   for a probe, and a probe does not wait out a copy whose near streams follow each other for
///   as long as it runs.
/// - Nothing else is held: on a link with room, read-ahead runs at full speed. Reads that are
///   not behind cost read-ahead nothing, so a copy on a fast link keeps all its streams.
/// Held transfers are let go as soon as no rule holds them; `nextCheck` says when a waiting read
/// becomes behind, so the loop wakes up for it.
struct TransferScheduler: Sendable {
    struct Transfer: Sendable, Equatable {
        var origin: String
        var priority: FetchPriority
        var owner: Int?
        /// When the oldest read waiting on it began waiting, for `.waiting`.
        var waitingSince: MonotonicInstant?
    }

    /// How long a waiting read may wait before lower classes yield to it.
    let patience: Duration
    private(set) var transfers: [Int: Transfer] = [:]

    init(patience: Duration) { self.patience = patience }

    mutating func add(_ id: Int, origin: String, priority: FetchPriority, owner: Int?, now: MonotonicInstant) {
        transfers[id] = Transfer(origin: origin, priority: priority, owner: owner,
                                 waitingSince: priority == .waiting ? now : nil)
    }

    mutating func remove(_ id: Int) { transfers.removeValue(forKey: id) }

    /// A read began or stopped waiting on transfer `id`; the oldest one still waiting has waited
    /// `waited`.
    mutating func setPriority(_ id: Int, _ priority: FetchPriority, waited: Duration, now: MonotonicInstant) {
        guard transfers[id] != nil else { return }
        transfers[id]!.priority = priority
        transfers[id]!.waitingSince = priority == .waiting ? now - waited : nil
    }

    struct Decision: Equatable {
        /// Every transfer that should be held now.
        var held: Set<Int>
        /// When to decide again although nothing changed (a waiting read becomes behind).
        var nextCheck: MonotonicInstant?
    }

    func decide(now: MonotonicInstant) -> Decision {
        var behindOwners: [String: Set<Int?>] = [:]
        var best: [String: FetchPriority] = [:]
        var nextCheck: MonotonicInstant?
        for t in transfers.values {
            best[t.origin] = min(best[t.origin] ?? .preload, t.priority)
            guard t.priority == .waiting, let since = t.waitingSince else { continue }
            if now >= since + patience {
                behindOwners[t.origin, default: []].insert(t.owner)
            } else {
                nextCheck = min(nextCheck ?? since + patience, since + patience)
            }
        }
        var held = Set<Int>()
        for (id, t) in transfers where t.priority > .waiting {
            if let owners = behindOwners[t.origin] {
                let ownStream = t.priority == .near && t.owner != nil && owners.contains(t.owner) && owners.count == 1
                if !ownStream { held.insert(id) }
            } else if Self.yieldsAtOnce(t.priority), let b = best[t.origin], b < t.priority {
                held.insert(id)
            }
        }
        return Decision(held: held, nextCheck: nextCheck)
    }

    /// Whether a transfer of class `p` yields to every higher class to its origin at once, not
    /// only to a read that is behind: a scan's (above a waited scan there is only `.waiting`)
    /// and warm-up's.
    static func yieldsAtOnce(_ p: FetchPriority) -> Bool { p == .waitedScan || p >= .scan }

    /// The origin part of a URL (`scheme://host:port`), by which transfers share a path.
    static func origin(of url: String) -> String {
        guard let schemeEnd = url.firstByteRange(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority
        return url[..<schemeEnd.upperBound].lowercased() + hostPort.lowercased()
    }
}
