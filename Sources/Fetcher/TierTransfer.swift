import CacheCore
import Foundation

/// One engine fetch served through a cache tier, piece by piece (a piece ends at a slice
/// boundary), each piece from its home node, the next nodes, or the origin.
///
/// Design: a small state (next byte `position`, the attempt in flight, the nodes tried for the
/// current piece) under one lock; attempts run one after another on the tier's or the origin's
/// source thread, so the outer sink sees one head, one continuous body and one end, in order, as
/// `RangeSource` promises. The outer sink is never called with the lock held (it may cancel or
/// resume from inside a callback).
///
/// Every answer is checked (`TierVersion.mismatch`) before any of its bytes are passed on: a node
/// with another version, a wrong Content-Range or a wrong length is refused, put in back-off,
/// and the piece goes on from the same byte elsewhere. Bytes already passed on were this
/// version's, so a switch mid-piece mixes nothing. If even the origin's answer is another
/// version, the fetch ends with `.remoteChanged` (the engine re-probes at the next open), as a
/// direct fetch would.
// @unchecked: the state below is read and written with `lock` held, and the sink is called
// outside it. Left on an `NSLock` for now: its dozen lock regions each read and write several of
// these fields, and moving them into one `LockedValue` is a change of its own (issue 20).
final class TierTransfer: FetchHandle, @unchecked Sendable {
    let request: FetchRequest
    let sink: FetchSink
    let version: TierVersion
    let key: String
    let spec: TierSpec
    let router: TierRouter
    let source: TierRangeSource
    let end: Int64

    private let lock = NSLock()
    // Protected by `lock`.
    private var position: Int64
    private var headSent = false
    private var cancelled = false
    private var done = false
    private var attempt = 0
    private var current: FetchHandle?
    /// Node of the attempt in flight; nil: the origin.
    private var currentNode: String?
    private var pieceEnd: Int64 = 0
    /// Nodes tried for the piece that starts at `triedFor`.
    private var tried: Set<String> = []
    private var triedPiece: Int64 = -1
    /// Why the attempt in flight was refused by this transfer (its head), if it was.
    private var refusal: String?
    private var priority: (FetchPriority, Double)?

    init(request: FetchRequest, sink: FetchSink, version: TierVersion, key: String, spec: TierSpec,
         router: TierRouter, source: TierRangeSource) {
        self.request = request
        self.sink = sink
        self.version = version
        self.key = key
        self.spec = spec
        self.router = router
        self.source = source
        end = version.end(of: request)
        position = request.start
    }

    // MARK: FetchHandle

    func cancel() {
        let handle: FetchHandle? = lock.withLock {
            cancelled = true
            return current
        }
        handle?.cancel()
    }

    func resume() { lock.withLock { current }?.resume() }

    func setPriority(_ priority: FetchPriority, waitedSeconds: Double) {
        let handle: FetchHandle? = lock.withLock {
            self.priority = (priority, waitedSeconds)
            return current
        }
        handle?.setPriority(priority, waitedSeconds: waitedSeconds)
    }

    // MARK: Attempts

    /// Starts the next attempt, or ends the transfer. Called with no attempt in flight.
    func next() {
        enum Step { case finish(FetchError?), start(FetchRequest, node: String?, id: Int) }
        let step: Step = lock.withLock {
            if done { return .finish(nil) }
            if cancelled { return .finish(.cancelled) }
            if position >= end { return .finish(nil) }
            let piece = router.piece(at: position, end: end)
            if piece.index != triedPiece {
                triedPiece = piece.index
                tried = []
            }
            pieceEnd = piece.end
            attempt += 1
            refusal = nil
            current = nil
            let order = router.order(key: key, slice: piece.index).map { router.nodes[$0] }
            if let node = order.first(where: { !tried.contains($0) && source.state.isAvailable($0) }),
               let url = spec.nodeURL(node, for: request.url) {
                tried.insert(node)
                currentNode = node
                var r = FetchRequest(url: url, start: piece.start, end: piece.end, requireRange: true,
                                     priority: priority?.0 ?? request.priority, owner: request.owner)
                r.sendsIfRange = false   // nginx's slice module would start at slice 0 (see FetchRequest)
                r.headers = ["\(TierRangeSource.versionHeader): \(version.headerValue)",
                             "\(TierRangeSource.keyHeader): \(Self.headerSafe(key))"]
                return .start(r, node: node, id: attempt)
            }
            currentNode = nil
            var r = FetchRequest(url: request.url, start: piece.start, end: piece.end, ifRange: version.validator,
                                 requireRange: true, priority: priority?.0 ?? request.priority, owner: request.owner)
            r.ignoreETag = request.ignoreETag
            r.expectedLength = version.length
            r.expectedLastModified = request.expectedLastModified
            r.cacheKey = request.cacheKey
            return .start(r, node: nil, id: attempt)
        }
        switch step {
        case let .finish(error):
            finish(error)
        case let .start(r, node, id):
            let piece = PieceSink(transfer: self, attempt: id, node: node)
            let handle = (node == nil ? source.origin : source.tier).start(r, sink: piece)
            let (cancelNow, prio): (Bool, (FetchPriority, Double)?) = lock.withLock {
                guard attempt == id else { return (false, nil) }
                current = handle
                return (cancelled, priority)
            }
            if cancelNow { handle.cancel() }
            if let prio, prio.0 != r.priority { handle.setPriority(prio.0, waitedSeconds: prio.1) }
        }
    }

