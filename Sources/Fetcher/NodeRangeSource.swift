import CacheCore
import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// `RangeSource` for cache tier nodes (`TierRangeSource`'s `tier`) over SwiftNIO, on the
/// daemon's own event loops.
///
/// Why not libcurl, as for origins: through it a proxied random miss through the tier crosses
/// three threads (the proxy's event loop asks the curl thread, which wakes the event loop again
/// with the bytes), and on two cores those hand-offs and curl's turn are most of what a miss
/// costs beyond the node's own answer. Here a transfer runs on the loop that started it when that is
/// one of this source's loops (`group`, which the daemon's proxy shares): the request is read,
/// planned, asked of the node, answered and sent back without leaving the thread. Starts from
/// other threads (FUSE workers, the engine's pool) go to the next loop.
///
/// What it does not do, and leaves to the libcurl source (`canServe`): TLS nodes, proxies
/// (`--proxy`, `http_proxy`, `all_proxy`), netrc files. Everything else is as the libcurl source
/// does it for nodes: the same request headers (user agent, `--header`, `Via`, `--user`: a node
/// forwards them to the tier's origin, a credential origin; a node's redirect is its error, never
/// followed, so they cannot leave the node), the same `TransferState` deciding what each answer means, the connect timeout and the low-speed
/// floor of `FetcherConfiguration.forTierNodes`, the address policy, kept connections (per loop
/// and node), and the admission policy (`TransferAdmission`: `--max-connections` requests in flight
/// per node, the rest waiting in class order).
public final class NodeRangeSource: RangeSource, Sendable {
    public let configuration: FetcherConfiguration
    let logger: Logger
    /// The loops transfers run on.
    let group: EventLoopGroup
    private let ownedGroup: MultiThreadedEventLoopGroup?
    /// Each loop's connections and watched transfers, made once for every loop of `group`.
    private let loops: [ObjectIdentifier: NodeLoopState]
    /// Requests in flight per node, the rest waiting (`TransferAdmission.Limits.nodes`).
    let slots: NodeSlots
    /// The headers every node request carries (user agent, `--header`, `Via`, `--user`), made once.
    private let commonHeaders: [(String, String)]
    /// Node URLs as parsed, and what the address policy says of each node.
    private let targets = RecentResults<NodeTarget?>(capacity: 256)
    private let refusals = RecentResults<String?>(capacity: 64)

    private struct Live {
        var nextID = 1
        var transfers: [Int: NodeTransfer] = [:]
        var stopped = false
        var groupStopped = false
    }

    private let live = NIOLockedValueBox(Live())

    /// - Parameter group: the daemon's event loops (shared with its proxy); nil: a loop of the
    ///   source's own, stopped by `shutdown()`.
    public init(configuration: FetcherConfiguration, group: MultiThreadedEventLoopGroup? = nil, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        if let group {
            self.group = group
            ownedGroup = nil
        } else {
            let own = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            self.group = own
            ownedGroup = own
        }
        let maxIdle = max(4, configuration.maxConnections * 2)
        loops = Dictionary(uniqueKeysWithValues: self.group.makeIterator().map {
            (ObjectIdentifier($0), NodeLoopState(loop: $0, maxIdle: maxIdle))
        })
        commonHeaders = Self.commonHeaders(configuration)
        slots = NodeSlots(limits: .nodes(configuration))
    }

    deinit {
        if let ownedGroup, !live.withLockedValue({ $0.groupStopped }) {
            ownedGroup.shutdownGracefully(queue: .global()) { _ in }
        }
    }

    /// Whether this source can fetch from every one of `nodes` (base URLs like
    /// `http://10.0.0.5:8080`) as the libcurl source would: plain HTTP, no proxy (none set, and
    /// none in the environment, which libcurl would honour) and no netrc file.
    public static func canServe(nodes: [String], configuration: FetcherConfiguration,
                                environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard configuration.upstreamProxy == nil, configuration.access.netrcFile == nil else { return false }
        for name in ["http_proxy", "all_proxy", "ALL_PROXY"] where !(environment[name] ?? "").isEmpty { return false }
        return nodes.allSatisfy { NodeTarget(url: $0 + "/") != nil }
    }

