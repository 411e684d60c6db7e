/// What a cache tier in front of the origins did (`--tier`): bytes per node, bytes that came
/// from the origin instead, errors per node, nodes being skipped. Part of the status document
/// (`tier`, absent without a tier) and of `/metrics`.
public struct TierStatus: Sendable, Codable, Equatable {
    public struct Node: Sendable, Codable, Equatable {
        /// The node's base URL, e.g. `http://10.0.0.5:8080`.
        public var node: String
        public var bytes: Int64
        public var errors: Int64
        /// Skipped now after a failure (its slices go to the next node, then the origin).
        public var backedOff: Bool
        public init(node: String, bytes: Int64, errors: Int64, backedOff: Bool) {
            self.node = node
            self.bytes = bytes
            self.errors = errors
            self.backedOff = backedOff
        }
    }

    public var nodes: [Node]
    /// Bytes of tiered files that came from the origin (open-time probes and fallbacks).
    public var originBytes: Int64
    /// The largest read-ahead of a reader that takes bytes as fast as they come (a copy): with a
    /// tier it is larger by default, to overlap the nodes' cache-lock waits. Set by the engine;
    /// absent in documents of older versions.
    public var readAheadMax: Int64? = nil

    public init(nodes: [Node], originBytes: Int64) {
        self.nodes = nodes
        self.originBytes = originBytes
    }
}

/// A `RangeSource` that fetches through a cache tier reports what it did; the engine shows it.
public protocol TierReporting: Sendable {
    func tierStatus() -> TierStatus
    /// Bytes of the file with cache key `key` from the tier and from the origin, in this
    /// process's life; nil: none fetched.
    func tierSplit(ofKey key: String) -> (tier: Int64, origin: Int64)?
}
