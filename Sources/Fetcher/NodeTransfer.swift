import CacheCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// One fetch from a tier node over SwiftNIO: its `TransferState` (what each answer means, shared
/// with the libcurl fetcher), its sink, and the connection of the attempt in progress.
///
/// Design note: confined to `loop`, the event loop chosen when it started (the caller's own when
/// that is one of the source's loops: a proxied miss is asked, answered and sent on one thread).
/// Every method runs there; `cancel`, `resume` and `setPriority` only hop onto it. The sink's
/// callbacks therefore arrive in order, on that loop, never concurrently. Nothing here blocks:
/// the sink answers `.pause` instead, and the connection reads nothing more (autoRead is off)
/// until `resume`, so at most one read's worth of body waits in `pending`.
///
/// An attempt: take a kept connection of this loop to the node (or connect), write the request,
/// read the answer; at its end the connection goes back to the pool if it can carry another
/// request, and `TransferState` says whether to finish or try again. A kept connection that the
/// node closed, or that holds bytes of no answer, fails before any answer arrives: that attempt
/// is retried on a new connection (`AttemptResult.staleConnection`), as libcurl does.
// @unchecked: loop-confined (see above); `id`, `loop`, `source` and `sink` are immutable.
final class NodeTransfer: FetchHandle, @unchecked Sendable {
    let id: Int
    let loop: EventLoop
    let loopState: NodeLoopState
    let source: NodeRangeSource
    let sink: FetchSink
    let target: NodeTarget
    /// The source's request slots (`TransferAdmission`'s policy).
    let slots: NodeSlots

    private var state: TransferState
    /// The connection of the attempt in progress.
    private var connection: NodeConnection?
    /// Counts attempts: a connect that completes for an earlier one is not used.
    private var attemptNumber = 0
    /// An attempt is in progress (from its request to its end).
    private var attemptActive = false
    /// The attempt's connection was kept from an earlier answer.
    private var reused = false
    /// Any part of an answer arrived in this attempt.
    private var answered = false
    /// The answer's connection can carry another request once the answer is read.
    private var keepAlive = false
    /// The answer's last part arrived.
    private var answerEnded = false
    /// The sink said `.pause`: `pending` holds the body parts it has not taken, in order.
    private var paused = false
    private var pending = CircularBuffer<ByteBuffer>()
    /// Bytes went to the sink since it was last told a batch ended (`fetchDidDrain`).
    private var tookBytes = false
    /// Body bytes that arrived since `windowStart` (the stall check's window).
    private var windowBytes = 0
    private var windowStart: MonotonicInstant
    private var retryTask: Scheduled<Void>?
    private var holdsSlot = false
    private var waitingForSlot = false
    private var cancelled = false
    private var finished = false
    private var priority: FetchPriority

    init(id: Int, loopState: NodeLoopState, source: NodeRangeSource, request: FetchRequest, target: NodeTarget, sink: FetchSink) {
        self.id = id
        self.loop = loopState.loop
        self.loopState = loopState
        self.source = source
        self.sink = sink
        self.target = target
        windowStart = source.configuration.clock.monotonic
        slots = source.slots
        // A node never redirects: a 3xx is that node's error (the piece goes elsewhere), so nothing
        // it answers can take the forwarded credentials off-node.
        state = TransferState(request: request, policy: source.configuration.retryPolicy, redirects: .never)
        priority = request.priority
    }

    // MARK: FetchHandle (any thread)

    func cancel() { loop.execute { self.cancelOnLoop() } }
    func resume() { loop.execute { self.resumeOnLoop() } }
    func setPriority(_ priority: FetchPriority, waitedSeconds: Double) {
        loop.execute {
            self.priority = priority
            if self.waitingForSlot { self.slots.setPriority(id: self.id, priority) }
        }
    }

    // MARK: Life (on the loop)

    /// The first step, on the loop: a slot, then the first attempt.
    func begin() {
        guard !finished else { return }
        if cancelled { return finish(.cancelled) }
        if let reason = source.refusal(of: target) {
            return finish(.refusedAddress(url: state.request.url, reason: reason))
        }
        let granted = slots.acquire(id: id, node: target.node, priority: priority) { [self] in
            loop.execute { self.slotGranted() }
        }
        if granted {
            holdsSlot = true
            startAttempt()
        } else {
            waitingForSlot = true
        }
    }

    private func slotGranted() {
        waitingForSlot = false
        holdsSlot = true
        if finished {
            releaseSlot()
        } else if cancelled {
            finish(.cancelled)
        } else {
            startAttempt()
        }
    }

    private func releaseSlot() {
        if holdsSlot {
            holdsSlot = false
            slots.release(id: id)
        }
    }

