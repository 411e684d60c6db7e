import CacheCore
import Foundation

/// One engine fetch served through a cache tier, piece by piece (a piece ends at a slice
/// boundary), each piece from its home node, the next nodes, or the origin.
///
/// Design: a small state (next byte `position`, the attempt in flight, the nodes tried for the
/// current piece) in one `LockedValue`; attempts run one after another on the tier's or the origin's
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
///
/// A version known only by its Last-Modified (no strong ETag, or ETags ignored) cannot show, in a
/// head, a file replaced within the same second: an attempt that goes on where another stopped
/// (a node that died mid-piece, the origin after a node) could splice two versions. So for such a
/// version every attempt after the first byte also asks for the last bytes passed on
/// (`ResumeOverlap`: up to 4 KiB; to a node, only those of the same slice, so that the node is
/// not made to fetch the slice before), and compares them before passing anything on. Other
/// bytes from a node refuse that node; from the origin, they end the fetch with `.remoteChanged`.
/// A piece that starts a slice on a node therefore compares nothing (its node is keyed by the
/// same validator, and blind in the same way).
final class TierTransfer: FetchHandle, Sendable {
    let request: FetchRequest
    let sink: FetchSink
    let version: TierVersion
    let key: String
    let router: TierRouter
    let source: TierRangeSource
    let end: Int64
    /// The request's path and query for a node (`TierSpec.nodePath`), and the two headers every
    /// node request carries: the same for every piece, so made once (percent-encoding the key
    /// and formatting the version per piece showed in a proxied miss's profile).
    private let nodePath: String?
    private let nodeHeaders: [String]
    /// The version shows only in its bytes (see above): attempts after the first byte compare.
    private let checksSplices: Bool

    /// What changes as the attempts go by; each lock region reads and writes several fields at once.
    private struct State {
        /// The next byte to pass on to the outer sink.
        var position: Int64
        var headSent = false
        var cancelled = false
        var done = false
        /// Number of the attempt in flight; a callback tagged with another is late and ignored.
        var attempt = 0
        var current: FetchHandle?
        /// Node of the attempt in flight; nil: the origin.
        var currentNode: String?
        var pieceEnd: Int64 = 0
        /// Nodes tried for the piece that starts at `triedPiece`.
        var tried: Set<String> = []
        var triedPiece: Int64 = -1
        /// Why the attempt in flight was refused by this transfer (its head), if it was.
        var refusal: String?
        var priority: (FetchPriority, Double)?
        /// A resume came while no attempt's handle was stored: the next one gets it.
        var resumeOnSet = false
        /// The last bytes passed on, and what the attempt in flight must start with.
        var overlap = ResumeOverlap()
        /// Bytes before `position` the attempt in flight asked again, to compare.
        var askedAgain: Int64 = 0
    }

    private let state: LockedValue<State>

    init(request: FetchRequest, sink: FetchSink, version: TierVersion, key: String,
         router: TierRouter, source: TierRangeSource) {
        self.request = request
        self.sink = sink
        self.version = version
        self.key = key
        self.router = router
        self.source = source
        end = version.end(of: request)
        nodePath = TierSpec.nodePath(for: request.url)
        nodeHeaders = ["\(TierRangeSource.versionHeader): \(version.headerValue)",
                       "\(TierRangeSource.keyHeader): \(Self.headerSafe(key))"]
        checksSplices = !version.validator.hasPrefix("\"") || version.ignoreETag
        state = LockedValue(State(position: request.start))
    }

    // MARK: FetchHandle

    func cancel() {
        let handle: FetchHandle? = state.withLock { s in
            s.cancelled = true
            return s.current
        }
        handle?.cancel()
    }

    /// Passed to the attempt in flight. An attempt's first bytes can arrive, and pause it, before
    /// its handle is stored here (its source may run it on another thread at once), and the
    /// sink's resume can come just as early: it is then kept for that handle, never dropped (a
    /// dropped one left its piece paused for good; a spare one does nothing).
    func resume() {
        let handle: FetchHandle? = state.withLock { s in
            if s.current == nil { s.resumeOnSet = true }
            return s.current
        }
        handle?.resume()
    }

    func setPriority(_ priority: FetchPriority, waitedSeconds: Double) {
        let handle: FetchHandle? = state.withLock { s in
            s.priority = (priority, waitedSeconds)
            return s.current
        }
        handle?.setPriority(priority, waitedSeconds: waitedSeconds)
    }

