import CacheCore
import Foundation
import HLS
import Proxy

/// An HLS preload through the proxy of the daemon that holds the cache: every playlist and
/// resource is requested from that proxy, so the bytes land in the daemon's cache (single
/// flight with its players included) and the mount and the proxy then serve the stream from disk.
///
/// The proxy answers playlists rewritten to its own URLs; they are parsed against the playlist's
/// proxy URL and every reference is turned back into the original it names, so the preloader,
/// its progress and its failures speak of the origin's URLs as they do without a daemon.
/// Requests block on curl, so each runs on a dedicated thread, never on the cooperative pool.
struct DaemonHLSSource: HLSSource {
    let daemon: DaemonClient
    /// The most a playlist may hold, as `PlaylistLoader` allows.
    static let playlistLimit = 8 << 20

    func playlist(url: String) async throws -> HLSPlaylistInfo {
        let daemon = self.daemon
        let (head, bytes) = try await onBlockingPool { () throws -> (DaemonClient.Head, [UInt8]) in
            let bytes = LockedValue<[UInt8]>([])
            let head = try daemon.stream(url: url, end: nil) { chunk in
                bytes.withLock { bytes in
                    bytes += chunk
                    return bytes.count <= Self.playlistLimit
                }
            }
            return (head, bytes.withLock { $0 })
        }
        if bytes.count > Self.playlistLimit { throw HLSPreloader.PreloadError.tooLarge(url) }
        guard HLSPlaylist.isPlaylist(contentType: head.contentType, firstBytes: Array(bytes.prefix(64))) else {
            throw HLSPreloader.PreloadError.notAPlaylist(url)
        }
        let proxied = daemon.proxyURL(url)
        return HLSPlaylistInfo(parsing: String(decoding: bytes, as: UTF8.self), playlistURL: proxied)
            .mapURLs(original(of:))
    }

    func readFully(url: String, length: @escaping @Sendable (Int64?) -> Void,
                   received: @escaping @Sendable (Int) -> Void) async throws -> Int64 {
        let daemon = self.daemon
        return try await onBlockingPool { () throws -> Int64 in
            length(try daemon.head(url: url).length)
            let total = LockedValue<Int64>(0)
            try daemon.stream(url: url, end: nil) { chunk in
                total.withLock { $0 += Int64(chunk.count) }
                received(chunk.count)
                return true
            }
            return total.withLock { $0 }
        }
    }

    /// The original URL a proxy URL of this daemon names; anything else as it is.
    func original(of url: String) -> String {
        guard url.hasPrefix(daemon.base), let target = try? ProxyURL.decode(path: String(url.dropFirst(daemon.base.count))) else {
            return url
        }
        return target.url
    }
}
