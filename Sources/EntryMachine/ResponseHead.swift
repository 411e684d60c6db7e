import CoreTypes

/// What the origin said before the body.
public struct ResponseHead: Sendable, Equatable {
    /// 200 or 206 (errors never become a head).
    public var status: Int
    /// The URL that answered, after redirects.
    public var finalURL: String
    /// Offset in the resource of the first body byte: the Content-Range start for 206, 0 for 200
    /// (or, for a 200 to a range near the start, the range's start: the fetcher dropped the
    /// bytes before it).
    public var bodyStart: Int64
    /// Length of the whole resource if known (Content-Range total, or Content-Length of a 200).
    public var totalLength: Int64?
    public var contentType: String?
    public var etag: String?
    public var lastModified: String?
    /// The origin advertised `Accept-Ranges: bytes` or answered 206.
    public var acceptsRanges: Bool
    /// Answers to this transfer before this one carried other ETags for the same length and
    /// Last-Modified: the origin's ETags change on every answer (see `TransferState`).
    public var etagRotating = false
    /// The answer carried a `DAV:` header: the origin speaks WebDAV (a folder's GET page may then
    /// be no listing, and PROPFIND lists it).
    public var webDAV = false
    /// For a request that required a range (`FetchRequest.requireRange`): what this transfer's
    /// answers said of the origin's ranges (the engine's `RangeReliabilityTable`). nil otherwise.
    public var rangeAnswers: RangeAnswers?

    /// 200s answered to the transfer's range so far (cut and asked again, or this answer, used as
    /// the range or as the whole file), and whether this answer is a 206.
    public struct RangeAnswers: Sendable, Equatable {
        public var ignored: Int
        public var served: Bool
        public init(ignored: Int, served: Bool) {
            self.ignored = ignored
            self.served = served
        }
    }

    public init(status: Int, finalURL: String, bodyStart: Int64, totalLength: Int64?,
                contentType: String? = nil, etag: String? = nil, lastModified: String? = nil,
                acceptsRanges: Bool) {
        self.status = status
        self.finalURL = finalURL
        self.bodyStart = bodyStart
        self.totalLength = totalLength
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.acceptsRanges = acceptsRanges
    }
}
/// Why a transfer failed, with its cause.
public enum FetchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The origin answered an error status (after retries for 5xx and 429).
    case http(status: Int, url: String)
    /// Connection refused, DNS failure, TLS failure, dropped connection after retries...
    case network(url: String, message: String)
    /// Connect timeout or a stalled transfer.
    case timeout(url: String)
    /// The resource changed during the transfer (validator or length differ on resume).
    case remoteChanged(url: String)
    /// The origin's answer made no sense (bad Content-Range, short body, ...).
    case invalidResponse(url: String, message: String)
    /// The target is one the source refuses to connect to (a cloud metadata or link-local
    /// address): not retried, nothing cached.
    case refusedAddress(url: String, reason: String)
    /// Not sent: the origin's egress budget (`--egress-budget`) is spent for this reader's
    /// class. The fetcher's own verdict, never an origin's answer.
    case budgetSpent(url: String)
    /// `cancel()` was called.
    case cancelled

    public var description: String {
        switch self {
        case let .http(status, url): return "HTTP \(status) from \(url)"
        case let .network(url, message): return "network error for \(url): \(message)"
        case let .timeout(url): return "timed out fetching \(url)"
        case let .remoteChanged(url): return "remote file changed during transfer: \(url)"
        case let .invalidResponse(url, message): return "invalid response from \(url): \(message)"
        case let .refusedAddress(url, reason): return "refused to fetch \(url): \(reason)"
        case let .budgetSpent(url): return "egress budget spent: not fetched: \(url)"
        case .cancelled: return "cancelled"
        }
    }
}
