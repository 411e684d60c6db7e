import NIOCore
import NIOHTTP1

/// Answers requests the HTTP parser rejects, like NIO's `HTTPServerProtocolErrorHandler`, but
/// with the status that says why: 431 when the head is too large (header fields or request
/// target beyond the decoder's limits), 400 for anything else malformed. The connection is
/// closed after (the decoder cannot resynchronise).
final class ProtocolErrorHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var hasUnterminatedResponse = false

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        if !hasUnterminatedResponse {
            let tooLarge = parserError == .headerOverflow
            let text = tooLarge ? "request head too large\n" : "malformed HTTP request\n"
            let headers = HTTPHeaders([("Connection", "close"), ("Content-Type", "text/plain; charset=utf-8"),
                                       ("Content-Length", String(text.utf8.count))])
            let head = HTTPResponseHead(version: .http1_1,
                                        status: tooLarge ? .requestHeaderFieldsTooLarge : .badRequest, headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case let .head(head) where head.status.code >= 200: hasUnterminatedResponse = true
        case .end: hasUnterminatedResponse = false
        default: break
        }
        context.write(data, promise: promise)
    }
}
