import CacheCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// rclone's remote control (`--rc`) on a loopback port of its own, so the tools that tell a
/// media server about new files (plex_autoscan, autoscan, `rclone rc vfs/refresh ...`) work
/// against a mount as they do against rclone's.
///
/// Owns its listener and the connections on it; runs on the loops it is given (the daemon's),
/// one request at a time per connection (`HTTPServerPipelineHandler`). A request is checked
/// (`RcAccess`), parsed (`RcRequest`) and answered (`RcCalls`) in a task, never on the loop;
/// the answer is written back on the connection's loop. Nothing here blocks.
public final class RcServer: Sendable {
    let core: RcCore
    let host: String
    let requestedPort: Int
    let group: EventLoopGroup
    private let running = NIOLockedValueBox<Channel?>(nil)
    private let connections = OpenChannels()

    /// - Parameters:
    ///   - host, port: a loopback address (`RcAddress`); port 0 picks a free one.
    ///   - clock: the wall clock of the times the answers show (jobs' start and end, `core/stats`'
    ///     elapsed time): the engine's, given by the executable's wiring.
    public init(host: String, port: Int, access: RcAccess, hooks: RcHooks, clock: @escaping @Sendable () -> Date,
                logger: Logger, group: EventLoopGroup) {
        self.host = host
        self.requestedPort = port
        self.group = group
        core = RcCore(access: access, hooks: hooks, jobs: RcJobs(clock: clock), logger: logger)
    }

    /// Binds and serves; the bound port.
    @discardableResult
    public func start() throws -> Int {
        try running.withLockedValue { channel in
            if let channel, let port = channel.localAddress?.port { return port }
            let core = self.core, connections = self.connections
            let bootstrap = ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: 64)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    connections.add(channel)
                    return channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
                        try sync.addHandler(IdleStateHandler(readTimeout: .seconds(60), writeTimeout: .seconds(60)))
                        try sync.addHandler(RcHTTPHandler(core: core))
                    }
                }
            let bound: Channel
            do {
                bound = try bootstrap.bind(host: host, port: requestedPort).wait()
            } catch {
                if (error as? IOError)?.errnoCode == EADDRINUSE { throw ProxyServerError.portInUse(address: host, port: requestedPort) }
                throw ProxyServerError.bindFailed(address: host, port: requestedPort, cause: "\(error)")
            }
            let port = bound.localAddress?.port ?? requestedPort
            core.port.withLockedValue { $0 = port }
            channel = bound
            core.logger.info("rc: rclone's remote control listening on \(host.contains(":") ? "[\(host)]" : host):\(port)")
            return port
        }
    }

    /// The bound port while running.
    public var port: Int? { running.withLockedValue { $0?.localAddress?.port } }

    /// Stops listening and closes every connection. Idempotent; not from one of the loops.
    public func stop() {
        guard let channel = running.withLockedValue({ c in defer { c = nil }; return c }) else { return }
        try? channel.close().wait()
        connections.closeAll()
    }
}

/// What every connection of one server shares; any thread.
final class RcCore: Sendable {
    let access: RcAccess
    let hooks: RcHooks
    let jobs: RcJobs
    let logger: Logger
    /// The bound port, for the Host check.
    let port = NIOLockedValueBox<Int?>(nil)
    /// Bodies beyond this are refused (413): a call's parameters are a few paths.
    static let maxBody = 1 << 20

    init(access: RcAccess, hooks: RcHooks, jobs: RcJobs, logger: Logger) {
        self.access = access
        self.hooks = hooks
        self.jobs = jobs
        self.logger = logger
    }

    /// The whole answer to one request: status, JSON body, extra headers.
    func respond(method: String, target: String, headers: HTTPHeaders, body: [UInt8]?) async -> (status: Int, body: RcValue, headers: [(String, String)]) {
        let call = String(RcRequest.split(target).path.drop { $0 == "/" })
        func failed(_ f: RcFailure) -> (Int, RcValue, [(String, String)]) {
            logger.warning("rc: \"\(f.call)\": error: \(f.message)")
            return (f.status, f.body, f.status == 401 ? [("WWW-Authenticate", "Basic realm=\"httpcachefs rc\"")] : [])
        }
        if let refusal = access.refusal(header: { headers.first(name: $0) }, port: port.withLockedValue { $0 }) {
            return failed(RcFailure(call: call, input: nil, status: refusal.status, message: refusal.message))
        }
        guard let body else { return failed(RcFailure(call: call, input: nil, status: 413, message: "the request body is larger than \(Self.maxBody) bytes")) }
        var request: RcRequest
        switch RcRequest.parse(method: method, target: target, contentType: headers.first(name: "Content-Type"), body: body) {
        case let .failure(f): return failed(f)
        case let .success(r): request = r
        }
        let asyncValue = request.params.removeValue(forKey: "_async")
        if let asyncValue, asyncValue.bool == nil {
            return failed(RcFailure(call: call, input: request.params, status: 400, message: "invalid value \"_async\"=\(asyncValue.json())"))
        }
        logger.info("rc: \"\(request.call)\"")
        if asyncValue?.bool == true, RcCalls.names.contains(request.call) {
            let id = jobs.start(request.call)
            let (hooks, jobs, r) = (self.hooks, self.jobs, request)
            Task { jobs.finish(id, await RcCalls.answer(r, hooks: hooks, jobs: jobs)) }
            return (200, .object(["jobid": .int(id)]), [])
        }
        switch await RcCalls.answer(request, hooks: hooks, jobs: jobs) {
        case let .success(value): return (200, value, [])
        case let .failure(f): return failed(f)
        }
    }
}

