import Foundation
import Logging

/// What the engine knows of the layers its source is wrapped in: whoever builds the engine wraps
/// the real source (Fetcher's `FetchLayers.standard`: offline mode, `OriginHealthSource`, inside
/// a `FetchTracker` that counts every transfer into the engine's metrics and lists those running),
/// and hands the engine the outer source and these two views of it. CacheCore owns no wrapper:
/// it starts transfers on `source`, asks `originHealth` whether an origin is down (an entry of
/// one is served as cached, not revalidated), and puts `transfers` on the status page.
///
/// An engine built without layers (`FetchLayers.none`: CacheCore's own tests, which cannot see
/// Fetcher) starts transfers on the source as given: no origin is ever down, no transfer is
/// listed, and the origin counters (answers by class, body bytes, retries) stay at zero. Every
/// engine of the executable and the benches gets the standard layers, and so do the other
/// modules' tests over a real source (FetcherTests' `TrackedEngineTests` and
/// `OfflineEngineTests` pin what the layers add).
public struct FetchLayers: Sendable {
    /// What transfers start on: the outermost layer.
    public var source: RangeSource
    /// The transfers running now (the status page, the in-flight gauge); nil: none listed.
    public var transfers: (any TransferListing)?
    /// Which origins are down (offline mode); nil: every request goes to the source.
    public var originHealth: (any OriginHealthReporting)?

    public init(source: RangeSource, transfers: (any TransferListing)? = nil, originHealth: (any OriginHealthReporting)? = nil) {
        self.source = source
        self.transfers = transfers
        self.originHealth = originHealth
    }

    /// No layer: transfers start on `source` itself.
    public static func none(_ source: RangeSource, _ context: FetchLayerContext) -> FetchLayers { FetchLayers(source: source) }
}

/// What the engine gives the function that wraps its source (`CacheEngine.init(layers:)`): its
/// counters, so the wrapper counts into this engine's and no other's, and its clock and logger.
public struct FetchLayerContext: Sendable {
    /// The engine's counters.
    public let metrics: CacheMetrics
    /// The engine's wall clock (`CacheConfiguration.clock`): transfers' ages, origins' down times.
    public let clock: @Sendable () -> Date
    /// Where the layers' timers run: the engine clock's scheduler (`EngineClock.scheduler`).
    public let scheduler: Scheduler
    /// The engine's logger (`httpcachefs.cache`): origins going down and coming back.
    public let logger: Logger
}

/// The transfers running now, as the layer that watches them sees them (Fetcher's `FetchTracker`).
public protocol TransferListing: Sendable {
    /// The transfers running at `now`, oldest first.
    func inFlight(now: Date) -> [FetchInFlight]
    /// How many run (the metrics' gauge: cheaper than the list).
    var inFlightCount: Int { get }
}

/// Offline mode, as the engine reads it (Fetcher's `OriginHealthSource`).
public protocol OriginHealthReporting: Sendable {
    /// The origin of `url` is down now: its requests fail at once, its cached entries are served
    /// without asking.
    func isDown(url: String) -> Bool
    /// The origins that are down, by name.
    func downOrigins() -> [OriginDown]
    /// Answer the requests failed at `start` (an origin down) as jobs of `pool` (the engine's),
    /// off the caller's stack.
    func answerOn(_ pool: BlockingIOPool)
    /// No more probes (the engine shuts down).
    func stop()
}

/// One transfer in flight, for the status document.
public struct FetchInFlight: Sendable, Codable, Equatable {
    public var url: String
    /// First byte asked for, and one past the last (nil: to the end of the file).
    public var start: Int64
    public var end: Int64?
    /// The next byte to arrive: bytes `start..<position` are here.
    public var position: Int64
    public var bytes: Int64
    public var ageSeconds: Double
    /// Average since the transfer started.
    public var bytesPerSecond: Double
    /// Its class now: a read waits on it, read-ahead (near or far), or preload.
    public var priority: FetchPriority

    public init(url: String, start: Int64, end: Int64?, position: Int64, bytes: Int64, ageSeconds: Double,
                bytesPerSecond: Double, priority: FetchPriority) {
        self.url = url
        self.start = start
        self.end = end
        self.position = position
        self.bytes = bytes
        self.ageSeconds = ageSeconds
        self.bytesPerSecond = bytesPerSecond
        self.priority = priority
    }
}

/// An origin that is down, for the status document.
public struct OriginDown: Sendable, Codable, Equatable {
    /// `scheme://host:port`.
    public var origin: String
    public var since: Date
    public var lastError: String
    /// The request that found it down and the probes since.
    public var failedAttempts: Int
    public var nextProbeAt: Date

    public init(origin: String, since: Date, lastError: String, failedAttempts: Int, nextProbeAt: Date) {
        self.origin = origin
        self.since = since
        self.lastError = lastError
        self.failedAttempts = failedAttempts
        self.nextProbeAt = nextProbeAt
    }

    /// The origin `url` belongs to (`scheme://host:port`, the port only if the URL names one), as
    /// the engine names origins everywhere (rotating ETags, If-Range, offline mode).
    public static func name(of url: String) -> String { OriginVersions.originName(url) }
}
