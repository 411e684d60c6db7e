import NIOHTTP1

/// The life of one proxy connection, as a pure state machine: each event returns what to do.
///
/// A connection waits for a request head (`idle`, under the head deadline), works on one request
/// at a time (`preparing` while the cache opens the entry, `streaming` while the response goes
/// out; requests are serialised by NIO's pipelining handler in front), then either waits for the
/// next head or closes. Completions that arrive for a request that is no longer current (the
/// client went away, or a timeout closed the connection) are recognised by their request id and
/// dropped. No channel, no clock: tested with plain values.
struct ProxyConnectionState {
    enum State: Equatable {
        case idle
        case preparing(request: Int)
        case streaming(request: Int)
        case closed
    }

    /// What the request head said about how to answer.
    struct Request: Equatable {
        var id: Int
        var version: HTTPVersion
        var keepAlive: Bool
        var isHead: Bool
    }

    private(set) var state: State = .idle
    private(set) var request = Request(id: 0, version: .http1_1, keepAlive: true, isHead: false)

    enum Action: Equatable {
        case none
        /// Close the connection now.
        case close
        /// The response ended and the connection stays: wait for the next head (arm its deadline).
        case awaitNextHead
        /// Go on with this event's work (answer the request, start its response).
        case proceed
    }

    /// A request head arrived: it becomes the current request.
    mutating func requestHead(version: HTTPVersion, keepAlive: Bool, isHead: Bool) -> Request {
        request = Request(id: request.id + 1, version: version, keepAlive: keepAlive, isHead: isHead)
        state = .preparing(request: request.id)
        return request
    }

    /// The answer must end the connection (a malformed or oversized request, a body delimited by
    /// the close on HTTP/1.0).
    mutating func closeAfterResponse() { request.keepAlive = false }

    /// The cache prepared request `id`'s response: proceed only if it is still the current one.
    mutating func prepared(request id: Int) -> Action {
        guard state == .preparing(request: id) else { return .none }
        state = .streaming(request: id)
        return .proceed
    }

    /// Request `id`'s stream ended (or failed before its head, and an error response goes out instead).
    func streamEnded(request id: Int) -> Action {
        state == .streaming(request: id) ? .proceed : .none
    }

    /// The current response went out whole.
    mutating func responseFinished() -> Action {
        guard state != .closed else { return .none }
        if request.keepAlive {
            state = .idle
            return .awaitNextHead
        }
        state = .closed
        return .close
    }

    /// Part of the response went out and the rest cannot follow: the client must see a short body.
    mutating func responseAborted() -> Action {
        state = .closed
        return .close
    }

    /// No request head within the deadline, or no bytes read for the idle timeout while idle.
    mutating func idleTimeout() -> Action {
        guard state == .idle else { return .none }
        state = .closed
        return .close
    }

    /// The client stopped reading while a response waits for the socket to drain.
    mutating func writeTimeout(waitingForWritable: Bool) -> Action {
        guard case .streaming = state, waitingForWritable else { return .none }
        state = .closed
        return .close
    }

    /// The channel closed: whatever was under way is dropped.
    mutating func channelClosed() {
        state = .closed
    }

    var isBusy: Bool {
        switch state {
        case .preparing, .streaming: return true
        case .idle, .closed: return false
        }
    }
}
