import NIOCore
import NIOHTTP1

/// The last handler of a tier node connection's pipeline (after NIO's HTTP/1.1 client codec):
/// passes each part of an answer to the transfer whose request is on the connection, and tells
/// it when the connection fails or closes. Reads only when asked (`autoRead` is off): a transfer
/// whose sink paused reads nothing more, and the node's bytes wait in the socket.
///
/// Runs on the connection's event loop. An idle connection (in the pool) has no owner: bytes
/// arriving on it are not an answer to anything, so it is closed.
final class NodeConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    /// The transfer whose request is on this connection; nil while idle.
    var owner: NodeTransfer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let owner else {
            context.close(promise: nil)
            return
        }
        owner.received(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        owner?.readComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        let o = owner
        owner = nil
        o?.connectionLost("the node closed the connection")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        let o = owner
        owner = nil
        context.close(promise: nil)
        o?.connectionLost("\(error)")
    }
}
