import CacheCore
import Foundation

/// How the libcurl fetcher talks to origins.
///
/// Proxies: with `upstreamProxy` nil, libcurl itself honours `http_proxy`, `https_proxy`,
/// `all_proxy` and `no_proxy` from the environment. Credentials in the URL (`user:pass@host`)
/// are sent as Basic auth by libcurl; `access` adds a netrc file and a user for other URLs.
public struct FetcherConfiguration: Sendable {
    /// The fetcher's time (`EngineClock`, given by the executable's wiring; tests may give their
    /// own): the monotonic clock for retries, rate and bandwidth limits and connection checks,
    /// the wall clock for S3 signatures and a bandwidth timetable's hour. The only clock it reads.
    public var clock: EngineClock
    /// `User-Agent`, e.g. "httpcachefs/0.1".
    public var userAgent: String
    /// Extra request headers, each "Name: value" (`--header`): credentials, every one of them
    /// (an API key looks like any other header), sent only where `access.scope` allows.
    public var extraHeaders: [String]
    /// Sent as `Via` on every request: the daemon's proxy refuses a request that carries it
    /// (`ProxyConfiguration.loopMarker`), so a redirect back into the proxy ends at once. nil: none.
    public var via: String? = nil
    /// The S3 endpoint of the user's s3:// URLs: every attempt of a request to it is signed
    /// (AWS Signature Version 4, at the attempt's time; `CurlTransfer.beginAttempt`). nil: none.
    public var s3: S3Endpoint? = nil
    /// The buckets of the user's s3:// URLs, each with its own endpoint and keys (a mount
    /// joining a daemon brings its own): a request under one is signed with that bucket's keys
    /// only (`S3Buckets`). nil: none.
    public var s3Buckets: S3Buckets? = nil
    /// Proxy URL for every request (overrides the environment).
    public var upstreamProxy: String?
    /// Skip TLS certificate and host name verification.
    public var insecure: Bool
    /// Time allowed to establish a connection (TCP + TLS).
    public var connectTimeout: TimeInterval
    /// Stall detection: a transfer slower than `lowSpeedLimit` bytes/s for `lowSpeedTime`
    /// (whole seconds, at least 1) is a timeout. This also bounds a server that accepts the
    /// request and never answers.
    public var lowSpeedLimit: Int
    public var lowSpeedTime: TimeInterval
    /// Retries after a failure that made no progress (5xx, 429, dropped connection...).
    /// An attempt that delivered new bytes resets the count.
    public var maxRetries: Int
    /// First retry delay; doubles with each consecutive failure.
    public var retryBaseDelay: TimeInterval
    /// Cap for backoff and for honoured `Retry-After` values.
    public var maxRetryDelay: TimeInterval
    /// Parallel connections per host (HTTP/2 multiplexes over fewer).
    public var maxConnections: Int
    /// libcurl's receive buffer: the most bytes handed to the sink in one call.
    public var receiveBufferSize: Int
    /// Connections across all hosts (`--max-connections`); further transfers wait in libcurl's
    /// queue. Downloads hold at most one receive buffer per connection besides the engine's
    /// write budget (a transfer past its share of that is paused).
    public var maxTotalConnections: Int
    /// Transfers at once to one origin (`--max-connections-per-host`), within `maxTotalConnections`;
    /// nil: only the total bounds them.
    public var maxTransfersPerOrigin: Int?
    /// Requests per second to each origin (`--tpslimit`); 0: no limit.
    public var requestsPerSecond: Double = 0
    /// Requests at once after a quiet spell (`--tpslimit-burst`), at least 1.
    public var requestBurst = 1
    /// `--egress-budget`: each origin's bytes per period, counted and enforced by the loop
    /// (`CurlMultiLoop`); nil: none.
    public var egressLedger: EgressLedger?
    /// Origin bytes per second across all transfers (`--bwlimit`); 0: no limit.
    public var maxBytesPerSecond: Int64 = 0
    /// `--bwlimit` as a timetable (`08:00,512K 23:00,off`): the limit changes at its times, and
    /// `maxBytesPerSecond` is not used.
    public var bandwidthTimetable: BandwidthTimetable?
    /// `--bwlimit` for the status document (`CacheConfiguration.bandwidthLimit`): the limit at a
    /// time and the timetable's next change; nil without a limit.
    public var bandwidthReport: (@Sendable (Date) -> BandwidthLimitStatus)? {
        if let table = bandwidthTimetable { return { table.status(at: $0) } }
        guard maxBytesPerSecond > 0 else { return nil }
        let rate = maxBytesPerSecond
        return { _ in BandwidthLimitStatus(bytesPerSecond: rate) }
    }
    /// A read waiting this long on a transfer makes the lower classes of its origin yield
    /// (`TransferScheduler`): long enough that a copy's reads on a fast link never trigger it
    /// (each waits a few milliseconds for its bytes), short enough that a player's next bytes
    /// do not queue behind read-ahead.
    public var yieldAfter: Double = 0.1
    /// Origins never connected to: cloud metadata and link-local addresses unless opened.
    public var addressPolicy: AddressPolicy
    /// Fixed name resolutions in libcurl's `CURLOPT_RESOLVE` form, `HOST:PORT:ADDRESS`: the
    /// named host is connected at that address without asking DNS (tests pin names to loopback).
    public var pinnedAddresses: [String]
    /// Trust and credentials: a private CA, a netrc file, a user and password, where they go.
    public var access = OriginAccess()
    /// Redirects are followed by the fetcher itself, hop by hop (`TransferState`), at most this
    /// many per attempt; false: a 3xx is an error status (a tier node never redirects).
    public var followsRedirects = true
    public static let maxRedirects = 10
    /// `--allow-host` patterns: when given, a redirect to another origin must match one (the
    /// proxy checks the first URL itself). Empty: any host.
    public var allowedHosts: [HostPattern] = []