    private func finish(_ error: FetchError?) {
        let first: Bool = lock.withLock {
            if done { return false }
            done = true
            current = nil
            return true
        }
        if first { sink.fetchDidFinish(error) }
    }

    /// A key as one header line (no line breaks; non-ASCII percent-encoded).
    static func headerSafe(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .init(charactersIn: Unicode.Scalar(0x21)...Unicode.Scalar(0x7e))) ?? text
    }

    // MARK: From the attempt's sink (its source's thread)

    fileprivate func attemptHead(_ head: ResponseHead, attempt id: Int) -> Bool {
        enum Verdict { case refuse, pass(ResponseHead), accept }
        let verdict: Verdict = lock.withLock {
            guard id == attempt, !cancelled else { return .refuse }
            if let why = version.mismatch(head, offset: position) {
                refusal = why
                return .refuse
            }
            if headSent { return .accept }
            headSent = true
            var outer = head
            outer.status = request.rangeHeader == nil ? 200 : 206
            outer.finalURL = request.url
            outer.bodyStart = request.start
            outer.totalLength = version.length
            outer.acceptsRanges = true
            return .pass(outer)
        }
        switch verdict {
        case .refuse: return false
        case .accept: return true
        case let .pass(outer):
            let wanted = sink.fetchDidReceiveHead(outer)
            if !wanted { lock.withLock { cancelled = true } }
            return wanted
        }
    }

    fileprivate func attemptOffer(_ bytes: UnsafeRawBufferPointer, attempt id: Int, node: String?) -> FetchFlow {
        guard lock.withLock({ id == attempt && !done }) else { return .stop }
        let flow = sink.fetchOffer(bytes)
        switch flow {
        case .proceed:
            lock.withLock { position += Int64(bytes.count) }
            source.state.delivered(bytes.count, node: node, key: key)
        case .stop:
            // The reader's sink wants no more: the transfer ends here, on no other node.
            lock.withLock { cancelled = true }
        case .pause:
            break
        }
        return flow
    }

    fileprivate func attemptReceive(_ bytes: UnsafeRawBufferPointer, attempt id: Int, node: String?) -> Bool {
        guard lock.withLock({ id == attempt && !done }) else { return false }
        guard sink.fetchDidReceive(bytes) else {
            lock.withLock { cancelled = true }
            return false
        }
        lock.withLock { position += Int64(bytes.count) }
        source.state.delivered(bytes.count, node: node, key: key)
        return true
    }

    fileprivate func attemptDrain(attempt id: Int) {
        guard lock.withLock({ id == attempt && !done }) else { return }
        sink.fetchDidDrain()
    }

    fileprivate func attemptFinished(_ error: FetchError?, attempt id: Int, node: String?) {
        enum After { case next, finish(FetchError?), ignore }
        let after: After = lock.withLock {
            guard id == attempt, !done else { return .ignore }
            current = nil
            if cancelled { return .finish(.cancelled) }
            let complete = error == nil && position >= pieceEnd
            if complete { return .next }
            if node == nil {
                // The origin itself: its answer to this version is final.
                if let refusal { return .finish(.remoteChanged(url: request.url + " (\(refusal))")) }
                return .finish(error ?? .invalidResponse(url: request.url, message: "short body"))
            }
            return .next
        }
        switch after {
        case .ignore:
            return
        case let .finish(e):
            finish(e)
        case .next:
            if let node {
                let why: String? = lock.withLock {
                    if let refusal { return refusal }
                    if let error { return error.description }
                    return position >= pieceEnd ? nil : "short body"
                }
                if let why {
                    source.state.failed(node, error: why)
                    source.logger?.notice("tier node failed; its slices go to the next node or the origin",
                                          metadata: ["node": "\(node)", "url": "\(request.url)", "error": "\(why)"])
                } else {
                    source.state.succeeded(node)
                }
            }
            next()
        }
    }
}

/// The sink of one attempt: forwards to its transfer, tagged with the attempt, so a late
/// callback of an attempt that was replaced does nothing.
private final class PieceSink: FetchSink, Sendable {
    let transfer: TierTransfer
    let attempt: Int
    let node: String?

    init(transfer: TierTransfer, attempt: Int, node: String?) {
        self.transfer = transfer
        self.attempt = attempt
        self.node = node
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool { transfer.attemptHead(head, attempt: attempt) }
    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        transfer.attemptReceive(bytes, attempt: attempt, node: node)
    }
    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow { transfer.attemptOffer(bytes, attempt: attempt, node: node) }
    func fetchDidDrain() { transfer.attemptDrain(attempt: attempt) }
    func fetchDidFinish(_ error: FetchError?) { transfer.attemptFinished(error, attempt: attempt, node: node) }
}
