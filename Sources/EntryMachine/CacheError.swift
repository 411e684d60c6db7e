import CoreTypes

/// Errors the cache reports to its front doors (FUSE, proxy, CLI).
///
/// Each front door maps these in exactly one place: FuseMount to errno, Proxy to an HTTP status,
/// the CLI to a one-line message and a non-zero exit.
public enum CacheError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a usable http(s) URL.
    case invalidURL(String, reason: String)
    /// 404 or 410 from the origin.
    case notFound(url: String, status: Int)
    /// 401 or 403 from the origin.
    case forbidden(url: String, status: Int)
    /// The fetcher refused to connect to the target (a cloud metadata or link-local address,
    /// also when reached through a redirect): access denied, like `forbidden`.
    case refusedAddress(url: String, reason: String)
    /// Any other error status after retries.
    case httpStatus(url: String, status: Int)
    /// The origin could not be reached, or the connection failed after retries.
    case unreachable(url: String, message: String)
    /// The origin (or a read) took longer than allowed.
    case timeout(url: String)
    /// The origin's answer made no sense.
    case badResponse(url: String, message: String)
    /// A requested range lies outside the resource.
    case rangeNotSatisfiable(url: String, length: Int64)
    /// Local storage failed (the path and errno text are the cause).
    case storage(path: String, message: String)
    /// No room for the cache, even after eviction.
    case diskFull(path: String)
    /// The cache directory is held by another process.
    case locked(path: String, holder: String)
    /// The remote file changed under a reader bound to its old version (an open file handle, a
    /// proxy response under way): it gets this instead of bytes of another version.
    case remoteChanged(url: String)
    /// The origin's egress budget (`--egress-budget`) is spent for this class of reader: nothing
    /// is fetched until it resets (`EgressLedger.retryAfter`).
    case budgetSpent(url: String)
    /// The read was cancelled by its reader.
    case cancelled

    public var description: String {
        switch self {
        case let .invalidURL(url, reason): return "invalid URL '\(url)': \(reason)"
        case let .notFound(url, status): return "not found (HTTP \(status)): \(url)"
        case let .forbidden(url, status): return "access denied (HTTP \(status)): \(url)"
        case let .refusedAddress(url, reason): return "refused to fetch \(url): \(reason)"
        case let .httpStatus(url, status): return "origin error (HTTP \(status)): \(url)"
        case let .unreachable(url, message): return "cannot reach origin for \(url): \(message)"
        case let .timeout(url): return "timed out: \(url)"
        case let .badResponse(url, message): return "bad response from \(url): \(message)"
        case let .rangeNotSatisfiable(url, length): return "range outside the file (length \(length)): \(url)"
        case let .storage(path, message): return "cache storage error at \(path): \(message)"
        case let .diskFull(path): return "disk full: no room for the cache at \(path)"
        case let .locked(path, holder): return "cache directory \(path) is in use by \(holder)"
        case let .remoteChanged(url): return "the remote file changed while it was open: \(url)"
        case let .budgetSpent(url): return "egress budget spent (it resets as the status page says): \(url)"
        case .cancelled: return "cancelled"
        }
    }

    /// Maps a transfer failure to what the front doors report.
    public init(_ error: FetchError, url: String) {
        switch error {
        case let .http(status, u) where status == 404 || status == 410: self = .notFound(url: u, status: status)
        case let .http(status, u) where status == 401 || status == 403: self = .forbidden(url: u, status: status)
        case let .http(status, u): self = .httpStatus(url: u, status: status)
        case let .network(u, message): self = .unreachable(url: u, message: message)
        case let .timeout(u): self = .timeout(url: u)
        case let .remoteChanged(u): self = .remoteChanged(url: u)
        case let .invalidResponse(u, message): self = .badResponse(url: u, message: message)
        case let .refusedAddress(u, reason): self = .refusedAddress(url: u, reason: reason)
        case let .budgetSpent(u): self = .budgetSpent(url: u)
        case .cancelled: self = .cancelled
        }
        _ = url
    }
}