    private func startAttempt() {
        let (range, ifRange) = state.beginAttempt()
        attemptNumber += 1
        attemptActive = true
        answered = false
        keepAlive = false
        answerEnded = false
        paused = false
        pending.removeAll()
        windowBytes = 0
        windowStart = source.configuration.clock.monotonic
        loopState.watch(self)
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.pathAndQuery,
                                   headers: source.requestHeaders(for: state.request, target: target, range: range, ifRange: ifRange))
        if !state.wantsFreshConnection, let kept = loopState.take(node: target.node) {
            reused = true
            send(head, on: kept)
            return
        }
        reused = false
        let number = attemptNumber
        source.connect(to: target, on: loop).whenComplete { [self] result in
            switch result {
            case let .success(connection):
                guard number == attemptNumber, attemptActive, !finished else {
                    connection.channel.close(promise: nil)
                    return
                }
                if let reason = source.configuration.addressPolicy.refusal(
                    connectingTo: connection.channel.remoteAddress?.ipAddress.flatMap { IPAddress($0) }, host: target.host) {
                    connection.channel.close(promise: nil)
                    attemptActive = false
                    loopState.unwatch(self)
                    return finish(.refusedAddress(url: state.request.url, reason: reason))
                }
                send(head, on: connection)
            case let .failure(error):
                guard number == attemptNumber, attemptActive, !finished else { return }
                endAttempt(.failed(message: "cannot connect to \(target.node): \(error)", retryable: true))
            }
        }
    }

    private func send(_ head: HTTPRequestHead, on connection: NodeConnection) {
        self.connection = connection
        connection.handler.value.owner = self
        connection.channel.write(HTTPClientRequestPart.head(head), promise: nil)
        connection.channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        connection.channel.read()
    }

    // MARK: The answer (from the connection's handler)

    func received(_ part: HTTPClientResponsePart) {
        guard attemptActive else { return }
        answered = true
        switch part {
        case let .head(head):
            let status = Int(head.status.code)
            if (100..<200).contains(status) { return }
            keepAlive = head.isKeepAlive
            let block = ResponseHeaderBlock(status: status, fields: head.headers.map { ($0.name.lowercased(), $0.value) },
                                            complete: true)
            switch state.receiveHead(block, finalURL: state.request.url) {
            case let .deliver(first):
                if !sink.fetchDidReceiveHead(first) {
                    state.sinkCancelled()
                    dropAnswer()
                }
            case .proceed:
                break
            case .abort, .redirect:   // (no redirect is followed: `.never`)
                dropAnswer()
            }
        case let .body(bytes):
            windowBytes += bytes.readableBytes
            if paused || !pending.isEmpty {
                pending.append(bytes)
            } else {
                _ = deliver(bytes)
            }
        case .end:
            answerEnded = true
            if !paused && pending.isEmpty { answerComplete() }
        }
    }

    /// A read batch ended: the sink writes what it gathered; the next read is asked for unless
    /// the sink is full or the answer is in.
    func readComplete() {
        drain()
        if attemptActive, !paused, !answerEnded { connection?.channel.read() }
    }

    /// The connection broke or closed (its handler already let go of this transfer).
    func connectionLost(_ message: String) {
        guard attemptActive, connection != nil else { return }
        connection = nil
        if answerEnded {
            // Every byte is in hand (`pending` may still hold some for a paused sink).
            keepAlive = false
            if !paused && pending.isEmpty { answerComplete() }
            return
        }
        pending.removeAll()
        paused = false
        drain()
        endAttempt(reused && !answered ? .staleConnection(message: message) : .failed(message: message, retryable: true))
    }

    /// Offers one body part to the sink; false when the transfer stops taking (paused, or the
    /// attempt ended).
    private func deliver(_ bytes: ByteBuffer) -> Bool {
        if state.abort != nil { return true }   // the rest of an answer already complete: dropped
        let before = state
        let (offset, length) = bytes.withUnsafeReadableBytes { state.receiveBody($0) }
        if length > 0 {
            let flow = bytes.withUnsafeReadableBytes { all in
                sink.fetchOffer(UnsafeRawBufferPointer(rebasing: all[offset..<(offset + length)]))
            }
            switch flow {
            case .proceed:
                tookBytes = true
            case .pause:
                state = before   // the same bytes are offered again on resume
                pending.prepend(bytes)
                paused = true
                return false
            case .stop:
                state.sinkCancelled()
            }
        }
        if state.abort != nil && !state.attemptBodyComplete {
            // More of this answer is on its way and none of it is wanted: the connection goes.
            dropAnswer()
            return false
        }
        return true
    }

    /// The whole answer was read and handed over: the connection is kept for the next request.
    private func answerComplete() {
        guard attemptActive else { return }
        if let connection {
            self.connection = nil
            connection.handler.value.owner = nil
            if keepAlive && connection.channel.isActive {
                loopState.put(connection, node: target.node)
            } else {
                connection.channel.close(promise: nil)
            }
        }
        drain()
        endAttempt(.ok)
    }

    /// This answer is refused, or no more of it is wanted: its connection is closed (the rest
    /// of the body is still in it) and the attempt ends on the reason `state` holds.
    private func dropAnswer() {
        closeConnection()
        pending.removeAll()
        paused = false
        drain()
        endAttempt(.failed(message: "the answer was not taken", retryable: false))
    }

    private func closeConnection() {
        guard let connection else { return }
        self.connection = nil
        connection.handler.value.owner = nil
        connection.channel.close(promise: nil)
    }

    private func drain() {
        if tookBytes {
            tookBytes = false
            sink.fetchDidDrain()
        }
    }

    private func endAttempt(_ result: TransferState.AttemptResult) {
        guard attemptActive else { return }
        attemptActive = false
        loopState.unwatch(self)
        switch state.attemptEnded(result) {
        case let .finish(error):
            if let detail = state.changeDetail, case .remoteChanged = error {
                source.logger.info("tier node's file changed during transfer", metadata: [
                    "url": "\(DisplayURL.redacted(state.request.url))", "why": "\(detail)",
                ])
            }
            finish(error)
        case let .redirect(url):   // never with `.never`: a node's answer, refused
            finish(.invalidResponse(url: url, message: "a tier node redirected"))
        case let .retry(after):
            if cancelled { return finish(.cancelled) }
            source.logger.debug("retrying tier transfer", metadata: [
                "url": "\(state.request.url)", "after": "\(after)s", "cause": "\(result)",
            ])
            retryTask = loop.scheduleTask(in: .nanoseconds(Int64(max(0, after) * 1e9))) { [self] in
                retryTask = nil
                if cancelled { finish(.cancelled) } else if !finished { startAttempt() }
            }
        }
    }

    private func finish(_ error: FetchError?) {
        guard !finished else { return }
        finished = true
        attemptActive = false
        loopState.unwatch(self)
        retryTask?.cancel()
        retryTask = nil
        closeConnection()
        pending.removeAll()
        releaseSlot()
        source.forget(id)
        sink.fetchDidFinish(error)
    }

    func cancelOnLoop() {
        guard !finished else { return }
        cancelled = true
        if waitingForSlot && slots.withdraw(id: id) { waitingForSlot = false }
        if waitingForSlot { return }   // the slot is on its way: `slotGranted` finishes
        finish(.cancelled)
    }

    private func resumeOnLoop() {
        guard paused, attemptActive else { return }
        paused = false
        while let bytes = pending.popFirst() {
            if !deliver(bytes) { break }
        }
        drain()
        guard attemptActive, !paused else { return }
        if answerEnded {
            answerComplete()
        } else {
            connection?.channel.read()
        }
    }

    // MARK: Stalls

    /// Called each second by the loop's ticker while an attempt is in progress. A node slower
    /// than `lowSpeedLimit` over `lowSpeedTime` (with the sink not holding it back) times out, as
    /// libcurl's low-speed limit does: a node that accepted the request and never answers too.
    func stallCheck() {
        guard attemptActive else { return loopState.unwatch(self) }
        let now = source.configuration.clock.monotonic
        let seconds = max(1, source.configuration.lowSpeedTime.rounded(.up))
        if paused {
            windowStart = now
            windowBytes = 0
            return
        }
        guard now - windowStart >= .seconds(seconds) else { return }
        let floor = Int(Double(max(1, source.configuration.lowSpeedLimit)) * seconds)
        if windowBytes >= floor {
            windowStart = now
            windowBytes = 0
            return
        }
        closeConnection()
        pending.removeAll()
        drain()
        endAttempt(.timedOut)
    }
}

/// Where a node request goes: a node base URL (`http://host:port`) and the origin's path and
/// query (`TierSpec.nodePath`), as `TierTransfer` joins them.
struct NodeTarget: Sendable, Equatable {
    /// `http://host:port`, the pool's key.
    let node: String
    /// The host to connect to (brackets of an IPv6 literal removed).
    let host: String
    let port: Int
    /// The `Host` header: the URL's authority as written.
    let authority: String
    let pathAndQuery: String
}

extension NodeTarget {
    /// Nil for anything but a plain `http://` URL with a host.
    init?(url: String) {
        guard url.count > 7, url.prefix(7).lowercased() == "http://" else { return nil }
        let rest = url.dropFirst(7)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = String(rest[..<authorityEnd])
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        var host = authority
        var port = 80
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { return nil }
                port = p
            } else if !after.isEmpty {
                return nil
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
        }
        guard !host.isEmpty else { return nil }
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        self.init(node: "http://" + authority, host: host, port: port, authority: authority, pathAndQuery: path)
    }
}
