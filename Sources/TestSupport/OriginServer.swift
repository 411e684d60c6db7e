import CacheCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// An in-process HTTP/1.1 origin on loopback, with fault injection, for every test suite and
/// the benchmarks.
///
/// It serves files (from memory, or generated on the fly so a 1 GiB file costs no memory) with
/// the RFC 9110 behaviour players and caches depend on: single and suffix ranges, If-Range,
/// 416, ETag / Last-Modified, HEAD, keep-alive. `Faults` make it misbehave per path: error
/// statuses, dropped connections, ignored ranges, chunked bodies, trickles, redirects, silence.
/// Every request is logged (`requests`), so tests can check what went over the wire, e.g. that a
/// resumed transfer asked for the right range.
///
/// Bodies are streamed in 64 KiB chunks that follow the channel's writability (backpressure),
/// never materialised whole.
public final class OriginServer: @unchecked Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    let state: OriginState
    private let stopLock = NSLock()
    private var stopped = false  // guarded by stopLock

    /// The port actually bound (useful with `port: 0`).
    public let port: Int
    public let host: String

    /// Starts listening immediately. `port: 0` picks a free port.
    public init(host: String = "127.0.0.1", port: Int = 0) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let state = OriginState()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            // Streaming pauses when 1 MiB is queued and resumes below 256 KiB.
            .childChannelOption(ChannelOptions.writeBufferWaterMark,
                                value: ChannelOptions.Types.WriteBufferWaterMark(low: 256 << 10, high: 1 << 20))
            .childChannelInitializer { channel in
                let connection = state.connectionAccepted()
                state.wire.track(channel, connection: connection)
                // Its wire bytes first: a connection no longer open is counted in `bytesAcked`.
                channel.closeFuture.whenComplete { _ in
                    state.wire.closed(channel)
                    state.connectionClosed()
                }
                return channel.eventLoop.makeCompletedFuture {
                    // No check of the header values it sends: a hostile origin's (control
                    // characters in an ETag, say) go out as the test wrote them.
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true,
                                                                                    withOutboundHeaderValidation: false)
                    try channel.pipeline.syncOperations.addHandler(OriginHandler(state: state, connection: connection))
                }
            }
        do {
            channel = try bootstrap.bind(host: host, port: port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw error
        }
        self.group = group
        self.state = state
        self.host = host
        self.port = channel.localAddress?.port ?? port
        state.origin = "http://\(host.contains(":") ? "[\(host)]" : host):\(self.port)"
    }

    deinit { stop() }

    /// "http://127.0.0.1:PORT" + path.
    public func url(_ path: String) -> String { state.origin + path }

    /// Serves `data` at `path` (GET/HEAD, ranges, validators). Replacing a file with different data
    /// changes its default ETag: that is how tests model "the remote file changed".
    /// - Parameters:
    ///   - etag: default `"<hash of data>"`; pass `""` for no ETag at all.
    ///   - lastModified: default a fixed date (Mon, 01 Jan 2024 00:00:00 GMT).
    ///   - contentType: default application/octet-stream.
    public func setFile(_ path: String, data: [UInt8], etag: String? = nil, lastModified: Date? = nil,
                        contentType: String? = nil) {
        let tag = etag ?? OriginServer.defaultETag(data)
        state.setResource(path, OriginResource(content: .file(
            .bytes(data), etag: tag.isEmpty ? nil : tag,
            lastModified: lastModified.map(OriginServer.httpDate) ?? ResponsePlanner.defaultLastModified,
            contentType: contentType ?? "application/octet-stream")))
    }

    /// Serves the file at `file` (opened now, read as requests stream; ETag from its size and
    /// modification time, as nginx makes it).
    public func setDiskFile(_ path: String, file: String, lastModified: Date? = nil, contentType: String? = nil) throws {
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw OriginServerError.cannotOpen(path: file, errno: errno) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            close(fd)
            throw OriginServerError.cannotOpen(path: file, errno: e)
        }
        let tag = "\"\(String(st.st_mtim.tv_sec, radix: 16))-\(String(st.st_size, radix: 16))\""
        state.setResource(path, OriginResource(content: .file(
            .disk(OpenFile(fd: fd, length: Int64(st.st_size))), etag: tag,
            lastModified: lastModified.map(OriginServer.httpDate) ?? ResponsePlanner.defaultLastModified,
            contentType: contentType ?? "application/octet-stream")))
    }

    /// Serves `length` generated bytes at `path` without holding them: byte `i` is
    /// `generatedBytes(seed: seed, offset: i, count: 1)[0]`. ETag is derived from seed and length.
    public func setGeneratedFile(_ path: String, length: Int64, seed: UInt64, contentType: String? = nil) {
        state.setResource(path, OriginResource(content: .file(
            .generated(seed: seed, length: length), etag: "\"gen-\(String(seed, radix: 16))-\(length)\"",
            lastModified: ResponsePlanner.defaultLastModified,
            contentType: contentType ?? "application/octet-stream")))
    }

    /// The content `setGeneratedFile` serves for `seed`, from `offset`: for byte-exact comparisons.
    public static func generatedBytes(seed: UInt64, offset: Int64, count: Int) -> [UInt8] {
        GeneratedBytes.bytes(seed: seed, offset: offset, count: count)
    }

    /// Serves an arbitrary response (listings, playlists, errors) for GET and HEAD. Range is not
    /// applied; Content-Length is added unless `headers` has it or Transfer-Encoding.
    public func setResponse(_ path: String, status: Int, headers: [(String, String)], body: [UInt8]) {
        state.setResource(path, OriginResource(content: .fixed(status: status, headers: headers, body: body)))
    }

    public func remove(_ path: String) { state.removeResource(path) }

    /// Fault injection for `path` (exact request target, or path without query) or `"*"` for all
    /// paths without their own faults. `Faults()` resets; counters restart on every call.
    public func setFaults(_ path: String, _ faults: Faults) { state.setFaults(path, faults) }

    /// Requests since start or the last `resetLog()`, in arrival order.
    public var requests: [RequestRecord] { state.requests }

    public func resetLog() { state.resetLog() }

    /// TCP connections accepted since start.
    public var connectionsAccepted: Int { state.connections.accepted }
    /// The most TCP connections open at once since start.
    public var peakConnections: Int { state.connections.peak }
    /// TCP connections open now (closed ones are counted once their channel has closed).
    public var connectionsOpen: Int { state.connections.open }

    /// Body bytes handed to connections for `path` (matching the request target exactly, or
    /// without its query) since the last `resetLog()`. An answer the client cut counts all it had
    /// queued (channel and kernel send buffer, about 2 MiB on loopback), most of which never left
    /// the machine: `bytesAcked` (OriginServer+Wire.swift) counts what crossed.
    public func bytesServed(path: String) -> Int64 {
        state.requests.filter { $0.path == path || $0.pathWithoutQuery == path }.reduce(0) { $0 + $1.bodyBytes }
    }

    /// Requests for `path` (same matching as `bytesServed`) since the last `resetLog()`.
    public func requestCount(path: String) -> Int {
        state.requests.filter { $0.path == path || $0.pathWithoutQuery == path }.count
    }

    /// True once `condition` holds, looking again each time this origin logs a request, answers
    /// one, hands a connection body bytes, or opens or closes a connection: the origin says when
    /// something changed, so a test waits on that, not on the clock. False if it still does not
    /// hold after `timeout`, which bounds a hang and is never a measurement.
    public func wait(timeout: TimeInterval = 30, until condition: () -> Bool) -> Bool {
        state.wait(timeout: timeout, until: condition)
    }

    /// True once `count` requests for `path` (as `requestCount` matches it) have arrived.
    public func waitForRequests(path: String, count: Int = 1, timeout: TimeInterval = 30) -> Bool {
        wait(timeout: timeout) { requestCount(path: path) >= count }
    }

    /// Closes the listener and every connection. Idempotent. Do not call from an event loop.
    public func stop() {
        stopLock.lock()
        defer { stopLock.unlock() }
        guard !stopped else { return }
        stopped = true
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
        state.wire.closeAll()
    }

    /// `"<FNV-1a 64 of data>-<length>"` in quotes: a strong ETag that changes with the content.
    static func defaultETag(_ data: [UInt8]) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        data.withUnsafeBufferPointer { buf in
            for b in buf { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        }
        return "\"\(String(h, radix: 16))-\(data.count)\""
    }

    /// IMF-fixdate, as HTTP wants it.
    public static func httpDate(_ date: Date) -> String { HTTPDate.format(date) }
}

