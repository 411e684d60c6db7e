import CacheCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The embedded HTTP proxy: players that only take URLs share the mount's cache.
///
/// One `CacheEngine` serves both doors, so a byte fetched through either is a hit through the
/// other, and two players asking for the same missing bytes cause one download (the engine's
/// single flight); each response reads through its own `CacheReader`.
///
/// Pipeline per connection:
///   encoder / decoder (size limits) → `HTTPServerPipelineHandler` (pipelining: one request at a
///   time) → `ProtocolErrorHandler` (400/431 for unparsable heads) → `IdleStateHandler` (idle
///   connections and clients that stop reading) → `ProxyHTTPHandler` (route, plan, stream).
///
/// Security: loopback only unless a token is set; only the encoded URL forms are proxied (never
/// `GET http://...`), and only with proof that the owner made the URL (its signature under
/// `ProxySigningKey`, the token, or the control key); only http(s) origins, optionally only
/// `allowedHosts`. The status pages and metrics answer their owner only: a request with the control key or the token (`OwnerProof`).
public final class ProxyServer: Sendable {
    public let configuration: ProxyConfiguration
    let service: ProxyService
    let logger: Logger
    /// Loops given by the owner (shared with the cache tier's node client, so a proxied miss is
    /// fetched on the loop its request arrived on); nil: the server makes and stops its own.
    private let givenGroup: MultiThreadedEventLoopGroup?

    /// What exists while the server runs; all nil when stopped.
    private struct Running {
        /// The server's own loops (none when they were given).
        var group: MultiThreadedEventLoopGroup?
        var channel: Channel?
        var boundPort: Int?
        var door: DoorInfo?
    }

    private let running = NIOLockedValueBox(Running())
    /// Open client connections on loops that were given (they go on running): closed by `stop()`.
    private let connections = OpenChannels()

    /// - Parameter metricsText: the text exposition `/metrics` serves (the owner of the metrics
    ///   backend renders it, e.g. `PrometheusExport.text(for:)`); nil: `/metrics` is 404.
    /// - Parameter refresh: what `POST /.httpcachefs/control/refresh?path=P` does (a mount
    ///   re-reading its listings under P, nil: the whole mount); nil: such requests get 404.
    /// - Parameter mounts: what `POST /.httpcachefs/control/{mount,unmount}` (and a `refresh` that
    ///   names its `mount=`) do: the daemon adding, detaching or refreshing one of its mountpoints;
    ///   nil: such requests get 404.
    /// - Parameter eventLoopGroup: loops to serve on, which the caller stops after `stop()`; nil:
    ///   `configuration.threads` loops of the server's own.
    public init(engine: CacheEngine, configuration: ProxyConfiguration, logger: Logger,
                metricsText: (@Sendable () -> String)? = nil,
                refresh: (@Sendable (String?) async -> ControlAnswer)? = nil,
                mounts: (@Sendable (String, [URLQueryItem]) async -> ControlAnswer)? = nil,
                eventLoopGroup: MultiThreadedEventLoopGroup? = nil) {
        self.configuration = configuration
        self.logger = logger
        givenGroup = eventLoopGroup
        self.service = ProxyService(engine: engine, configuration: configuration, logger: logger,
                                    metricsText: metricsText, refresh: refresh, mounts: mounts)
    }

    deinit { stop() }

    /// Binds and starts serving; returns the bound port (useful with `port: 0`).
    /// Throws `ProxyServerError.tokenRequired` for a non-loopback address without a token.
    @discardableResult
    public func start() throws -> Int {
        try running.withLockedValue { try start(&$0) }
    }

