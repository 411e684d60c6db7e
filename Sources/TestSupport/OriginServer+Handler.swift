import NIOCore
import NIOHTTP1

/// One connection of the origin: turns each request into a `ResponsePlan` (via `OriginState`)
/// and writes it, streaming the body under backpressure and applying the plan's faults
/// (drop after N bytes, trickle). Runs on its channel's event loop only.
///
/// Streaming: chunks are written while the channel is writable (the write buffer watermark
/// bounds what is queued); `channelWritabilityChanged` resumes. A trickle instead writes one
/// small quantum per timer tick. Behind an emulated link (OriginServer+Link.swift) the head waits
/// a round trip and a `LinkPacer` times every chunk.
final class OriginHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private static let chunkSize: Int64 = 64 << 10

    /// The body being written.
    private struct Streaming {
        var id: Int
        var body: BodySlice
        /// Next resource offset to send.
        var next: Int64
        /// Resource offset after which to close the connection instead of ending the response.
        var dropAt: Int64?
        var bytesPerSecond: Int?
        var keepAlive: Bool
        var garbage: [UInt8]?
    }

    private let state: OriginState
    private var requestHead: HTTPRequestHead?
    private var streaming: Streaming?
    private var timer: Scheduled<Void>?
    private var active = true
    /// Paces the body being written through the emulated link, if any (OriginServer+Link.swift).
    private var pacer: LinkPacer?

    /// The connection's number (`RequestRecord.connection`).
    private let connection: Int

    init(state: OriginState, connection: Int) {
        self.state = state
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head): requestHead = head
        case .body: break  // request bodies are ignored
        case .end:
            guard let head = requestHead else { return }
            requestHead = nil
            receive(context: context, head: head)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, timer == nil, streaming?.bytesPerSecond == nil { pump(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        streaming = nil
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    private func receive(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let headers = head.headers.map { ($0.name, $0.value) }
        let method = head.method.rawValue
        let (id, silent, faultDelay) = state.begin(method: method, uri: head.uri, headers: headers, connection: connection)
        if silent { return }  // never answer; the client's timeout is under test
        let delay = faultDelay + (state.link?.emulation.roundTrip ?? 0)
        if delay > 0 {
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) {
                self.timer = nil
                guard self.active else { return }
                self.respond(context: context, id: id, head: head, headers: headers)
            }
        } else {
            respond(context: context, id: id, head: head, headers: headers)
        }
    }

    private func respond(context: ChannelHandlerContext, id: Int, head: HTTPRequestHead, headers: [(String, String)]) {
        let plan = state.plan(id: id, method: head.method.rawValue, uri: head.uri, headers: headers)
        var responseHeaders = HTTPHeaders(plan.headers)
        let keepAlive = head.isKeepAlive
        if !keepAlive { responseHeaders.replaceOrAdd(name: "Connection", value: "close") }
        let responseHead = HTTPResponseHead(version: head.version, status: .init(statusCode: plan.status),
                                            headers: responseHeaders)
        if plan.dropAfterBytes == 0 {
            // Headers only, then hang up.
            context.writeAndFlush(wrapOutboundOut(.head(responseHead))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
            return
        }
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        guard let body = plan.body else {
            end(context: context, keepAlive: keepAlive)
            return
        }
        streaming = Streaming(id: id, body: body, next: body.start,
                              dropAt: plan.dropAfterBytes.map { body.start + $0 },
                              bytesPerSecond: plan.bytesPerSecond, keepAlive: keepAlive, garbage: plan.garbageAfterBody)
        // A trickle is its own, slower link.
        pacer = state.link.flatMap { $0.isPaced && plan.bytesPerSecond == nil ? LinkPacer(link: $0, now: Self.uptime) : nil }
        pump(context: context)
    }

    /// Writes body chunks until done, unwritable, or out of this tick's trickle quantum.
    private func pump(context: ChannelHandlerContext) {
        guard active, var s = streaming else { return }
        let limit = s.dropAt ?? s.body.end
        var budget = s.bytesPerSecond.map { Int64(max(1, $0 / 20)) } ?? Int64.max
        var linkResume: UInt64?
        sending: while s.next < limit && budget > 0 && context.channel.isWritable {
            var n = min(Self.chunkSize, limit - s.next, budget)
            if let pacer {
                switch pacer.admit(n, now: Self.uptime) {
                case let .send(allowed): n = allowed
                case let .wait(until):
                    linkResume = until
                    break sending
                }
            }
            var buffer = context.channel.allocator.buffer(capacity: Int(n))
            switch s.body.body {
            case let .bytes(data):
                buffer.writeBytes(data[Int(s.next)..<Int(s.next + n)])
            case let .generated(seed, _):
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Int(n)) { raw in
                    GeneratedBytes.fill(UnsafeMutableRawBufferPointer(rebasing: raw[0..<Int(n)]), seed: seed, offset: s.next)
                    return Int(n)
                }
            case let .disk(file):
                var complete = true
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Int(n)) { raw in
                    complete = file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<Int(n)]), at: s.next)
                    return complete ? Int(n) : 0
                }
                guard complete else {
                    // The file shrank on disk: a short body, never made-up bytes.
                    streaming = nil
                    context.close(promise: nil)
                    return
                }
            }
            s.next += n
            budget -= n
            state.addBodyBytes(id: s.id, n)
            if s.next == limit, s.dropAt != nil {
                // The fault: the last bytes before the drop reach the socket, then the connection dies.
                streaming = nil
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))).assumeIsolated().whenComplete { _ in
                    context.close(promise: nil)
                }
                return
            }
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        if s.next >= limit {
            streaming = nil
            if let garbage = s.garbage {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: garbage)))), promise: nil)
            }
            end(context: context, keepAlive: s.keepAlive)
            return
        }
        streaming = s
        context.flush()
        if let bps = s.bytesPerSecond {
            let quantum = Double(max(1, bps / 20))
            let interval = TimeAmount.nanoseconds(Int64(quantum / Double(bps) * 1e9))
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: interval) {
                self.timer = nil
                self.pump(context: context)
            }
        } else if let linkResume {
            timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(linkResume)) {
                self.timer = nil
                self.pump(context: context)
            }
        }
    }

    private static var uptime: UInt64 { NIODeadline.now().uptimeNanoseconds }

    private func end(context: ChannelHandlerContext, keepAlive: Bool) {
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { done.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
    }
}