/// The origin's shared state: resources, faults with their counters, the request log.
/// Touched by test threads and by event loops, so every field is guarded by `lock`.
final class OriginState: @unchecked Sendable {
    private struct FaultState {
        var faults: Faults
        var statusUsed = 0
        var dropsUsed = 0
        var rangeRequests = 0
        var etagsRotated = 0
    }

    /// A condition, not a plain lock: each change a test may wait for (a request logged, body
    /// bytes handed out, a connection opened or closed) bumps `changes` and wakes `wait(until:)`.
    private let lock = NSCondition()
    private var changes = 0  // guarded by lock
    private var resources: [String: OriginResource] = [:]  // guarded by lock
    private var faults: [String: FaultState] = [:]  // guarded by lock
    private var log: [RequestRecord] = []  // guarded by lock
    /// Request id of `log[0]`: ids keep counting across `resetLog()`.
    private var logBase = 0  // guarded by lock
    private var nextID = 0  // guarded by lock
    /// Set once in `OriginServer.init`, before any request can arrive.
    var origin = ""
    private var sharedLink: SharedLink?  // guarded by lock
    /// The emulated network new responses go through (OriginServer+Link.swift); nil: loopback.
    var link: SharedLink? {
        get { lock.withLock { sharedLink } }
        set { lock.withLock { sharedLink = newValue } }
    }

