import CacheCore
import Foundation
import Logging

/// A `RangeSource` that fetches the bytes of tiered origins from a cache tier (nginx nodes with
/// `slice` + `proxy_cache`, see `mount-helpers/tier.sh`) and everything else from the origin.
///
/// What goes where:
/// - A URL under no `--tier` origin: straight to the origin source, untouched.
/// - The open-time probe, and any fetch whose version the engine does not know yet (no `If-Range`
///   validator or no length): to the origin, so the version a reader binds to is always the
///   origin's current one (a tier may still hold an older one). The probe goes without `If-Range`,
///   so a changed file costs the origin the probe's range, not a whole body per host.
/// - Every other fetch is cut at the tier's slice boundaries (`TierRouter.piece`); each piece goes
///   to its home node, then the next nodes in its rendezvous order, then the origin
///   (`TierTransfer`). The engine's parallel streams and read-ahead keep their shape: each of
///   its fetches is one such transfer.
///
/// Tier requests carry the version the reader is bound to (`X-Httpcachefs-Version`, part of the
/// node's cache key) and the entry's cache key (`X-Httpcachefs-Key`, so rotating query tokens
/// meet in one tier entry); every answer is checked against that version before a byte is
/// passed on. Cache keys stay the origin's URLs: turning the tier on or off keeps the cache.
public final class TierRangeSource: RangeSource, Sendable {
    let origin: RangeSource
    let tier: RangeSource
    let tiers: [(spec: TierSpec, router: TierRouter)]
    public let state: TierState
    let logger: Logger?

    /// - Parameters:
    ///   - origin: fetches from origins (probes, fallbacks, untiered URLs).
    ///   - tier: fetches from tier nodes (few retries, short timeouts: another node or the
    ///     origin is the retry).
    public init(origin: RangeSource, tier: RangeSource, tiers: [TierSpec], state: TierState,
                logger: Logger? = nil) {
        self.logger = logger
        self.origin = origin
        self.tier = tier
        self.tiers = tiers.map { ($0, TierRouter(nodes: $0.nodes, sliceSize: $0.sliceSize)) }
        self.state = state
    }

    public static let versionHeader = "X-Httpcachefs-Version"
    public static let keyHeader = "X-Httpcachefs-Key"

    public func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        guard let tiered = tiers.first(where: { $0.spec.covers(request.url) }) else {
            return origin.start(request, sink: sink)
        }
        let key = request.cacheKey ?? request.url
        if request.isProbe {
            // The open-time check asks the origin without `If-Range`: its answer is the range asked
            // for (a byte or a file's header) with the current version's validators either way.
            // With `If-Range`, a changed file came back as a 200 with its whole body, which the
            // origin pushed into the connection before it was cut (several MiB on loopback, a
            // link's worth on a WAN) for every host that held the old version: the new version's
            // bytes belong to the tier. The engine takes another validator on a 206 as a new
            // version and plans its reads again, through the tier.
            var check = request
            check.sendsIfRange = false
            return origin.start(check, sink: OriginCountingSink(sink, state: state, key: key))
        }
        guard let version = TierVersion(request), request.start < version.end(of: request) else {
            return origin.start(request, sink: OriginCountingSink(sink, state: state, key: key))
        }
        let transfer = TierTransfer(request: request, sink: sink, version: version, key: key,
                                    router: tiered.router, source: self)
        transfer.next()
        return transfer
    }
}

/// The version a tiered fetch is bound to, and how an answer shows it.
struct TierVersion: Equatable {
    /// The `If-Range` validator: a strong ETag (`"..."`) or an HTTP-date (`Last-Modified`).
    var validator: String
    var length: Int64
    var ignoreETag: Bool

    init?(_ request: FetchRequest) {
        guard let validator = request.ifRange, let length = request.expectedLength, length > 0 else { return nil }
        self.validator = validator
        self.length = length
        ignoreETag = request.ignoreETag
    }

    init(validator: String, length: Int64, ignoreETag: Bool = false) {
        self.validator = validator
        self.length = length
        self.ignoreETag = ignoreETag
    }

    func end(of request: FetchRequest) -> Int64 { min(request.end ?? length, length) }

    /// The header value the node's cache key includes: a new version is a new tier entry.
    var headerValue: String {
        // A validator with a line break is rare: look for one before Foundation's replace.
        let oneLine = validator.utf8.contains(UInt8(ascii: "\n")) ? validator.replacingOccurrences(of: "\n", with: " ") : validator
        return "\(oneLine) \(length)"
    }

    /// Why `head` (to a request for bytes from `offset`) is not this version's bytes from
    /// `offset`; nil when it is.
    func mismatch(_ head: ResponseHead, offset: Int64) -> String? {
        if head.status != 206 && !(head.status == 200 && offset == 0) { return "status \(head.status), not 206" }
        if head.bodyStart != offset { return "body starts at \(head.bodyStart), not \(offset)" }
        guard head.totalLength == length else {
            return "length \(head.totalLength.map(String.init) ?? "unknown"), not \(length)"
        }
        let theirs = validator.hasPrefix("\"") && !ignoreETag ? head.etag : head.lastModified
        guard theirs == validator else { return "version \(theirs ?? "none"), not \(validator)" }
        return nil
    }
}

/// Passes an origin transfer through, counting its bytes as the origin's.
final class OriginCountingSink: FetchSink, Sendable {
    let inner: FetchSink
    let state: TierState
    let key: String

    init(_ inner: FetchSink, state: TierState, key: String) {
        self.inner = inner
        self.state = state
        self.key = key
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool { inner.fetchDidReceiveHead(head) }
    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let ok = inner.fetchDidReceive(bytes)
        if ok { state.delivered(bytes.count, node: nil, key: key) }
        return ok
    }
    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow {
        let flow = inner.fetchOffer(bytes)
        // `.stop` too: a fetch's last bytes are taken with it (the probe's only byte, say).
        if flow != .pause { state.delivered(bytes.count, node: nil, key: key) }
        return flow
    }
    func fetchDidDrain() { inner.fetchDidDrain() }
    func fetchDidFinish(_ error: FetchError?) { inner.fetchDidFinish(error) }
}

extension TierRangeSource: TierReporting {
    public func tierStatus() -> TierStatus {
        let s = state.snapshot()
        let nodes = Array(Set(tiers.flatMap(\.spec.nodes))).sorted()
        return TierStatus(nodes: nodes.map {
            TierStatus.Node(node: $0, bytes: s.nodeBytes[$0] ?? 0, errors: s.nodeErrors[$0] ?? 0,
                            backedOff: s.backedOff.contains($0))
        }, originBytes: s.originBytes)
    }

    public func tierSplit(ofKey key: String) -> (tier: Int64, origin: Int64)? {
        state.origins(ofKey: key).map { ($0.tierBytes, $0.originBytes) }
    }
}
