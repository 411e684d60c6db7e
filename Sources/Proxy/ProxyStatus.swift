import CacheCore
import Foundation

/// What a running proxy says about itself: the JSON of `GET /.httpcachefs/status`, and the
/// content of `<cache directory>/proxy.json`, which a running proxy keeps so that
/// `httpcachefs url` finds it on whatever port it got.
public struct ProxyStatus: Codable, Sendable, Equatable {
    /// Always "httpcachefs": tells our proxy from whatever else listens on the port.
    public var service: String
    public var version: String
    public var port: Int
    public var bindAddress: String
    public var tokenRequired: Bool
    /// Only for clients on this machine.
    public var cacheDirectory: String?
    /// Only in the runtime file and in answers to requests that carried it: any local user or
    /// program can reach loopback, so being local proves nothing.
    public var token: String?
    /// The serving process (runtime file only).
    public var pid: Int32?
    /// The key control requests carry (runtime file only; `ProxyConfiguration.controlKey`).
    public var controlKey: String?

    public static let serviceName = "httpcachefs"
    public static let runtimeFileName = "proxy.json"

    public init(version: String, port: Int, bindAddress: String, tokenRequired: Bool,
                cacheDirectory: String? = nil, token: String? = nil, pid: Int32? = nil) {
        self.service = Self.serviceName
        self.version = version
        self.port = port
        self.bindAddress = bindAddress
        self.tokenRequired = tokenRequired
        self.cacheDirectory = cacheDirectory
        self.token = token
        self.pid = pid
    }

    /// The status document a proxy with `configuration` answers (`GET /.httpcachefs/status`).
    /// - Parameters:
    ///   - peerIsLoopback: the client is on this machine: it may learn the cache directory.
    ///   - tokenPresented: the request carried the valid token: only then does the answer hold it
    ///     (`httpcachefs url` asks with the token from the runtime file, and so gets it back).
    public init(serving configuration: ProxyConfiguration, port: Int, peerIsLoopback: Bool, tokenPresented: Bool) {
        self.init(version: configuration.version, port: port, bindAddress: configuration.bindAddress,
                  tokenRequired: configuration.token != nil,
                  cacheDirectory: peerIsLoopback ? configuration.cacheDirectory : nil,
                  token: tokenPresented ? configuration.token : nil)
    }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return ((try? encoder.encode(self)).map(Array.init) ?? Array("{}".utf8)) + [0x0A]
    }

    public static func decode(_ bytes: [UInt8]) -> ProxyStatus? {
        guard let s = try? JSONDecoder().decode(ProxyStatus.self, from: Data(bytes)), s.service == serviceName else { return nil }
        return s
    }

    /// The base of proxy URLs for a client on this machine.
    public var localBase: String { ProxyConfiguration.localBase(bindAddress: bindAddress, port: port) }

    // MARK: Runtime file

    public static func runtimeFilePath(cacheDirectory: String) -> String { cacheDirectory + "/" + runtimeFileName }

    /// Reads `<cacheDirectory>/proxy.json`, if a proxy left one, and only if it is a regular
    /// file (not a symlink) of `owner` (by default this process's user): the file says where to
    /// send the control key, so one another user placed is never taken (`OwnedFile`).
    public static func readRuntimeFile(cacheDirectory: String, owner: uid_t = geteuid()) -> ProxyStatus? {
        guard case let .success(bytes) = OwnedFile.read(runtimeFilePath(cacheDirectory: cacheDirectory), owner: owner,
                                                        maxBytes: 64 << 10) else { return nil }
        return decode(bytes)
    }

    /// Writes the runtime file (owner-only from its first byte: it holds the control key and may
    /// hold the token), atomically.
    func writeRuntimeFile(cacheDirectory: String) throws {
        try OwnerOnlyFile.replace(Self.runtimeFilePath(cacheDirectory: cacheDirectory), with: encoded())
    }
}

extension ProxyStatus {
    /// The address a client on this machine connects to: the bind address if it is a loopback
    /// one, else loopback of the same family (a proxy bound to all addresses listens there too).
    public var localConnectHost: String {
        if bindAddress == "localhost" { return "127.0.0.1" }
        if ProxyConfiguration.isLoopback(bindAddress) { return bindAddress }
        return bindAddress == "::" ? "::1" : "127.0.0.1"
    }

    /// The path of `path` on this proxy for a client that holds the token (from the runtime file).
    public func tokenPath(_ path: String) -> String { token.map { "/t/\($0)" + path } ?? path }
}
