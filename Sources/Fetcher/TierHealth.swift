import Foundation

/// Which tier nodes are skipped for now: a node that failed (connect error, timeout, 5xx, an
/// answer with garbage, a wrong Content-Range or another version) is in back-off for
/// `baseDelay`, doubling with each failure in a row up to `maxDelay`; one good answer clears it.
/// While in back-off, its slices go to the next node in their order, then to the origin.
///
/// Pure value with an injected clock (`now` in seconds): tests step time by hand. The fetcher
/// keeps one behind a lock (`TierState`). Separate from any "origin is down" tracking: a tier
/// node down never makes a read fail.
public struct TierHealth: Sendable, Equatable {
    public struct Node: Sendable, Equatable {
        /// Failures since the last success.
        public var failures = 0
        /// In back-off until this time.
        public var until: Double = 0
        public var lastError: String?
    }

    public var baseDelay: Double
    public var maxDelay: Double
    public private(set) var nodes: [String: Node] = [:]

    public init(baseDelay: Double = 2, maxDelay: Double = 60) {
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    public func isAvailable(_ node: String, now: Double) -> Bool {
        guard let n = nodes[node] else { return true }
        return now >= n.until
    }

    public mutating func failed(_ node: String, now: Double, error: String) {
        var n = nodes[node] ?? Node()
        n.failures += 1
        n.until = now + min(maxDelay, baseDelay * pow(2, Double(min(n.failures - 1, 30))))
        n.lastError = error
        nodes[node] = n
    }

    public mutating func succeeded(_ node: String) {
        if nodes[node] != nil { nodes[node] = nil }
    }

    /// Nodes in back-off at `now`, sorted.
    public func backedOff(now: Double) -> [String] {
        nodes.filter { now < $0.value.until }.map(\.key).sorted()
    }
}