    public init(clock: EngineClock,
                userAgent: String = "httpcachefs",
                extraHeaders: [String] = [],
                upstreamProxy: String? = nil,
                insecure: Bool = false,
                connectTimeout: TimeInterval = 10,
                lowSpeedLimit: Int = 1,
                lowSpeedTime: TimeInterval = 30,
                maxRetries: Int = 4,
                retryBaseDelay: TimeInterval = 0.25,
                maxRetryDelay: TimeInterval = 30,
                maxConnections: Int = 8,
                receiveBufferSize: Int = 128 << 10,
                maxTotalConnections: Int = 32,
                addressPolicy: AddressPolicy = .standard,
                pinnedAddresses: [String] = []) {
        self.clock = clock
        self.userAgent = userAgent
        self.extraHeaders = extraHeaders
        self.upstreamProxy = upstreamProxy
        self.insecure = insecure
        self.connectTimeout = connectTimeout
        self.lowSpeedLimit = lowSpeedLimit
        self.lowSpeedTime = lowSpeedTime
        self.maxRetries = maxRetries
        self.retryBaseDelay = retryBaseDelay
        self.maxRetryDelay = maxRetryDelay
        self.maxConnections = maxConnections
        self.receiveBufferSize = receiveBufferSize
        self.maxTotalConnections = maxTotalConnections
        self.addressPolicy = addressPolicy
        self.pinnedAddresses = pinnedAddresses
    }

    /// The settings for a cache tier's nodes, from the origin's (headers and credentials are
    /// forwarded by the node to its origin): no retries and short timeouts, since a failed node is
    /// retried on the next node or the origin at once. A node must also keep up a speed a reader
    /// can use (`tierLowSpeedLimit`) over a window shorter than the origin's (half of it, so
    /// under `--read-timeout`, which bounds the origin's): a node that trickles a few bytes a
    /// second passed a 1 byte/s floor, so every read of its slices timed out, the node was never
    /// backed off, and the next read asked it again.
    ///
    /// Nodes get the user's credentials (they forward them to the tier's origin, a credential
    /// origin), so the node source's scope covers every URL it is asked for, and it follows no
    /// redirect: nothing a node answers can send them elsewhere.
    public func forTierNodes() -> FetcherConfiguration {
        var c = self
        c.access.scope = CredentialScope(coversEverything: true)
        c.followsRedirects = false
        c.maxRetries = 0
        c.connectTimeout = min(c.connectTimeout, 2)
        c.lowSpeedLimit = max(c.lowSpeedLimit, Self.tierLowSpeedLimit)
        c.lowSpeedTime = max(1, min(c.lowSpeedTime / 2, 5))
        c.maxBytesPerSecond = 0
        c.bandwidthTimetable = nil
        // A node is ours, not the origin: the origin's per-host limits are not its.
        c.maxTransfersPerOrigin = nil
        c.maxConnections = c.maxTotalConnections
        c.requestsPerSecond = 0
        c.egressLedger = nil
        return c
    }

    /// 64 KiB/s: a node on the local network answers from its cache at link speed, and one
    /// streaming a miss from the origin at the origin's; below this a film's bytes come faster
    /// from the origin, where the piece goes on from the same byte.
    public static let tierLowSpeedLimit = 64 << 10

    var retryPolicy: RetryPolicy {
        RetryPolicy(maxRetries: maxRetries, baseDelay: retryBaseDelay, maxDelay: maxRetryDelay)
    }

    var redirectRules: RedirectRules {
        RedirectRules(follow: followsRedirects, maxHops: Self.maxRedirects, allowedHosts: allowedHosts)
    }

    /// Whether anything is configured that `access.scope` limits (a user, a `--header`).
    var hasScopedCredentials: Bool { access.user != nil || !extraHeaders.isEmpty }
}

/// How `TransferState` follows redirects.
struct RedirectRules: Equatable {
    var follow = true
    var maxHops = FetcherConfiguration.maxRedirects
    /// `--allow-host`: a hop to another origin must match one (when any is given).
    var allowedHosts: [HostPattern] = []

    static let never = RedirectRules(follow: false)
}

/// The retry knobs `TransferState` needs.
struct RetryPolicy: Equatable {
    var maxRetries: Int
    var baseDelay: TimeInterval
    var maxDelay: TimeInterval

    /// Delay before retry number `n` (1-based): `Retry-After` if the origin gave one, else
    /// exponential backoff; both capped.
    func delay(retry n: Int, retryAfter: TimeInterval?) -> TimeInterval {
        if let retryAfter { return min(max(0, retryAfter), maxDelay) }
        return min(baseDelay * pow(2, Double(max(0, n - 1))), maxDelay)
    }
}

extension FetcherConfiguration {
    /// Whether a request for `url` goes to an S3 endpoint of the user's (`s3`, `s3Buckets`):
    /// its validator goes as `If-Match`, and an error answer's document is read.
    func goesToS3(_ url: String) -> Bool {
        (s3?.signs(url) ?? false) || s3Buckets?.bucket(of: url) != nil
    }

    /// The headers that sign a request for `url` at `date`: its bucket's keys, else `s3`'s;
    /// none for a URL at neither.
    func s3SignedHeaders(method: String, url: String, date: Date) -> [String] {
        if let buckets = s3Buckets, buckets.bucket(of: url) != nil {
            return buckets.signedHeaders(method: method, url: url, date: date)
        }
        return s3?.signedHeaders(method: method, url: url, date: date) ?? []
    }
}
