import CacheCore
import Foundation
import Proxy

/// This cache as a CLI command reaches it: opened in this process, or, while a daemon (`mount`,
/// `proxy`) holds its lock, through that daemon.
///
/// Only one process may write a cache. A command that finds the lock held does not fail: it asks
/// the daemon instead (`HeldCache`), so its requests land in the one cache the daemon serves from
/// (`cat`, `preload`: through the daemon's proxy), or it reads what that cache holds (`cache ls`,
/// `cache info`: the index with the daemon's live figures).
enum CacheAccess {
    /// Nobody else holds the cache: this process opened it (and shuts it down when done).
    case engine(CacheEngine)
    /// A daemon holds the cache.
    case daemon(HeldCache)

    /// Opens the cache `options` describe; a lock held by another process is `.daemon`.
    /// Blocking: call on a dedicated thread (or use the async `open`).
    /// - Parameter credentialURLs: the command's URL arguments (`CacheOptions.openEngine`).
    static func openBlocking(_ options: CacheOptions, credentialURLs: [String] = []) throws -> CacheAccess {
        do {
            return .engine(try options.openEngine(credentialURLs: credentialURLs))
        } catch let CacheError.locked(path, holder) {
            return .daemon(HeldCache(options: options, directory: path, holder: holder))
        }
    }

    /// `openBlocking` on the blocking pool.
    static func open(_ options: CacheOptions, credentialURLs: [String] = []) async throws -> CacheAccess {
        try await onBlockingPool { try openBlocking(options, credentialURLs: credentialURLs) }
    }
}

/// A cache another process (a daemon) holds the lock of.
struct HeldCache {
    let options: CacheOptions
    let directory: String
    /// Who holds the lock, as the lock file names it.
    let holder: String

    /// The failure this process would have without a daemon to ask.
    var lockedError: CacheError { .locked(path: directory, holder: holder) }

    /// The daemon's proxy, for requests whose bytes must land in its cache; the lock error when
    /// it runs none (`--no-proxy`, or the holder is no daemon). Shut the client down when done.
    /// - Parameter warmUp: its requests warm the cache (`preload`), read as a background reader.
    func client(warmUp: Bool = false) throws -> DaemonClient {
        guard var daemon = try DaemonClient.find(cacheDirectory: directory, options: options) else { throw lockedError }
        daemon.warmUp = warmUp
        return daemon
    }

    /// The daemon's proxy as its runtime file describes it, for control requests (`cache rm`,
    /// `cache clear`); nil when it runs none. The file counts only if its pid holds the lock, as
    /// in `DaemonClient.find`.
    func controlProxy() -> ProxyStatus? {
        guard let status = ProxyStatus.readRuntimeFile(cacheDirectory: directory), let pid = status.pid else { return nil }
        switch CacheLockHolder.holder(ofCacheDirectory: directory) {
        case .held(by: pid): return status
        case .unknown where kill(pid, 0) == 0: return status
        default: return nil
        }
    }

    /// Sends a control request to the daemon; the answer's lines. Fails with the lock error when
    /// the daemon runs no proxy. Blocking.
    func control(_ action: String, query: [(String, String)] = []) throws -> (pid: Int32, lines: [String]) {
        guard let proxy = controlProxy() else { throw lockedError }
        let answer = try DaemonControl.send(action, query: query, to: proxy)
        guard answer.status == 200 else {
            throw CommandFailure("the daemon holding the cache (pid \(proxy.pid ?? 0)) answered \(answer.status): \(answer.lines.joined(separator: "; "))")
        }
        return (proxy.pid ?? 0, answer.lines)
    }

    /// What the cache holds: its index as last written, with the daemon's live figures when it
    /// runs a proxy (`DaemonListing`). Blocking.
    func listing() throws -> DaemonListing {
        let configuration = try options.configuration()
        return DaemonListing(snapshot: try CacheSnapshot(configuration: configuration),
                             document: DaemonListing.liveDocument(cacheDirectory: configuration.directory))
    }
}