    // MARK: Attempts

    /// Starts the next attempt, or ends the transfer. Called with no attempt in flight.
    func next() {
        enum Step { case finish(FetchError?), start(FetchRequest, node: String?, id: Int) }
        let step: Step = state.withLock { s in
            if s.done { return .finish(nil) }
            if s.cancelled { return .finish(.cancelled) }
            if s.position >= end { return .finish(nil) }
            let piece = router.piece(at: s.position, end: end)
            if piece.index != s.triedPiece {
                s.triedPiece = piece.index
                s.tried = []
            }
            s.pieceEnd = piece.end
            s.attempt += 1
            s.refusal = nil
            s.current = nil
            let order = router.order(key: key, slice: piece.index).map { router.nodes[$0] }
            let node = order.first(where: { !s.tried.contains($0) && source.state.isAvailable($0) })
            // To a node, only bytes of the same slice are asked again.
            let sliceStart = piece.index * router.sliceSize
            let limit = s.position > request.start && checksSplices
                ? Int(min(Int64(ResumeOverlap.length), s.position - (node == nil || nodePath == nil ? request.start : max(request.start, sliceStart))))
                : 0
            s.overlap.beginFresh()
            s.askedAgain = limit > 0 ? Int64(s.overlap.beginResume(limit: limit)) : 0
            let from = piece.start - s.askedAgain
            if let node, let path = nodePath {
                s.tried.insert(node)
                s.currentNode = node
                var r = FetchRequest(url: node + path, start: from, end: piece.end, requireRange: true,
                                     priority: s.priority?.0 ?? request.priority, owner: request.owner)
                r.sendsIfRange = false   // nginx's slice module would start at slice 0 (see FetchRequest)
                r.headers = nodeHeaders
                return .start(r, node: node, id: s.attempt)
            }
            s.currentNode = nil
            var r = FetchRequest(url: request.url, start: from, end: piece.end, ifRange: version.validator,
                                 requireRange: true, priority: s.priority?.0 ?? request.priority, owner: request.owner)
            r.ignoreETag = request.ignoreETag
            r.expectedLength = version.length
            r.expectedLastModified = request.expectedLastModified
            r.cacheKey = request.cacheKey
            return .start(r, node: nil, id: s.attempt)
        }
        switch step {
        case let .finish(error):
            finish(error)
        case let .start(r, node, id):
            let piece = PieceSink(transfer: self, attempt: id, node: node)
            let handle = (node == nil ? source.origin : source.tier).start(r, sink: piece)
            let (cancelNow, prio, resumeNow): (Bool, (FetchPriority, Double)?, Bool) = state.withLock { s in
                guard s.attempt == id else { return (false, nil, false) }
                s.current = handle
                defer { s.resumeOnSet = false }
                return (s.cancelled, s.priority, s.resumeOnSet)
            }
            if cancelNow { handle.cancel() }
            if resumeNow { handle.resume() }
            if let prio, prio.0 != r.priority { handle.setPriority(prio.0, waitedSeconds: prio.1) }
        }
    }

    private func finish(_ error: FetchError?) {
        let first: Bool = state.withLock { s in
            if s.done { return false }
            s.done = true
            s.current = nil
            return true
        }
        if first { sink.fetchDidFinish(error) }
    }

