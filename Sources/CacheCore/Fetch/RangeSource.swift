/// The protocol the cache fetches through.
///
/// The engine knows nothing about HTTP libraries: the executable plugs in the libcurl fetcher,
/// tests plug in the in-process origin (through the same fetcher) or a scripted source.
///
/// Contract for implementations:
/// - Callbacks for one transfer arrive in order, never concurrently:
///   `fetchDidReceiveHead` once, then `fetchDidReceive` zero or more times, then
///   `fetchDidFinish` exactly once (also after `cancel()`, with `.cancelled`).
/// - Redirects are followed; `ResponseHead.finalURL` is the URL that answered.
/// - Error statuses (4xx, 5xx after retries) are reported as `FetchError.http` through
///   `fetchDidFinish` *without* a head or body: nothing from an error body reaches the cache.
/// - Retries (dropped connection, 5xx, 429 with Retry-After) are the source's job. A transfer
///   that drops halfway resumes from the last delivered byte (with `If-Range`), and the sink
///   keeps seeing one continuous body. If the resource changed in between, the transfer finishes
///   with `.remoteChanged`.
/// - A server that ignores `Range` answers 200: the head says so (`bodyStart == 0`) and the
///   body is the whole resource from byte 0. The sink decides what to keep. With
///   `requireRange`, such an answer is first retried (a CDN node that sometimes ignores ranges),
///   unless the range starts near byte 0: then its lead is dropped and the head's `bodyStart` is
///   the range's start, as for a 206.
/// - Backpressure: a source that can pause delivers through `fetchOffer`. `.pause` means the sink
///   took none of those bytes: the source keeps them, stops reading from the connection, and
///   offers the same bytes again once its handle's `resume()` was called (possibly before the
///   source saw the pause: then it offers them again at once). A source that cannot pause calls
///   `fetchDidReceive`, and the sink takes its time there. Either way the source never buffers
///   more than one transfer buffer per transfer.
public protocol RangeSource: Sendable {
    func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle
}

/// One ranged GET.
public struct FetchRequest: Sendable, Equatable {
    /// The full URL to request (with every query parameter, even those the cache key ignores).
    public var url: String
    /// First byte wanted.
    public var start: Int64
    /// One past the last byte wanted; nil means "to the end of the resource".
    public var end: Int64?
    /// Validator for `If-Range` (a strong ETag or an HTTP-date), if the entry has one.
    public var ifRange: String?
    /// The origin answered ranges before: a 200 (the whole body from byte 0) to this range is
    /// taken as a passing fault and retried with backoff a few times before it is delivered.
    public var requireRange: Bool
    /// Its class when it starts (`FetchHandle.setPriority` changes it later).
    public var priority: FetchPriority
    /// Who it is for (a reader's id): a reader's own near read-ahead never yields to its own
    /// waiting reads, only to others'. nil: nobody in particular.
    public var owner: Int?
    /// Compare no ETags, and resume with Last-Modified as `If-Range` (`--ignore-etag`, or an
    /// origin whose ETags change on every answer).
    public var ignoreETag = false
    /// The file's length as the cache knows it for the `ifRange` version: a 206 to the If-Range
    /// (the origin says the version matched) with another Content-Range total is a bad
    /// response, retried, not a new version.
    public var expectedLength: Int64?
    /// The `ifRange` version's Last-Modified: an answer with another ETag but this date and
    /// `expectedLength` gets a second look (see `TransferState`).
    public var expectedLastModified: String?
    /// The method when it is not GET (a WebDAV `PROPFIND`), with its body. Such an answer is a
    /// document read whole (`CacheEngine.fetchDocument`), never cached bytes of the resource.
    public var method: String?
    public var body: [UInt8]?
    /// The entry's cache key (the URL without ignored query parameters): a cache tier keys and
    /// routes on it, so rotating URLs of one file meet in one tier entry. nil: the URL.
    public var cacheKey: String?
    /// The open-time metadata probe: it checks the version with the origin itself, never
    /// through a cache tier (which might still hold an older one).
    public var isProbe = false
    /// Extra request headers for this request only, each "Name: value" (WebDAV's `Depth: 1`, a
    /// tier's version and key).
    public var headers: [String] = []
    /// Send `If-Range` (the request's validator, or on a resumed attempt the first answer's).
    /// False for a cache tier node: nginx's slice module starts at the file's first slice when a
    /// request carries `If-Range`, so a resumed piece deep in a file made the node read, or
    /// fetch from the origin, every slice before it. A node's cache key carries the version
    /// instead, and a resumed answer is still checked against the first one's validators.
    public var sendsIfRange = true

