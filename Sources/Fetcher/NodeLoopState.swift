import CacheCore
import NIOConcurrencyHelpers
import NIOCore

/// A kept connection to a tier node: its channel and the handler that hands the channel's
/// answers to the transfer using it. Made and used on the channel's event loop only.
struct NodeConnection: Sendable {
    let channel: Channel
    let handler: NIOLoopBound<NodeConnectionHandler>
}

/// What one event loop holds for the node client: its idle kept connections per node (a
/// transfer takes one of its own loop's, so a proxied miss never leaves the thread its request
/// arrived on), and its transfers with an attempt in progress, which one ticker per loop checks
/// for stalls (a timer per attempt cost more than the check).
///
/// Design note: confined to `loop`; made for every loop of the group when the source starts, so
/// finding a loop's state takes no lock.
// @unchecked: loop-confined; only `loop` is read elsewhere (immutable).
final class NodeLoopState: @unchecked Sendable {
    let loop: EventLoop
    /// Idle connections kept per node; one more is closed.
    let maxIdle: Int
    private var idle: [String: [NodeConnection]] = [:]
    private var active: [Int: NodeTransfer] = [:]
    private var ticker: RepeatedTask?
    private var closed = false

    init(loop: EventLoop, maxIdle: Int) {
        self.loop = loop
        self.maxIdle = max(1, maxIdle)
    }

    /// An open idle connection to `node`, most recently used first.
    func take(node: String) -> NodeConnection? {
        while let c = idle[node]?.popLast() {
            if c.channel.isActive { return c }
        }
        return nil
    }

    /// Keeps `connection` for the next request to `node`, or closes it when enough are kept.
    func put(_ connection: NodeConnection, node: String) {
        var list = idle[node, default: []]
        list.removeAll { !$0.channel.isActive }
        guard !closed, list.count < maxIdle else {
            idle[node] = list
            connection.channel.close(promise: nil)
            return
        }
        list.append(connection)
        idle[node] = list
    }

    /// `transfer` has an attempt in progress: checked for stalls each second until `unwatch`.
    func watch(_ transfer: NodeTransfer) {
        active[transfer.id] = transfer
        if ticker == nil {
            ticker = loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [self] task in
                for t in Array(active.values) { t.stallCheck() }
                if active.isEmpty {
                    task.cancel()
                    ticker = nil
                }
            }
        }
    }

    func unwatch(_ transfer: NodeTransfer) { active.removeValue(forKey: transfer.id) }

    /// Closes every idle connection; later ones are closed as they come back.
    func closeAll() {
        closed = true
        for c in idle.values.flatMap({ $0 }) { c.channel.close(promise: nil) }
        idle = [:]
        ticker?.cancel()
        ticker = nil
    }
}