    func setResource(_ path: String, _ r: OriginResource) { lock.withLock { resources[path] = r } }
    func removeResource(_ path: String) { lock.withLock { _ = resources.removeValue(forKey: path) } }
    func setFaults(_ path: String, _ f: Faults) { lock.withLock { faults[path] = FaultState(faults: f) } }
    var requests: [RequestRecord] { lock.withLock { log } }
    /// What crossed the wire, per connection (OriginServer+Wire.swift).
    let wire = WireLedger()
    private var accepted = 0, open = 0, peak = 0  // guarded by lock
    /// Returns the connection's number (1, 2, ...), as `RequestRecord.connection` gives it.
    func connectionAccepted() -> Int { lock.withLock { accepted += 1; open += 1; peak = max(peak, open); changed(); return accepted } }
    func connectionClosed() { lock.withLock { open -= 1; changed() } }

    /// Caller holds the lock.
    private func changed() {
        changes &+= 1
        lock.broadcast()
    }

    /// True once `condition` holds, looking again after each change the origin makes; false if
    /// it still does not after `timeout` (a bound on a hang, never a measurement). `condition`
    /// runs without the lock, so it may read the origin's counters.
    func wait(timeout: TimeInterval, until condition: () -> Bool) -> Bool {
        lock.waitForChanges(of: { changes }, timeout: timeout, until: condition)
    }
    var connections: (accepted: Int, peak: Int, open: Int) { lock.withLock { (accepted, peak, open) } }
    func resetLog() {
        lock.withLock {
            logBase += log.count
            log.removeAll()
            changed()
        }
        wire.reset()
    }

    /// Logs a request; says whether to stay silent, and how long to wait before answering.
    func begin(method: String, uri: String, headers: [(String, String)], connection: Int) -> (id: Int, silent: Bool, delay: TimeInterval) {
        lock.withLock {
            let id = logBase + log.count
            log.append(RequestRecord(method: method, path: uri,
                                     range: ResponsePlanner.header("range", in: headers.lowercasedNames),
                                     ifRange: ResponsePlanner.header("if-range", in: headers.lowercasedNames),
                                     status: 0, bodyBytes: 0, headers: headers, connection: connection))
            changed()
            let f = faultKey(uri).map { self.faults[$0]!.faults } ?? Faults()
            return (id, f.silent, f.delayBeforeHeaders)
        }
    }

    /// Decides the answer to request `id`, consuming fault counters, and logs its status.
    func plan(id: Int, method: String, uri: String, headers: [(String, String)]) -> ResponsePlan {
        lock.withLock {
            let key = faultKey(uri)
            let fs = key.map { self.faults[$0]! } ?? FaultState(faults: Faults())
            var resource = resources[uri] ?? resources[Self.stripQuery(uri)]
                ?? Self.stripQuery(uri).removingPercentEncoding.flatMap { resources[$0] }  // "/a%20b" serves "/a b"
            var faults = fs.faults
            if let every = faults.ignoreRangeEvery, let key, ResponsePlanner.header("range", in: headers.lowercasedNames) != nil {
                if self.faults[key]!.rangeRequests % max(1, every) == 0 { faults.ignoreRange = true }
                self.faults[key]!.rangeRequests += 1
            }
            if fs.faults.rotateETag, let key, case let .file(body, _, lastModified, contentType)? = resource?.content {
                self.faults[key]!.etagsRotated += 1
                resource = OriginResource(content: .file(body, etag: "\"rot-\(self.faults[key]!.etagsRotated)\"",
                                                         lastModified: lastModified, contentType: contentType))
            }
            let plan = ResponsePlanner.plan(
                method: method, headers: headers.lowercasedNames, resource: resource, faults: faults,
                origin: origin, statusFaultActive: fs.statusUsed < fs.faults.statusCount,
                dropActive: fs.dropsUsed < fs.faults.dropCount)
            if let key {
                if plan.statusFromFault { self.faults[key]!.statusUsed += 1 }
                if plan.dropAfterBytes != nil { self.faults[key]!.dropsUsed += 1 }
            }
            let index = id - logBase
            if index >= 0 && index < log.count { log[index].status = plan.status }
            changed()
            return plan
        }
    }

    func addBodyBytes(id: Int, _ n: Int64) {
        lock.withLock {
            let index = id - logBase
            if index >= 0 && index < log.count { log[index].bodyBytes += n }
            changed()
        }
    }

    /// Faults apply by exact target, then path without query, then "*". Caller holds the lock.
    private func faultKey(_ uri: String) -> String? {
        for key in [uri, Self.stripQuery(uri), "*"] where faults[key] != nil { return key }
        return nil
    }

    static func stripQuery(_ uri: String) -> String {
        uri.firstIndex(of: "?").map { String(uri[..<$0]) } ?? uri
    }
}

extension Array where Element == (String, String) {
    /// Same headers with lower-cased names, for lookups.
    var lowercasedNames: [(String, String)] { map { ($0.0.lowercased(), $0.1) } }
}

public enum OriginServerError: Error, CustomStringConvertible {
    case cannotOpen(path: String, errno: Int32)

    public var description: String {
        switch self {
        case let .cannotOpen(path, e): return "cannot open \(path): \(String(cString: strerror(e)))"
        }
    }
}