    private func start(_ running: inout Running) throws -> Int {
        if let boundPort = running.boundPort { return boundPort }
        guard configuration.isLoopbackOnly || !(configuration.token ?? "").isEmpty else {
            throw ProxyServerError.tokenRequired(bindAddress: configuration.bindAddress)
        }
        let group = givenGroup ?? MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        let ownsGroup = givenGroup == nil
        let service = self.service
        let config = configuration
        let portBox = NIOLockedValueBox(0)   // the bound port, known only after bind
        let logger = self.logger
        // Beyond these the parser itself gives up (431); below them the router answers 414/431
        // with its own, smaller limits.
        let limits: NIOHTTPDecoderLimitConfiguration = {
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = max(64 << 10, config.maxRequestTargetBytes * 2)
            limits.maxHeaderListSize = max(64 << 10, config.maxHeaderBytes * 2)
            limits.maxHeaderFieldCount = 256
            return limits
        }()
        let idle = TimeAmount.nanoseconds(Int64(config.idleTimeout * 1e9))
        let slow = TimeAmount.nanoseconds(Int64(config.slowClientTimeout * 1e9))

        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            // TCP_NODELAY is a TCP-level option (`tcpOption`): `socketOption(.tcp_nodelay)` is
            // SOL_SOCKET's option of the same number, SO_DEBUG, which only root may set (a normal
            // user's proxy closed every connection it accepted). Set in the initializer, so a
            // refusal is logged and the connection kept.
            // A response pauses reading from the cache with 1 MiB queued, resumes below 256 KiB.
            .childChannelOption(ChannelOptions.writeBufferWaterMark,
                                value: ChannelOptions.Types.WriteBufferWaterMark(low: 256 << 10, high: 1 << 20))
            .childChannelInitializer { [connections] channel in
                // Loops of the server's own close every connection as they stop; given ones do not.
                if !ownsGroup { connections.add(channel) }
                return channel.eventLoop.makeCompletedFuture {
                    SocketOptionLog.set(ChannelOptions.tcpOption(.tcp_nodelay), value: 1, name: "TCP_NODELAY", on: channel,
                                        logger: logger)
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: false,
                                                         withOutboundHeaderValidation: true,
                                                         withEncoderConfiguration: .init(),
                                                         withDecoderLimitConfiguration: limits)
                    try sync.addHandler(ProtocolErrorHandler())
                    try sync.addHandler(IdleStateHandler(readTimeout: idle, writeTimeout: slow))
                    try sync.addHandler(ProxyHTTPHandler(service: service, boundPort: { portBox.withLockedValue { $0 } }))
                }
            }
        let channel: Channel
        do {
            channel = try bootstrap.bind(host: config.bindAddress, port: config.port).wait()
        } catch {
            if ownsGroup { try? group.syncShutdownGracefully() }
            if (error as? IOError)?.errnoCode == EADDRINUSE {
                throw ProxyServerError.portInUse(address: config.bindAddress, port: config.port)
            }
            throw ProxyServerError.bindFailed(address: config.bindAddress, port: config.port, cause: "\(error)")
        }
        let port = channel.localAddress?.port ?? config.port
        portBox.withLockedValue { $0 = port }
        running.group = ownsGroup ? group : nil
        running.channel = channel
        running.boundPort = port
        if !config.cacheDirectory.isEmpty {
            var status = ProxyStatus(version: config.version, port: port, bindAddress: config.bindAddress,
                                     tokenRequired: config.token != nil, cacheDirectory: config.cacheDirectory,
                                     token: config.token, pid: getpid())
            status.controlKey = config.controlKey
            do { try status.writeRuntimeFile(cacheDirectory: config.cacheDirectory) } catch {
                logger.warning("cannot write the proxy runtime file; 'httpcachefs url' will need --port",
                               metadata: ["error": "\(error)"])
            }
        }
        let door = DoorInfo.proxy(bindAddress: config.bindAddress, port: port, tokenRequired: config.token != nil)
        service.engine.metrics.addDoor(door)
        running.door = door
        logger.info("proxy listening", metadata: ["address": "\(config.bindAddress)", "port": "\(port)",
                                                  "token": "\(config.token == nil ? "none" : "required")"])
        return port
    }

    /// Stops listening, closes every connection (their readers are closed), and frees the
    /// threads. Idempotent. Do not call from one of the proxy's event loops.
    public func stop() {
        let stopped = running.withLockedValue { running in
            defer { running = Running() }
            return running
        }
        let (channel, group, door) = (stopped.channel, stopped.group, stopped.door)
        guard let channel else { return }
        if let door { service.engine.metrics.removeDoor(door) }
        if !configuration.cacheDirectory.isEmpty,
           ProxyStatus.readRuntimeFile(cacheDirectory: configuration.cacheDirectory)?.pid == getpid() {
            try? FileManager.default.removeItem(atPath: ProxyStatus.runtimeFilePath(cacheDirectory: configuration.cacheDirectory))
        }
        try? channel.close().wait()
        connections.closeAll()
        try? group?.syncShutdownGracefully()
        logger.info("proxy stopped")
    }

    /// The bound port while running.
    public var port: Int? { running.withLockedValue { $0.boundPort } }

    /// `http://127.0.0.1:PORT` (or the bind address) while running.
    public var baseURL: String? {
        port.map { ProxyConfiguration.localBase(bindAddress: configuration.bindAddress, port: $0) }
    }

    /// The proxy URL for `original` on this server (with its token or signature), or nil when
    /// not running.
    public func proxyURL(for original: String) -> String? {
        baseURL.map { ProxyURL.make(original: original, base: $0, token: configuration.token, key: configuration.signingKey) }
    }

    /// Returns once the listener is closed (after `stop()`).
    public func waitUntilStopped() async {
        guard let channel = running.withLockedValue({ $0.channel }) else { return }
        try? await channel.closeFuture.get()
    }
}

/// The channels of a server's open connections, each forgotten when it closes.
final class OpenChannels: Sendable {
    private let channels = NIOLockedValueBox([ObjectIdentifier: Channel]())

    func add(_ channel: Channel) {
        let id = ObjectIdentifier(channel)
        channels.withLockedValue { $0[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in _ = channels.withLockedValue { $0.removeValue(forKey: id) } }
    }

    /// Closes every open connection and waits until each closed.
    func closeAll() {
        let open = channels.withLockedValue { Array($0.values) }
        for c in open { try? c.close().wait() }
    }
}

public enum ProxyServerError: Error, CustomStringConvertible {
    /// Listening beyond loopback without a token would make an open proxy for the network.
    case tokenRequired(bindAddress: String)
    case bindFailed(address: String, port: Int, cause: String)
    /// Another process listens there (EADDRINUSE): the caller knows which option changes the port.
    case portInUse(address: String, port: Int)

    public var description: String {
        switch self {
        case let .tokenRequired(address):
            return "binding the proxy to \(address) (beyond loopback) requires a token (--token)"
        case let .bindFailed(address, port, cause):
            return "cannot listen on \(address):\(port): \(cause)"
        case let .portInUse(address, port):
            return "cannot listen on \(address):\(port): the port is in use"
        }
    }
}
