import CacheCore
import Fetcher
import Foundation
import Proxy

/// `cat` and `preload` while a daemon (`mount` or `proxy`) holds the cache directory
/// (`CacheAccess.daemon`, `HeldCache.client()`).
///
/// Only one process may write a cache, so instead of failing on the lock these commands send
/// their requests through the daemon's proxy: the bytes land in the one cache the daemon serves
/// from, single flight included, and are hits for the mount afterwards.
struct DaemonClient {
    let base: String
    let token: String?
    /// The cache's signing key (`<cache dir>/proxy-key`), which the daemon's proxy URLs need.
    let key: ProxySigningKey?
    let pid: Int32
    let source: CurlRangeSource
    /// Its requests warm the cache (`preload`): the daemon reads them as a background reader
    /// (`ProxyURL.warmUpHeader`), not as a player.
    var warmUp = false

    /// The proxy of the daemon holding `cacheDirectory`, or nil (it runs no proxy, or is gone).
    /// A `proxy.json` counts only if its pid holds the cache's lock (where the kernel's table of
    /// locks cannot be read: if that process is alive), so a file a killed daemon left never
    /// sends requests to whatever listens on its port now.
    static func find(cacheDirectory: String, options: CacheOptions) throws -> DaemonClient? {
        guard let status = ProxyStatus.readRuntimeFile(cacheDirectory: cacheDirectory), let pid = status.pid else { return nil }
        switch CacheLockHolder.holder(ofCacheDirectory: cacheDirectory) {
        case .held(by: pid): break
        case .unknown where kill(pid, 0) == 0: break
        default: return nil
        }
        let source = try options.makeSource(logger: options.makeLogger(label: "httpcachefs.fetch", defaultLevel: .error))
        let key = ProxySigningKey.read(cacheDirectory: cacheDirectory)
        if key == nil && status.token == nil {
            source.shutdown()
            throw CommandFailure("the daemon (pid \(pid)) holding the cache serves only signed URLs, and the key \(ProxySigningKey.filePath(cacheDirectory: cacheDirectory)) cannot be read: restart the daemon as this user (it makes the key)")
        }
        return DaemonClient(base: status.localBase, token: status.token, key: key, pid: pid, source: source)
    }

    func shutdown() { source.shutdown() }

    struct Head {
        var length: Int64?
        var contentType: String?
    }

    /// Streams `[start, end)` of `url` (end nil: to its end) through the daemon. `consume` gets the
    /// bytes in order and returns false to stop early. Blocking: call from a dedicated thread.
    /// - Parameter exact: the daemon fetches no more than the range (no first bytes taken along
    ///   at the file's open: `ProxyURL.exactRangeHeader`).
    @discardableResult
    func stream(url: String, start: Int64 = 0, end: Int64?, exact: Bool = false, scanShare: Bool = false,
                consume: @escaping @Sendable (UnsafeRawBufferPointer) -> Bool) throws -> Head {
        let sink = BlockingSink(consume: consume)
        var request = FetchRequest(url: proxyURL(url), start: start, end: end)
        if exact { request.headers.append("\(ProxyURL.exactRangeHeader): 1") }
        if scanShare { request.headers.append("\(ProxyURL.scanShareHeader): 1") }
        if warmUp { request.headers.append("\(ProxyURL.warmUpHeader): 1") }
        _ = source.start(request, sink: sink)
        sink.done.wait()
        let outcome = sink.outcome.withLock { $0 }
        if let error = outcome.error, !(error == .cancelled && outcome.stoppedByConsumer) {
            throw Self.cacheError(error, url: url)
        }
        return Head(length: outcome.head?.totalLength, contentType: outcome.head?.contentType)
    }

    /// The daemon's proxy URL for `url`.
    func proxyURL(_ url: String) -> String { ProxyURL.make(original: url, base: base, token: token, key: key) }

    /// The file's length and type, from a one-byte request (the daemon serves it from its cache).
    func head(url: String, exact: Bool = false) throws -> Head {
        try stream(url: url, end: 1, exact: exact) { _ in true }
    }

    /// What went wrong, named by the original URL rather than the proxy's. The proxy answers 502
    /// for an unreachable origin and 504 for a timeout.
    static func cacheError(_ error: FetchError, url: String) -> CacheError {
        switch error {
        case let .http(status, _): return CacheError(.http(status: status, url: url), url: url)
        case let .network(_, message): return .unreachable(url: url, message: "through the running daemon's proxy: \(message)")
        case .timeout: return .timeout(url: url)
        case .remoteChanged: return CacheError(.remoteChanged(url: url), url: url)
        case let .invalidResponse(_, message): return .badResponse(url: url, message: message)
        case let .refusedAddress(_, reason): return .refusedAddress(url: url, reason: reason)
        case .budgetSpent: return .budgetSpent(url: url)
        case .cancelled: return .cancelled
        }
    }
}

/// Collects one transfer for a caller that waits for it.
private final class BlockingSink: FetchSink, Sendable {
    struct Outcome {
        var head: ResponseHead?
        var error: FetchError?
        var stoppedByConsumer = false
    }

    let consume: @Sendable (UnsafeRawBufferPointer) -> Bool
    let done = DispatchSemaphore(value: 0)
    /// Written on the source's thread before `done` is signalled, read after.
    let outcome = LockedValue(Outcome())

    init(consume: @escaping @Sendable (UnsafeRawBufferPointer) -> Bool) { self.consume = consume }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        outcome.withLock { $0.head = head }
        return true
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if consume(bytes) { return true }
        outcome.withLock { $0.stoppedByConsumer = true }
        return false
    }

    func fetchDidFinish(_ error: FetchError?) {
        outcome.withLock { $0.error = error }
        done.signal()
    }
}
