import CacheCore
import Foundation

/// What the tier source shares across its transfers: node health and the counters the status
/// page and `/metrics` show. Any thread; one leaf lock, held only to read or bump values.
public final class TierState: Sendable {
    private struct Counters {
        var health: TierHealth
        var nodeBytes: [String: Int64] = [:]
        var nodeErrors: [String: Int64] = [:]
        var originBytes: Int64 = 0
        var keyBytes: [String: Origins] = [:]
    }
    private let counters: LockedValue<Counters>
    /// Seconds, monotonic: the fetcher's clock (`FetcherConfiguration.clock`); tests give their own.
    let clock: @Sendable () -> Double

    /// The most files whose tier/origin split is remembered (a daemon's lifetime, not persisted).
    static let keptKeys = 10_000

    public init(health: TierHealth = TierHealth(),
                clock: @escaping @Sendable () -> Double) {
        counters = LockedValue(Counters(health: health))
        self.clock = clock
    }

    /// Where one file's fetched bytes came from, in this process's life.
    public struct Origins: Sendable, Equatable, Codable {
        public var tierBytes: Int64 = 0
        public var originBytes: Int64 = 0
        public init(tierBytes: Int64 = 0, originBytes: Int64 = 0) {
            self.tierBytes = tierBytes
            self.originBytes = originBytes
        }
    }

    /// A snapshot for the status document and `/metrics`.
    public struct Snapshot: Sendable, Equatable, Codable {
        /// Bytes each node delivered (accepted answers only).
        public var nodeBytes: [String: Int64]
        /// Failed or refused answers per node.
        public var nodeErrors: [String: Int64]
        /// Bytes of tiered URLs that came from the origin (probes and fallbacks).
        public var originBytes: Int64
        /// Nodes being skipped now.
        public var backedOff: [String]
    }

    public func snapshot() -> Snapshot {
        let now = clock()
        return counters.withLock {
            Snapshot(nodeBytes: $0.nodeBytes, nodeErrors: $0.nodeErrors, originBytes: $0.originBytes,
                     backedOff: $0.health.backedOff(now: now))
        }
    }

    /// Where the bytes of the file with cache key `key` came from (nil: none fetched here).
    public func origins(ofKey key: String) -> Origins? { counters.withLock { $0.keyBytes[key] } }

    func isAvailable(_ node: String) -> Bool {
        let now = clock()
        return counters.withLock { $0.health.isAvailable(node, now: now) }
    }

    func failed(_ node: String, error: String) {
        let now = clock()
        counters.withLock {
            $0.health.failed(node, now: now, error: error)
            $0.nodeErrors[node, default: 0] += 1
        }
    }

    func succeeded(_ node: String) { counters.withLock { $0.health.succeeded(node) } }

    func delivered(_ count: Int, node: String?, key: String) {
        counters.withLock { c in
            if let node { c.nodeBytes[node, default: 0] += Int64(count) } else { c.originBytes += Int64(count) }
            if c.keyBytes[key] == nil, c.keyBytes.count >= Self.keptKeys { c.keyBytes.removeAll(keepingCapacity: true) }
            if node != nil { c.keyBytes[key, default: Origins()].tierBytes += Int64(count) }
            else { c.keyBytes[key, default: Origins()].originBytes += Int64(count) }
        }
    }
}
