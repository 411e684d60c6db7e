import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How the embedded proxy listens and whom it serves.
public struct ProxyConfiguration: Sendable, Equatable {
    /// The fixed default port, so `httpcachefs url` and bookmarks keep working across restarts.
    public static let defaultPort = 8718

    /// Address to listen on. Anything but loopback requires a `token`.
    public var bindAddress: String
    /// Port to listen on; 0 picks a free one (tests).
    public var port: Int
    /// When set, every proxied request must carry `/t/<token>/`; others get 403.
    public var token: String?
    /// `--allow-host` globs; empty means every origin host is allowed.
    public var allowedHosts: [String]
    /// `--proxy-name`: further names clients reach this proxy by, accepted in the Host header
    /// as `localhost` is (see `HostHeaderCheck`).
    public var proxyNames: [String]
    /// Shown in the status document (`httpcachefs url`, diagnostics).
    public var cacheDirectory: String
    /// Shown in the status document.
    public var version: String
    /// A connection with no request for this long is closed; also the limit for receiving one
    /// request's head (a client trickling header bytes does not hold a connection forever).
    public var idleTimeout: TimeInterval
    /// A response whose client has not taken any bytes for this long is abandoned.
    public var slowClientTimeout: TimeInterval
    /// Request targets longer than this get 414.
    public var maxRequestTargetBytes: Int
    /// Request heads with more header bytes than this get 431.
    public var maxHeaderBytes: Int
    /// Playlists larger than this are passed through without rewriting.
    public var maxPlaylistBytes: Int
    /// Event loop threads.
    public var threads: Int
    /// One per core, up to four.
    public static var defaultThreads: Int { min(4, max(1, ProcessInfo.processInfo.activeProcessorCount)) }
    /// This daemon's mark in the `Via` header of every request its fetcher sends: a request that
    /// arrives carrying it came back to the proxy that sent it (an origin redirecting into the
    /// proxy, or a chain of proxies), and gets 508 instead of a fetch that would loop. nil: none.
    public var loopMarker: String? = nil
    /// The secret that control requests (`POST /.httpcachefs/control/...`: refresh, cache rm and
    /// clear) carry in `X-Httpcachefs-Control`: only in the owner-only runtime file, so only the
    /// cache's owner (and root) can send them. A custom header also keeps web pages from sending
    /// them at all (a cross-site request with one needs a preflight this proxy never grants).
    /// It is also what proves the owner to the status page, `status.json` and `/metrics`
    /// (`OwnerProof`; there also as `?key=`).
    public var controlKey: String = ProxyConfiguration.generateToken()
    /// What proxy URLs are signed with (`ProxyURL`): a fetch is served only with a valid
    /// signature, the token, or the control key. The daemon loads the cache's key file
    /// (`ProxySigningKey.loadOrCreate`); a fresh key otherwise.
    public var signingKey: ProxySigningKey = .generate()

    public init(bindAddress: String = "127.0.0.1",
                port: Int = ProxyConfiguration.defaultPort,
                token: String? = nil,
                allowedHosts: [String] = [],
                proxyNames: [String] = [],
                cacheDirectory: String = "",
                version: String = "",
                idleTimeout: TimeInterval = 60,
                slowClientTimeout: TimeInterval = 60,
                maxRequestTargetBytes: Int = 16 * 1024,
                maxHeaderBytes: Int = 32 * 1024,
                maxPlaylistBytes: Int = 8 << 20,
                threads: Int = ProxyConfiguration.defaultThreads) {
        self.bindAddress = bindAddress
        self.port = port
        self.token = token
        self.allowedHosts = allowedHosts
        self.proxyNames = proxyNames
        self.cacheDirectory = cacheDirectory
        self.version = version
        self.idleTimeout = idleTimeout
        self.slowClientTimeout = slowClientTimeout
        self.maxRequestTargetBytes = maxRequestTargetBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxPlaylistBytes = maxPlaylistBytes
        self.threads = threads
    }

    /// True for an address in 127.0.0.0/8 (also IPv4-mapped), `::1` (also in brackets), and the
    /// name `localhost`: the only addresses served without a token. The address is parsed, not
    /// matched by prefix: `127.evil.test` is a name, not loopback.
    public static func isLoopback(_ address: String) -> Bool {
        address.lowercased() == "localhost" || IPLiteral(address)?.isLoopback == true
    }

    public var isLoopbackOnly: Bool { Self.isLoopback(bindAddress) }

    /// A fresh random token: 128 bits, base64url (URL-safe, no padding).
    public static func generateToken() -> String {
        var g = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &g) })
    }

    /// The base of proxy URLs for clients on this machine (`http://127.0.0.1:PORT`).
    public static func localBase(bindAddress: String, port: Int) -> String {
        let host: String
        switch bindAddress {
        case "0.0.0.0", "", "localhost": host = "127.0.0.1"
        case "::", "[::]": host = "[::1]"
        default: host = bindAddress.contains(":") && !bindAddress.hasPrefix("[") ? "[\(bindAddress)]" : bindAddress
        }
        return "http://\(host):\(port)"
    }
}