    /// A key as one header line (no line breaks; non-ASCII percent-encoded). A key that is all
    /// visible ASCII (nearly every URL) is returned as it is, checked byte by byte: Foundation's
    /// percent-encoding with a new character set per call showed in a proxied miss's profile.
    static func headerSafe(_ text: String) -> String {
        if text.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) { return text }
        return text.addingPercentEncoding(withAllowedCharacters: .init(charactersIn: Unicode.Scalar(0x21)...Unicode.Scalar(0x7e))) ?? text
    }

    /// Whether a callback of attempt `id` still speaks for this transfer.
    private func isCurrent(_ id: Int) -> Bool { state.withLock { id == $0.attempt && !$0.done } }

    // MARK: From the attempt's sink (its source's thread)

    fileprivate func attemptHead(_ head: ResponseHead, attempt id: Int) -> Bool {
        enum Verdict { case refuse, pass(ResponseHead), accept }
        let verdict: Verdict = state.withLock { s in
            guard id == s.attempt, !s.cancelled else { return .refuse }
            if let why = version.mismatch(head, offset: s.position - s.askedAgain) {
                s.refusal = why
                return .refuse
            }
            if s.headSent { return .accept }
            s.headSent = true
            var outer = head
            outer.status = request.rangeHeader == nil ? 200 : 206
            outer.finalURL = request.url
            outer.bodyStart = request.start
            outer.totalLength = version.length
            outer.acceptsRanges = true
            outer.rangeAnswers = nil   // a node's, not the origin's (`RangeReliability` is per origin)
            return .pass(outer)
        }
        switch verdict {
        case .refuse: return false
        case .accept: return true
        case let .pass(outer):
            let wanted = sink.fetchDidReceiveHead(outer)
            if !wanted { state.withLock { $0.cancelled = true } }
            return wanted
        }
    }

    /// How many of an attempt's next `bytes` are ones asked again (compared equal, not passed on),
    /// or nil when they differ (the attempt is refused) or the attempt is no longer current.
    /// Nothing is recorded: the caller commits once the rest was taken (`taken`).
    private func compared(_ bytes: UnsafeRawBufferPointer, attempt id: Int) -> Int? {
        state.withLock { s in
            guard id == s.attempt, !s.done else { return nil }
            guard s.overlap.pending > 0 else { return 0 }
            var overlap = s.overlap
            guard let n = overlap.compare(bytes) else {
                s.refusal = "the \(s.askedAgain) bytes before byte \(s.position) differ from the ones passed on"
                return nil
            }
            return n
        }
    }

    /// An attempt's `bytes` were taken: the first `skipped` (compared) are done with, the rest
    /// were passed on.
    private func taken(_ bytes: UnsafeRawBufferPointer, skipped: Int) {
        state.withLock { s in
            if skipped > 0 { _ = s.overlap.compare(UnsafeRawBufferPointer(rebasing: bytes[..<skipped])) }
            let rest = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
            if checksSplices { s.overlap.keep(rest) }
            s.position += Int64(rest.count)
        }
    }

    fileprivate func attemptOffer(_ bytes: UnsafeRawBufferPointer, attempt id: Int, node: String?) -> FetchFlow {
        guard let skipped = compared(bytes, attempt: id) else { return .stop }
        let rest = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
        let flow: FetchFlow = rest.isEmpty ? .proceed : sink.fetchOffer(rest)
        switch flow {
        case .proceed:
            taken(bytes, skipped: skipped)
            source.state.delivered(bytes.count, node: node, key: key)
        case .stop:
            // The reader's sink wants no more: the transfer ends here, on no other node. The
            // bytes came from this node all the same (a fetch's last ones are taken with `.stop`).
            state.withLock { $0.cancelled = true }
            source.state.delivered(bytes.count, node: node, key: key)
        case .pause:
            break
        }
        return flow
    }

    fileprivate func attemptReceive(_ bytes: UnsafeRawBufferPointer, attempt id: Int, node: String?) -> Bool {
        guard let skipped = compared(bytes, attempt: id) else { return false }
        let rest = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
        guard rest.isEmpty || sink.fetchDidReceive(rest) else {
            state.withLock { $0.cancelled = true }
            return false
        }
        taken(bytes, skipped: skipped)
        source.state.delivered(bytes.count, node: node, key: key)
        return true
    }

    fileprivate func attemptDrain(attempt id: Int) {
        guard isCurrent(id) else { return }
        sink.fetchDidDrain()
    }

    fileprivate func attemptFinished(_ error: FetchError?, attempt id: Int, node: String?) {
        enum After { case next(failure: String?), finish(FetchError?), ignore }
        let after: After = state.withLock { s in
            guard id == s.attempt, !s.done else { return .ignore }
            s.current = nil
            if s.cancelled { return .finish(.cancelled) }
            let complete = error == nil && s.position >= s.pieceEnd
            if complete { return .next(failure: s.refusal) }
            if node == nil {
                // The origin itself: its answer to this version is final.
                if let refusal = s.refusal { return .finish(.remoteChanged(url: request.url + " (\(refusal))")) }
                return .finish(error ?? .invalidResponse(url: request.url, message: "short body"))
            }
            // A node's attempt that ended early: why, for its back-off (read in the same region).
            return .next(failure: s.refusal ?? error?.description ?? "short body")
        }
        switch after {
        case .ignore:
            return
        case let .finish(e):
            finish(e)
        case let .next(why):
            if let node {
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