/// One connection: collects a request, has `RcCore` answer it in a task, writes the answer on
/// the loop. Loop-bound; crosses threads only as `NIOLoopBound`.
final class RcHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let core: RcCore
    private var head: HTTPRequestHead?
    private var body: [UInt8]? = []
    /// A call is being answered: an idle connection then waits for it (a recursive refresh of a
    /// large library takes minutes), rather than being closed under it.
    private var answering = false

    init(core: RcCore) { self.core = core }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(h):
            head = h
            body = []
        case var .body(buffer):
            if let b = body, b.count + buffer.readableBytes <= RcCore.maxBody {
                body = b + (buffer.readBytes(length: buffer.readableBytes) ?? [])
            } else {
                body = nil
            }
        case .end:
            guard let head else { return }
            self.head = nil
            answering = true
            let (core, received) = (self.core, body)
            body = []
            let loop = context.eventLoop
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
            Task {
                let answer = await core.respond(method: head.method.rawValue, target: head.uri, headers: head.headers, body: received)
                loop.execute {
                    bound.value.handler.write(answer, keepAlive: head.isKeepAlive, version: head.version, context: bound.value.context)
                }
            }
        }
    }

    private func write(_ answer: (status: Int, body: RcValue, headers: [(String, String)]), keepAlive: Bool,
                       version: HTTPVersion, context: ChannelHandlerContext) {
        answering = false
        guard context.channel.isActive else { return }
        let bytes = Array((answer.body.json() + "\n").utf8)
        var headers = HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", "\(bytes.count)")])
        for (n, v) in answer.headers { headers.add(name: n, value: v) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: answer.status), headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { done.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) } }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            if !answering { context.close(promise: nil) }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

extension RcHooks {
    /// Hooks whose refresh and removal are the proxy's control requests, carried out as they are
    /// for `httpcachefs refresh` and `cache rm` (`ProxyService.control`): `refresh?mount=&path=`
    /// through `mounts`, and `remove`. `readTree` reads every folder under a dir of a mountpoint
    /// that was not read yet (a recursive refresh, after the re-read): a line to add, or nil.
    public init(engine: CacheEngine, configuration: ProxyConfiguration, logger: Logger,
                mounts: @escaping @Sendable (String, [URLQueryItem]) async -> ControlAnswer,
                readTree: @escaping @Sendable (String, String) async -> ControlAnswer,
                mountpoints: @escaping @Sendable () -> [String],
                fileURL: @escaping @Sendable (String, String) -> String?,
                mountStats: @escaping @Sendable (String) -> (openFiles: Int, files: Int, dirs: Int)) {
        let service = ProxyService(engine: engine, configuration: configuration, logger: logger, mounts: mounts)
        @Sendable func control(_ request: ControlRequest) async -> ControlAnswer {
            await withCheckedContinuation { c in service.control(request) { c.resume(returning: $0) } }
        }
        self.init(mountpoints: mountpoints,
                  refresh: { mountpoint, dir, recursive in
                      let answer = await control(.mounts(action: "refresh", query: [URLQueryItem(name: "mount", value: mountpoint),
                                                                                    URLQueryItem(name: "path", value: dir)]))
                      guard recursive, answer.status == 200 else { return answer }
                      let read = await readTree(mountpoint, dir)
                      return ControlAnswer(status: read.status, text: answer.text + "\n" + read.text)
                  },
                  remove: { await control(.remove(urls: $0)) },
                  fileURL: fileURL, mountStats: mountStats,
                  cache: {
                      (configuration.cacheDirectory, engine.usage, engine.metrics.totals, engine.metrics.startedAt)
                  },
                  version: configuration.version)
    }
}