    public init(url: String, start: Int64 = 0, end: Int64? = nil, ifRange: String? = nil, requireRange: Bool = false,
                priority: FetchPriority = .waiting, owner: Int? = nil) {
        self.url = url
        self.start = start
        self.end = end
        self.ifRange = ifRange
        self.requireRange = requireRange
        self.priority = priority
        self.owner = owner
    }

    /// `If-Range` takes a strong ETag (RFC 9110 13.1.5: weak ones never match), else a date.
    public static func ifRangeValidator(etag: String?, lastModified: String?) -> String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }

    /// The `Range` header value, or nil when the whole resource is wanted.
    public var rangeHeader: String? {
        if start == 0 && end == nil { return nil }
        if let end { return "bytes=\(start)-\(end - 1)" }
        return "bytes=\(start)-"
    }
}


extension ResponseHead {
    /// The validator to send as `If-Range` later: a strong ETag, else Last-Modified.
    public var ifRangeValidator: String? { FetchRequest.ifRangeValidator(etag: etag, lastModified: lastModified) }
}

/// Receives one transfer. Methods are called on the source's thread, one at a time, each after
/// the last returned (a tier transfer's attempts may run on another source's thread, still one
/// after another): a sink's lock for its transfer's state is never contended (`EntrySink`).
public protocol FetchSink: AnyObject, Sendable {
    /// Called once before the body. Return false to cancel the transfer.
    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool
    /// The next body bytes, contiguous with the previous ones. Return false to cancel. May take
    /// its time (a source that cannot pause calls this).
    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The next body bytes, from a source that can pause: `.pause` takes none of them (see
    /// `RangeSource`). The default never pauses.
    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow
    /// A source that offers bytes handed over all it had for now (a turn of its loop ended, the
    /// next bytes wait for the network): what the sink holds back to write together goes to its
    /// writer. The default does nothing. `fetchDidReceive` needs none: each call is a turn.
    func fetchDidDrain()
    /// The transfer ended: nil after the whole requested body arrived.
    func fetchDidFinish(_ error: FetchError?)
}

/// What a sink says to offered bytes.
public enum FetchFlow: Sendable, Equatable {
    /// Taken; send more.
    case proceed
    /// Not taken: offer them again after `FetchHandle.resume()`.
    case pause
    /// Send no more: cancel the transfer. The bytes offered may have been taken (a fetch's
    /// last bytes are, with `.stop`) or not (the fetch was dropped meanwhile).
    case stop
}

extension FetchSink {
    public func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow { fetchDidReceive(bytes) ? .proceed : .stop }
    public func fetchDidDrain() {}
}

/// A running transfer.
public protocol FetchHandle: Sendable {
    /// Stops the transfer soon; `fetchDidFinish(.cancelled)` follows.
    func cancel()
    /// Delivers again after the sink answered `.pause` (a no-op if it is not paused). Sources that
    /// never deliver through `fetchOffer` need not implement it.
    func resume()
    /// The transfer's class changed: a read started waiting on it (`waitedSeconds` ago, the
    /// oldest such read), or no read waits on it any more. Sources that schedule nothing ignore it.
    func setPriority(_ priority: FetchPriority, waitedSeconds: Double)
}

extension FetchHandle {
    public func resume() {}
    public func setPriority(_ priority: FetchPriority, waitedSeconds: Double) {}
}

