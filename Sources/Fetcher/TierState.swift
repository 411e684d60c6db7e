import Foundation

/// What the tier source shares across its transfers: node health and the counters the status
/// page and `/metrics` show. Any thread; one lock, held only to read or bump values.
// @unchecked: every `var` is read and written with `lock` held (a `Mutex` would say so to the
// compiler; not converted yet, to keep this file's diff out of the tier work under way).
public final class TierState: @unchecked Sendable {
    private let lock = NSLock()
    // Protected by `lock`.
    private var health: TierHealth
    private var nodeBytes: [String: Int64] = [:]
    private var nodeErrors: [String: Int64] = [:]
    private var originBytesCount: Int64 = 0
    private var keyBytes: [String: Origins] = [:]
    /// Seconds, monotonic; tests inject their own.
    let clock: @Sendable () -> Double

    /// The most files whose tier/origin split is remembered (a daemon's lifetime, not persisted).
    static let keptKeys = 10_000

    public init(health: TierHealth = TierHealth(),
                clock: @escaping @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }) {
        self.health = health
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
        return lock.withLock {
            Snapshot(nodeBytes: nodeBytes, nodeErrors: nodeErrors, originBytes: originBytesCount,
                     backedOff: health.backedOff(now: now))
        }
    }

    /// Where the bytes of the file with cache key `key` came from (nil: none fetched here).
    public func origins(ofKey key: String) -> Origins? { lock.withLock { keyBytes[key] } }

    func isAvailable(_ node: String) -> Bool {
        let now = clock()
        return lock.withLock { health.isAvailable(node, now: now) }
    }

    func failed(_ node: String, error: String) {
        let now = clock()
        lock.withLock {
            health.failed(node, now: now, error: error)
            nodeErrors[node, default: 0] += 1
        }
    }

    func succeeded(_ node: String) { lock.withLock { health.succeeded(node) } }

    func delivered(_ count: Int, node: String?, key: String) {
        lock.withLock {
            if let node { nodeBytes[node, default: 0] += Int64(count) } else { originBytesCount += Int64(count) }
            if keyBytes[key] == nil, keyBytes.count >= Self.keptKeys { keyBytes.removeAll(keepingCapacity: true) }
            if node != nil { keyBytes[key, default: Origins()].tierBytes += Int64(count) }
            else { keyBytes[key, default: Origins()].originBytes += Int64(count) }
        }
    }
}
