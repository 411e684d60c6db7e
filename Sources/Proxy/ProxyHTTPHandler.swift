import CacheCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// One client connection: routes each request, then streams the planned response.
///
/// `HTTPServerPipelineHandler` sits in front, so requests arrive one at a time even when the
/// client pipelines: the next head is delivered only after this response's `.end`. The
/// connection's state and every decision about it live in `ProxyConnectionState`; this handler
/// feeds it events and carries out its actions. Confined to the channel's event loop;
/// completions from the engine hop back onto it, and those of a request that is no longer
/// current are dropped by the state machine. Not `Sendable`: what crosses threads is a
/// `NIOLoopBound` of it, whose value only the loop may take. No file is read on the loop. The
/// owner-only pages need their proof in the request (`OwnerProof`, decided by the router): who
/// the client is proves nothing.
final class ProxyHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let service: ProxyService
    private let boundPort: () -> Int
    private var logger: Logger

    private var connection = ProxyConnectionState()
    private var stream: ResponseStream?
    private var headDeadline: Scheduled<Void>?
    private var peerIsLoopback = false
    /// The request's method and target as the log shows them (`loggable`), made when first logged.
    private var requestMethod = ""
    private var requestTarget = ""
    private var requestLine: String { "\(requestMethod) \(Self.loggable(requestTarget))" }
    /// When the current request's head arrived, by the engine's clock: for time to first byte
    /// and the log's duration.
    private var startedAt: MonotonicInstant?
    /// The request asked for its slices to go to the cap's scan share (`ProxyURL.scanShareHeader`).
    private var fillsScanShare = false

    init(service: ProxyService, boundPort: @escaping () -> Int) {
        self.service = service
        self.boundPort = boundPort
        self.logger = service.logger
    }

    // MARK: Connection lifecycle

    func channelActive(context: ChannelHandlerContext) {
        if let ip = context.remoteAddress?.ipAddress { peerIsLoopback = ProxyConfiguration.isLoopback(ip) }
        armHeadDeadline(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        if let stream {
            logger.debug("client went away mid-response", metadata: ["request": "\(requestLine)", "sent": "\(stream.bodyBytesSent)"])
        }
        stream?.cancel()
        stream = nil
        connection.channelClosed()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { stream?.resume() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent {
            switch idle {
            case .read:
                if connection.idleTimeout() == .close { context.close(promise: nil) }
            case .write:
                if connection.writeTimeout(waitingForWritable: stream?.waitingForWritable == true) == .close {
                    logger.info("client stopped reading; closing", metadata: ["request": "\(requestLine)"])
                    context.close(promise: nil)
                }
            default:
                break
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if !(error is HTTPParserError) {
            logger.debug("connection error", metadata: ["error": "\(error)"])
        }
        context.close(promise: nil)
    }

    /// A connection must send a whole request head within the idle timeout: a client trickling
    /// header bytes would otherwise hold it forever (each byte resets a plain idle timer).
    private func armHeadDeadline(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        let timeout = TimeAmount.nanoseconds(Int64(service.configuration.idleTimeout * 1e9))
        headDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] in
            guard let self, self.connection.idleTimeout() == .close else { return }
            context.close(promise: nil)
        }
    }

    // MARK: Requests

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case let .head(head) = unwrapInboundIn(data) else { return }
        headDeadline?.cancel()
        _ = connection.requestHead(version: head.version, keepAlive: head.isKeepAlive, isHead: head.method == .HEAD)
        startedAt = service.engine.configuration.engineClock.monotonic
        requestMethod = head.method.rawValue
        requestTarget = head.uri
        let headerBytes = head.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
        if let marker = service.configuration.loopMarker, head.headers["via"].contains(where: { $0.contains(marker) }) {
            connection.closeAfterResponse()
            respondText(context: context, status: 508,
                        "loop detected: this request came from this proxy's own fetches (an origin redirects into the proxy?)")
            return
        }
        let hostLines = head.headers["host"]
        let route = ProxyRouter.hostFieldRefusal(lines: hostLines, http11: head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1))
            ?? service.router.route(method: head.method.rawValue, target: head.uri, headerBytes: headerBytes,
                                    host: hostLines.first, port: boundPort(),
                                    controlKey: head.headers.first(name: ControlRequest.keyHeader))
        switch route {
        case .ping:
            respond(context: context, status: 200, contentType: "text/plain; charset=utf-8", body: Array("pong\n".utf8))
        case let .status(tokenPresented, keyPresented):
            // The cache directory only to the owner (`url` checks it is the one it means).
            let status = ProxyStatus(serving: service.configuration, port: boundPort(),
                                     peerIsLoopback: peerIsLoopback && keyPresented,
                                     tokenPresented: tokenPresented)
            respond(context: context, status: 200, contentType: "application/json", body: status.encoded())
        case .statusPage:
            respond(context: context, status: 200, contentType: "text/html; charset=utf-8", body: StatusPage.html,
                    extra: StatusPage.headers)
        case let .statusDocument(proof):
            let view: StatusView
            switch StatusDocumentQuery.view(target: head.uri) {
            case let .success(v): view = v
            case let .failure(error): return respondText(context: context, status: 400, "status.json: \(error)")
            }
            // One pass over every entry (about 0.6 s of CPU at 100k files): built and encoded on
            // the engine's pool for blocking work, as the control requests are, so the loop's
            // other connections (players) are not held; answered back on the loop.
            let id = connection.request.id
            let loop = context.eventLoop
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
            let (service, showDirectory, tokenPresented) = (service, peerIsLoopback, proof == .token)
            service.engine.runBlocking {
                let document = Self.statusDocument(service: service, showDirectory: showDirectory, tokenPresented: tokenPresented, view: view)
                let missing = document.view == "folder" && document.page == nil
                let body = missing ? [] : document.encoded()
                loop.execute {
                    let (handler, context) = bound.value
                    guard handler.connection.prepared(request: id) == .proceed else { return }
                    if missing {
                        return handler.respondText(context: context, status: 404, "status.json: no such folder or file now (emptied, or the filter matches none of its files): reload the page")
                    }
                    handler.respond(context: context, status: 200, contentType: "application/json", body: body, extra: [("Cache-Control", "no-store")])
                }
            }
        case .metrics:
            guard let metricsText = service.metricsText else {
                respondText(context: context, status: 404, "no metrics are exported by this proxy")
                return
            }
            respond(context: context, status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                    body: Array(metricsText().utf8), extra: [("Cache-Control", "no-store")])
        case let .redirect(location):
            respond(context: context, status: 302, contentType: "text/plain; charset=utf-8",
                    body: Array("see \(location)\n".utf8), extra: [("Location", location)])
        case let .reject(status, message):
            var extra: [(String, String)] = []
            if status == 405 { extra.append(("Allow", "GET, HEAD")) }
            if status == 414 || status == 431 || status == 400 { connection.closeAfterResponse() }
            respondText(context: context, status: status, message, extra: extra)
        case let .proxy(url):
            startProxy(context: context, url: url, head: head)
        case let .control(request):
            guard peerIsLoopback else {
                respondText(context: context, status: 403, "control requests are taken from this machine only")
                return
            }
            // A mount's arguments may hold headers and tokens: its action alone is logged.
            if case let .mounts(action, _) = request {
                logger.info("control request", metadata: ["request": "\(requestMethod) \(ControlRequest.pathPrefix)\(action) (arguments not logged)"])
            } else {
                logger.info("control request", metadata: ["request": "\(requestLine)"])
            }
            let id = connection.request.id
            let loop = context.eventLoop
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
            service.control(request) { answer in
                loop.execute {
                    let (handler, context) = bound.value
                    guard handler.connection.prepared(request: id) == .proceed else { return }
                    handler.respondText(context: context, status: answer.status, answer.text)
                }
            }
        }
    }

    private func startProxy(context: ChannelHandlerContext, url: String, head: HTTPRequestHead) {
        let conditions = RequestConditions(range: head.headers.first(name: "range"),
                                           ifRange: head.headers.first(name: "if-range"),
                                           ifNoneMatch: head.headers.first(name: "if-none-match"),
                                           ifModifiedSince: head.headers.first(name: "if-modified-since"),
                                           ifMatch: Self.joined(head.headers["if-match"]),
                                           ifUnmodifiedSince: head.headers.first(name: "if-unmodified-since"))
        let isHead = head.method == .HEAD
        let exact = head.headers.contains(name: ProxyURL.exactRangeHeader)
        fillsScanShare = head.headers.contains(name: ProxyURL.scanShareHeader)
        let warmUp = head.headers.contains(name: ProxyURL.warmUpHeader)
        let id = connection.request.id
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        service.prepare(url: url, conditions: conditions, isHead: isHead, exactRange: exact) { result in
            let proceed: @Sendable () -> Void = {
                let (handler, context) = bound.value
                guard handler.connection.prepared(request: id) == .proceed else { return }
                switch result {
                case let .failure(error):
                    handler.respondError(context: context, error)
                case let .success(prepared):
                    handler.serve(context: context, prepared, isHead: isHead, warmUp: warmUp)
                }
            }
            // A fresh entry is answered right here on the loop, inside `prepare`: serving it in
            // this turn saves the wake-up of a hop (the other answers come from engine threads).
            if loop.inEventLoop { proceed() } else { loop.execute(proceed) }
        }
    }

    /// - Parameter warmUp: the request is `preload`'s (`ProxyURL.warmUpHeader`): its reader is a
    ///   background one, counted and fetched as warm-up, not as a player.
    private func serve(context: ChannelHandlerContext, _ prepared: ProxyService.Prepared, isHead: Bool, warmUp: Bool) {
        let plan: ResponsePlan
        var source: ResponseStream.Source = .none
        switch prepared {
        case let .entry(entry, p):
            plan = p
            if !isHead, Self.needsSource(p.body) {
                source = .reader(service.engine.makeReader(for: entry, end: Self.lastByteEnd(p.body), door: .proxy,
                                                            requestStartedAt: startedAt, background: warmUp,
                                                            scanShare: fillsScanShare))
            }
        case let .memory(bytes, p):
            plan = p
            source = .memory(bytes)
        }
        let head = responseHead(status: plan.status, headers: plan.headers, body: plan.body, fromOrigin: true)
        let body: ResponseBody = isHead ? .parts([]) : plan.body
        let id = connection.request.id
        let stream = ResponseStream(context: context, head: head, body: body, source: source) { [weak self] outcome in
            guard let self, self.connection.streamEnded(request: id) == .proceed else { return }
            self.streamDidEnd(context: context, outcome)
        }
        self.stream = stream
        stream.start()
    }

    /// Sent with every body that came from an origin. The proxy serves every origin under its
    /// own origin (`http://127.0.0.1:8718`), the status page's and `status.json`'s: an HTML or
    /// SVG file a hostile origin serves, opened in a browser through the proxy, would otherwise
    /// run its script there and read `status.json` (every cached URL of every origin, their
    /// query tokens included). `sandbox` runs no script, submits no form and opens no popup in
    /// such a document; `allow-same-origin` keeps its origin, since Chromium's page for a video
    /// opened on its own loads the video with CORS, which an opaque origin would fail (no
    /// `Access-Control-Allow-Origin`). Media elements, players and `fetch` of playlists (hls.js)
    /// ignore the header.
    static let originContentPolicy = "sandbox allow-same-origin"

    /// The engine's status document, with each file's proxy URL (carrying the token only when
    /// the request did) and the cache directory for clients on this machine only; URL
    /// passwords masked.
    private static func statusDocument(service: ProxyService, showDirectory: Bool, tokenPresented: Bool, view: StatusView) -> StatusDocument {
        var document = service.engine.statusDocument(version: service.configuration.version, showDirectory: showDirectory, view: view)
        let token = tokenPresented ? service.configuration.token : nil
        for i in document.files.indices {
            document.files[i].proxyPath = ProxyURL.make(original: document.files[i].url, base: "", token: token,
                                                        key: service.configuration.signingKey)
        }
        return document.redactedForDisplay()
    }

    /// A request target for a log line: a proxy URL as the URL it names, its user-info password
    /// masked (`/?url=` percent-encodes it, `/u/` base64-encodes it: neither hides it); anything
    /// else as `displayTarget` shows it, percent-decoded, with any password masked.
    static func loggable(_ target: String) -> String {
        if let decoded = try? ProxyURL.decode(path: target) { return DisplayURL.redacted(decoded.url) }
        let shown = displayTarget(target)
        return DisplayURL.redactingPasswords(in: shown.removingPercentEncoding ?? shown)
    }

    /// A list field sent on several lines is one list (RFC 9110 §5.3); nil when absent.
    static func joined(_ lines: [String]) -> String? { lines.isEmpty ? nil : lines.joined(separator: ", ") }

    /// A request target as logs show it. Never the token or a signature (a pasted log would hand
    /// out the URL): `/t/<token>/...` becomes `/t/-/...`, `/s/<sig>/...` becomes `/s/-/...`, and
    /// `&sig=` of the query form `sig=-`. Never a URL's password either: the query form's
    /// percent-encoded original (`?url=http%3A%2F%2Fu%3Apw%40host`) is decoded for the log, so
    /// its password is found and masked as in every other log line (`DisplayURL`).
    static func displayTarget(_ target: String) -> String {
        var out = ""
        var rest = Substring(target)
        for marker in ["/t/", "/s/"] where rest.hasPrefix(marker) {
            let after = rest.dropFirst(3)
            out += marker + "-"
            rest = after[(after.firstIndex(of: "/") ?? after.endIndex)...]
        }
        out += rest
        out = redactingKey(out)
        guard out.contains("url=") else { return out }
        let decoded = out.split(separator: "&", omittingEmptySubsequences: false).map { part -> String in
            if part.hasPrefix("sig=") { return "sig=-" }
            return String(part).removingPercentEncoding ?? String(part)
        }.joined(separator: "&")
        return DisplayURL.redactingPasswords(in: decoded)
    }

    /// `key=` of a query (the control key in the status page's address) as `key=-`.
    static func redactingKey(_ target: String) -> String {
        guard let q = target.firstIndex(of: "?"), target[q...].contains("key=") else { return target }
        let items = target[target.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("key=") ? "key=-" : String($0) }
        return String(target[...q]) + items.joined(separator: "&")
    }

    private static func needsSource(_ body: ResponseBody) -> Bool {
        switch body {
        case .untilEnd: return true
        case let .parts(parts): return parts.contains { if case .bytes = $0 { return true }; return false }
        }
    }

    /// Where the body's last byte range ends: the response reads nothing past it, so neither
    /// does its read-ahead (a 206 for 20-30 MiB fetches those 10 MiB, not 30 more).
    private static func lastByteEnd(_ body: ResponseBody) -> Int64? {
        guard case let .parts(parts) = body else { return nil }
        return parts.compactMap { if case let .bytes(r) = $0 { return r.upperBound }; return nil }.max()
    }

    private func streamDidEnd(context: ChannelHandlerContext, _ outcome: ResponseStream.Outcome) {
        let sent = stream?.bodyBytesSent ?? 0
        stream = nil
        switch outcome {
        case .completed:
            finishResponse(context: context, status: nil, bodyBytes: sent)
        case let .failedBeforeHead(error):
            respondError(context: context, error)
        case let .aborted(reason):
            logger.warning("response abandoned midway", metadata: ["request": "\(requestLine)", "reason": "\(reason)"])
            if connection.responseAborted() == .close { context.close(promise: nil) }
        }
    }

    // MARK: Writing

    /// - Parameter fromOrigin: the body is an origin's (`originContentPolicy`).
    private func responseHead(status: Int, headers: [(String, String)], body: ResponseBody,
                              fromOrigin: Bool = false) -> HTTPResponseHead {
        var h = HTTPHeaders(headers)
        h.add(name: "Server", value: "httpcachefs/\(service.configuration.version)")
        if fromOrigin { h.add(name: "Content-Security-Policy", value: Self.originContentPolicy) }
        let version = connection.request.version
        if case .untilEnd = body, version == .http1_0 {
            // HTTP/1.0 has no chunked encoding: the end of the body is the end of the connection.
            connection.closeAfterResponse()
        }
        if !connection.request.keepAlive {
            h.replaceOrAdd(name: "Connection", value: "close")
        } else if version == .http1_0 {
            h.replaceOrAdd(name: "Connection", value: "keep-alive")
        }
        return HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: h)
    }

    private func respondError(context: ChannelHandlerContext, _ error: CacheError) {
        let status = error.httpStatus
        logger.log(level: status == 404 || status == 403 ? .info : .warning, "origin error",
                   metadata: ["request": "\(requestLine)", "status": "\(status)", "error": "\(error)"])
        // A spent budget says when to come back: the seconds until it resets.
        var extra: [(String, String)] = []
        if case let .budgetSpent(url) = error, let seconds = service.engine.egressRetryAfter(url: url) {
            extra.append(("Retry-After", String(seconds)))
        }
        respondText(context: context, status: status, "\(error)", extra: extra)
    }

    private func respondText(context: ChannelHandlerContext, status: Int, _ message: String, extra: [(String, String)] = []) {
        respond(context: context, status: status, contentType: "text/plain; charset=utf-8",
                body: Array((message + "\n").utf8), extra: extra)
    }

    private func respond(context: ChannelHandlerContext, status: Int, contentType: String, body: [UInt8],
                         extra: [(String, String)] = []) {
        let head = responseHead(status: status,
                                headers: [("Content-Type", contentType), ("Content-Length", String(body.count))] + extra,
                                body: .parts([.literal(body)]))
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !connection.request.isHead {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        finishResponse(context: context, status: status, bodyBytes: Int64(body.count))
    }

    private func finishResponse(context: ChannelHandlerContext, status: Int?, bodyBytes: Int64) {
        logger.debug("served", metadata: ["request": "\(requestLine)", "status": "\(status.map(String.init) ?? "-")",
                                          "bytes": "\(bodyBytes)",
                                          "ms": "\(startedAt.map { (service.engine.configuration.engineClock.monotonic - $0).nanoseconds / 1_000_000 } ?? 0)"])
        let action = connection.responseFinished()
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            if action == .close { context.close(promise: nil) }
        }
        if action == .awaitNextHead { armHeadDeadline(context: context) }
    }
}