    public func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        guard let target = targets.value(for: request.url, NodeTarget.init(url:)), request.method == nil, request.body == nil else {
            let url = request.url
            configuration.clock.scheduler.after(.zero) {   // not on the caller's stack
                sink.fetchDidFinish(.invalidResponse(url: url, message: "a tier node request must be a GET of an http:// URL"))
            }
            return NodeNoHandle()
        }
        let loopState = loopState(for: request)
        let transfer: NodeTransfer? = live.withLockedValue { live in
            guard !live.stopped else { return nil }
            let t = NodeTransfer(id: live.nextID, loopState: loopState, source: self, request: request, target: target, sink: sink)
            live.nextID += 1
            live.transfers[t.id] = t
            return t
        }
        guard let transfer else {
            // Shut down: still exactly one fetchDidFinish, but not on the caller's stack (on the
            // timer thread: the loops may be gone).
            configuration.clock.scheduler.after(.zero) { sink.fetchDidFinish(.cancelled) }
            return NodeNoHandle()
        }
        // Always a new turn of the loop (for a caller on it, no wake-up): the sink hears nothing
        // before `start` returned.
        loopState.loop.execute { transfer.begin() }
        return transfer
    }

    /// Where a transfer runs. One a read waits on, started on one of these loops (a proxied
    /// miss), runs right there: its answer comes back to the thread that sends it on, with no
    /// hand-off. Read-ahead goes to another loop, so a reader's own loop sends while others
    /// receive (on one loop, one sequential reader's streams and its answers shared one core).
    /// Starts from elsewhere (FUSE workers, the engine's pool) take the loops in turn.
    private func loopState(for request: FetchRequest) -> NodeLoopState {
        let current = MultiThreadedEventLoopGroup.currentEventLoop.flatMap { loops[ObjectIdentifier($0)] }
        if let current, request.priority == .waiting { return current }
        for _ in 0..<max(1, loops.count) {
            let loop = group.next()
            if loops.count == 1 || loop !== current?.loop, let state = loops[ObjectIdentifier(loop)] { return state }
        }
        return current ?? loops[ObjectIdentifier(group.next())]!
    }

    /// Why the address policy refuses `target`'s node, or nil (asked once per node).
    func refusal(of target: NodeTarget) -> String? {
        refusals.value(for: target.node) { configuration.addressPolicy.refusal(url: $0 + "/") }
    }

    /// Stops every transfer (each finishes with `.cancelled`) and closes kept connections; a
    /// group of its own is stopped too. Later `start` calls finish at once with `.cancelled`.
    /// Waits for the cancellations unless called on one of the loops. Idempotent.
    public func shutdown() {
        let transfers: [NodeTransfer]? = live.withLockedValue { live in
            guard !live.stopped else { return nil }
            live.stopped = true
            return Array(live.transfers.values)
        }
        guard let transfers else { return }   // once only: its own loops may be gone
        let onLoop = MultiThreadedEventLoopGroup.currentEventLoop.map { loops[ObjectIdentifier($0)] != nil } ?? false
        for t in transfers {
            let done = t.loop.submit { t.cancelOnLoop() }
            if !onLoop { _ = try? done.wait() }
        }
        for state in loops.values {
            let done = state.loop.submit { state.closeAll() }
            if !onLoop { _ = try? done.wait() }
        }
        if let ownedGroup, !onLoop, live.withLockedValue({ live in defer { live.groupStopped = true }; return !live.groupStopped }) {
            try? ownedGroup.syncShutdownGracefully()
        }
    }

    /// Transfers not finished yet (tests).
    var liveCount: Int { live.withLockedValue { $0.transfers.count } }

    func forget(_ id: Int) {
        live.withLockedValue { _ = $0.transfers.removeValue(forKey: id) }
    }

    /// A new connection to `target` on `loop`, with the HTTP/1.1 client codec and a handler.
    func connect(to target: NodeTarget, on loop: EventLoop) -> EventLoopFuture<NodeConnection> {
        ClientBootstrap(group: loop)
            .connectTimeout(.milliseconds(Int64(max(1, configuration.connectTimeout * 1000))))
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(ChannelOptions.autoRead, value: false)
            // A read takes what the socket holds, up to libcurl's buffer size: a node's answer to
            // a 64 KiB read is one read, not NIO's adaptive 2, 4, 8... KiB of a new connection.
            .channelOption(ChannelOptions.recvAllocator,
                           value: FixedSizeRecvByteBufferAllocator(capacity: max(16 << 10, configuration.receiveBufferSize)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(NodeConnectionHandler())
                }
            }
            .connect(host: target.host, port: target.port)
            .flatMapThrowing { channel in
                let handler = try channel.pipeline.syncOperations.handler(type: NodeConnectionHandler.self)
                return NodeConnection(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
            }
    }

    /// The request headers, as the libcurl source sends them to a node.
    func requestHeaders(for request: FetchRequest, target: NodeTarget, range: String?, ifRange: String?) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(commonHeaders.count + request.headers.count + 3)
        headers.add(name: "Host", value: target.authority)
        headers.add(contentsOf: commonHeaders)
        for line in request.headers {
            if let (name, value) = Self.split(line) { headers.replaceOrAdd(name: name, value: value) }
        }
        if let range { headers.add(name: "Range", value: range) }
        if let range, let ifRange, range.hasPrefix("bytes=") { headers.add(name: "If-Range", value: ifRange) }
        return headers
    }

    /// What every request carries, in libcurl's order and with its rules: a `--header` of the
    /// same name replaces the default one.
    static func commonHeaders(_ c: FetcherConfiguration) -> [(String, String)] {
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: c.userAgent)
        headers.add(name: "Accept", value: "*/*")
        // The cache keeps the file's own bytes (see `CurlTransfer.beginAttempt`).
        headers.add(name: "Accept-Encoding", value: "identity")
        if let user = c.access.user {
            let pair = "\(user):\(c.access.password?.value ?? "")"
            headers.add(name: "Authorization", value: "Basic " + Data(pair.utf8).base64EncodedString())
        }
        for line in c.extraHeaders {
            if let (name, value) = split(line) { headers.replaceOrAdd(name: name, value: value) }
        }
        if let via = c.via { headers.add(name: "Via", value: via) }
        return headers.map { ($0.name, $0.value) }
    }

    /// A "Name: value" line as a header; nil for a line without a name or a value.
    private static func split(_ line: String) -> (String, String)? {
        guard let colon = line.firstIndex(of: ":") else { return nil }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces)
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !value.isEmpty else { return nil }
        return (name, value)
    }
}

/// The handle of a transfer that never started.
struct NodeNoHandle: FetchHandle {
    func cancel() {}
}
