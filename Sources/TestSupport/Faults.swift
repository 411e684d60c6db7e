import Foundation

/// Misbehaviour the `OriginServer` injects into its answers, per path (or `"*"` for every path).
///
/// Each field models one way real origins and networks fail, so the fetcher, the cache and the
/// front doors can be tested against it without timing games. Counters (`dropCount`,
/// `statusCount`) restart whenever `setFaults` is called for the path.
public struct Faults: Sendable {
    /// Close the connection after sending this many body bytes (per response).
    public var dropAfterBytes: Int64? = nil
    /// ...for the first N responses whose body actually reaches that point, then behave.
    public var dropCount: Int = Int.max
    /// Answer 200 + full body to Range requests (an origin without range support).
    public var ignoreRange = false
    /// Answer one Range request in this many with 200 + full body (a flaky CDN node): the 1st,
    /// the N+1st, and so on.
    public var ignoreRangeEvery: Int? = nil
    /// Don't send `Accept-Ranges`.
    public var noAcceptRanges = false
    /// Chunked transfer encoding, no `Content-Length`.
    public var noContentLength = false
    /// Answer this status (with a small text body)...
    public var status: Int? = nil
    /// ...for the first N requests, then behave normally.
    public var statusCount: Int = Int.max
    /// `Retry-After` seconds header on fault statuses.
    public var retryAfter: Int? = nil
    /// Slow trickle: at most this many body bytes per second.
    public var bytesPerSecond: Int? = nil
    /// Answer 302 to this path (made absolute on this server) or absolute URL.
    public var redirectTo: String? = nil
    /// Accept the request and never answer (for timeouts).
    public var silent = false
    /// Wait this long before answering at all.
    public var delayBeforeHeaders: TimeInterval = 0
    /// A new ETag on every answer of a file, with the same length and Last-Modified (load-balanced
    /// backends whose ETags include the inode): `"rot-1"`, `"rot-2"`, and so on.
    public var rotateETag = false
    /// No `Last-Modified` (with an ETag of `""`: an answer that names no version at all, as
    /// some object stores and generated downloads send).
    public var noLastModified = false
    /// Bytes sent after each body, beyond its Content-Length, on a connection kept open: the next
    /// answer on that connection then starts with them (a broken origin or middlebox).
    public var garbageAfterBody: [UInt8]? = nil

    public init(dropAfterBytes: Int64? = nil, dropCount: Int = Int.max, ignoreRange: Bool = false,
                noAcceptRanges: Bool = false, noContentLength: Bool = false, status: Int? = nil,
                statusCount: Int = Int.max, retryAfter: Int? = nil, bytesPerSecond: Int? = nil,
                redirectTo: String? = nil, silent: Bool = false, delayBeforeHeaders: TimeInterval = 0,
                ignoreRangeEvery: Int? = nil) {
        self.dropAfterBytes = dropAfterBytes
        self.dropCount = dropCount
        self.ignoreRange = ignoreRange
        self.noAcceptRanges = noAcceptRanges
        self.noContentLength = noContentLength
        self.status = status
        self.statusCount = statusCount
        self.retryAfter = retryAfter
        self.bytesPerSecond = bytesPerSecond
        self.redirectTo = redirectTo
        self.silent = silent
        self.delayBeforeHeaders = delayBeforeHeaders
        self.ignoreRangeEvery = ignoreRangeEvery
    }
}

/// One request the origin received, and what it answered.
public struct RequestRecord: Sendable {
    public var method: String
    /// The request target, with its query.
    public var path: String
    /// The `Range` header, if any.
    public var range: String?
    /// The `If-Range` header, if any.
    public var ifRange: String?
    /// The status answered; 0 while not answered (delayed, or `silent`).
    public var status: Int
    /// Body bytes handed to the connection for this response so far.
    public var bodyBytes: Int64
    /// The request headers, in order.
    public var headers: [(String, String)]
    /// When it arrived (`ProcessInfo.systemUptime`): benchmarks show how a read ramps up.
    public var receivedAt: TimeInterval
    /// The TCP connection it came on, numbered from 1 in accept order (0: not known):
    /// `OriginServer.wireBytes(connection:)` says what crossed on it.
    public var connection: Int

    public init(method: String, path: String, range: String?, ifRange: String?, status: Int,
                bodyBytes: Int64, headers: [(String, String)], receivedAt: TimeInterval = ProcessInfo.processInfo.systemUptime,
                connection: Int = 0) {
        self.receivedAt = receivedAt
        self.connection = connection
        self.method = method
        self.path = path
        self.range = range
        self.ifRange = ifRange
        self.status = status
        self.bodyBytes = bodyBytes
        self.headers = headers
    }

    /// The first request header called `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }

    /// `path` without its query.
    public var pathWithoutQuery: String {
        path.firstIndex(of: "?").map { String(path[..<$0]) } ?? path
    }
}
