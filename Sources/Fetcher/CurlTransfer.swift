import CacheCore
import CCurl
import Foundation

/// One logical fetch: its `TransferState`, its sink, and the curl resources of the attempt in
/// progress. Lives on the multi loop's thread; only `id` is touched elsewhere.
///
/// The C callbacks (see CurlCallbacks.swift) find this object through CURLOPT_WRITEDATA /
/// HEADERDATA, unretained: the loop's table keeps it alive while an easy handle points at it.
final class CurlTransfer {
    let id: Int
    let sink: FetchSink
    var state: TransferState
    /// Easy handle of the attempt in progress.
    var easy: UnsafeMutableRawPointer?
    /// Request headers of the attempt in progress (freed when it ends).
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var parser = ResponseHeaderParser()
    /// CURLOPT_ERRORBUFFER: curl's detailed message for the last failure.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// When the next attempt is due (the fetcher's monotonic clock), while waiting to retry.
    var retryAt: MonotonicInstant?
    /// Bytes went to the sink since the loop's last turn: it is told the turn ended (`fetchDidDrain`).
    var tookBytes = false
    let addressPolicy: AddressPolicy
    /// Why the address policy refused a connection or request of the current attempt.
    private var refusal: String?
    /// The last address curl wanted to connect to was refused (none allowed since).
    private var refusedLastAddress = false
    /// The policy stopped a request before it was sent: the attempt ends on that.
    private var refusedRequest = false

    /// The loop's bandwidth limit (`--bwlimit`), if any.
    let throttle: Throttle?
    /// Whose monotonic clock the throttle's tokens are counted by (the fetcher's).
    let clock: EngineClock
    /// Its class now (the bandwidth limit serves the higher ones first), and whether the
    /// scheduler holds it (its receiving is paused until it lets go).
    var priority: FetchPriority
    var held = false
    /// `scheme://host:port`: transfers to one origin share a path.
    let origin: String
    /// The loop's record of answers to required ranges by origin (loop thread only).
    let rangeAnswers: OriginRangeAnswers?

    /// The current hop carries the user's credentials (set by `beginAttempt`).
    private(set) var sendsCredentials = false
    /// The current hop goes to the S3 endpoint (set by `beginAttempt`): an error answer's body
    /// is its error document, read (`errorDocument`) rather than dropped with the connection.
    private var toS3 = false
    /// The body of an S3 error answer while it arrives (at most `S3ErrorDocument.maxBytes`).
    private(set) var errorDocument: [UInt8]?
    /// The `Date` of that answer: the server's clock, for `RequestTimeTooSkewed`.
    private(set) var errorDate: Date?

    init(id: Int, request: FetchRequest, sink: FetchSink, policy: RetryPolicy, redirects: RedirectRules,
         addressPolicy: AddressPolicy, throttle: Throttle?, clock: EngineClock, rangeAnswers: OriginRangeAnswers? = nil) {
        self.id = id
        self.clock = clock
        self.rangeAnswers = rangeAnswers
        self.throttle = throttle
        self.sink = sink
        self.addressPolicy = addressPolicy
        self.state = TransferState(request: request, policy: policy, redirects: redirects)
        priority = request.priority
        origin = TransferScheduler.origin(of: request.url)
        errorBuffer = .allocate(capacity: ccurl_error_size)
        errorBuffer.initialize(repeating: 0, count: ccurl_error_size)
    }

    deinit {
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    /// Prepares `easy` for the next attempt, or the next hop of a redirect, and sets its headers.
    ///
    /// The user's credentials (`--user`, every `--header`) go only to a credential origin
    /// (`OriginAccess.scope`), and on a redirect only to a hop at the request's own origin. Our
    /// own headers (`Accept-Encoding`, the request's, `Via`, `Range`, `If-Range`) go on every hop.
    func beginAttempt(on easy: UnsafeMutableRawPointer, configuration: FetcherConfiguration,
                      pinned: UnsafeMutablePointer<curl_slist>?) {
        state.rangesServedLately = state.request.requireRange && (rangeAnswers?.servedLately(origin: origin) ?? false)
        state.validatesWithIfMatch = configuration.goesToS3(state.request.url)
        let (range, ifRange) = state.beginAttempt()
        parser = ResponseHeaderParser()
        errorBuffer[0] = 0
        refusal = nil
        refusedLastAddress = false
        refusedRequest = false
        sendsCredentials = configuration.hasScopedCredentials && state.atRequestOrigin
            && configuration.access.scope.covers(state.request.url)
        let userHeaders = sendsCredentials ? configuration.extraHeaders : []
        var list: UnsafeMutablePointer<curl_slist>?
        // The cache keeps the file's own bytes: without this, an origin may compress on the fly
        // (no Accept-Encoding means any coding is acceptable), and ranges of a compressed body
        // are not the file's. A user's --header may still ask for another.
        let askedEncoding = userHeaders.contains {
            $0.split(separator: ":", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces).lowercased() == "accept-encoding"
        }
        if !askedEncoding { list = curl_slist_append(list, "Accept-Encoding: identity") }
        for header in userHeaders { list = curl_slist_append(list, header) }
        for header in state.request.headers { list = curl_slist_append(list, header) }
        if let via = configuration.via { list = curl_slist_append(list, "Via: \(via)") }
        if let range { list = curl_slist_append(list, "Range: \(range)") }
        if let range, let ifRange, range.hasPrefix("bytes=") {
            list = curl_slist_append(list, state.sentIfMatch ? "If-Match: \(ifRange)" : "If-Range: \(ifRange)")
        }
        // S3: each attempt signed anew, with its own time (a retry may come minutes later), and
        // only at the request's own origin (a redirect elsewhere gets no signature).
        errorDocument = nil
        toS3 = configuration.goesToS3(state.url)
        if state.atRequestOrigin {
            for header in configuration.s3SignedHeaders(method: state.method ?? "GET", url: state.url, date: configuration.clock.wall()) {
                list = curl_slist_append(list, header)
            }
        }
        headerList = list
        self.easy = easy
        held = false
        CurlEasy.configure(easy, url: state.url, headers: list, pinned: pinned, configuration: configuration,
                           credentials: sendsCredentials,
                           transfer: Unmanaged.passUnretained(self).toOpaque(), errorBuffer: errorBuffer)
        if state.wantsFreshConnection { _ = ccurl_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1) }
        // A WebDAV PROPFIND: curl sends the body with the method named (the pool resets handles).
        if let method = state.method { _ = ccurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method) }
        if let body = state.body {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count)
            _ = ccurl_easy_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, String(decoding: body, as: UTF8.self))
        }
    }

    /// The attempt's easy handle is out of the multi handle: release what it used.
    func endAttempt() {
        easy = nil
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
    }

    /// curl's text for a failed attempt: the error buffer if filled, else the code's description.
    /// libcurl 7.x reports a response header over its 100 KB limit as "Out of memory": before a
    /// head, that is what it almost always means, and it says so.
    func failureMessage(_ code: CURLcode) -> String {
        let detail = String(cString: errorBuffer)
        let text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        guard code == CURLE_OUT_OF_MEMORY, !state.headSeen else { return text }
        return "response headers too large (over libcurl's 100 KB), or out of memory (\(text))"
    }

    /// Whether the attempt on `easy` ended on a connection kept from an earlier answer that
    /// answered with something other than HTTP (see `TransferState.AttemptResult.staleConnection`).
    func endedOnStaleConnection(_ code: CURLcode, easy: UnsafeMutableRawPointer) -> Bool {
        guard code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_WEIRD_SERVER_REPLY, !state.headSeen else { return false }
        var connects = 0
        return ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects == 0
    }

    /// The policy's refusal as the transfer's error, if it is what ended this failed attempt:
    /// every address curl wanted was refused, or a request was stopped before it was sent.
    func refusalError(_ code: CURLcode) -> FetchError? {
        guard code != CURLE_OK, let refusal, refusedRequest || refusedLastAddress else { return nil }
        return .refusedAddress(url: state.url, reason: refusal)
    }

    // MARK: Callbacks (loop thread, inside curl_multi_perform)

    /// A socket for one resolved address of the URL being fetched (after redirects), or none if
    /// the address policy refuses it: then nothing at all is sent to that address.
    func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let peer = IPAddress(ccurl_sockaddr_address(address))
        if let reason = addressPolicy.refusal(connectingTo: peer, host: currentHost) {
            refusal = reason
            refusedLastAddress = true
            return ccurl_socket_bad
        }
        refusedLastAddress = false
        let a = address.pointee
        return socket(a.family, a.socktype | Int32(SOCK_CLOEXEC.rawValue), a.`protocol`)
    }

    /// A request is about to be sent: on a reused connection, or through an upstream proxy, the
    /// URL (after redirects) is all there is to check.
    func allowsRequest(primaryIP: String?) -> Bool {
        guard let reason = addressPolicy.refusal(connectingTo: primaryIP.flatMap { IPAddress($0) }, host: currentHost) else {
            return true
        }
        refusal = reason
        refusedRequest = true
        return false
    }

    /// The host of the URL curl is fetching now (the request's, or a redirect's).
    private var currentHost: String? { AddressPolicy.host(of: state.url) }

    /// One header line, as curl's bytes (valid during the call). Returns false to abort the attempt.
    func didReceiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Bool {
        if state.abort != nil { return false }
        guard let block = parser.feed(line), !block.isInterim else { return true }
        return handleHead(block)
    }

    enum BodyAnswer { case taken, pause, abort }

    /// Body bytes. `.pause`: none of them were taken (the sink has no room, or the bandwidth
    /// limit is used up); curl offers them again once the loop resumes the transfer.
    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyAnswer {
        if errorDocument != nil {
            // The attempt has ended on its status already (`state.abort`): this is only read.
            guard errorDocument!.count + bytes.count <= S3ErrorDocument.maxBytes else { return .abort }
            errorDocument! += bytes
            return .taken
        }
        if state.abort != nil { return .abort }
        if !state.headSeen {
            // Normally the head was handled at its blank line; this covers odd framings.
            if parser.current.isInterim { return .taken }
            guard handleHead(parser.current) else { return .abort }
        }
        if state.redirectTarget != nil {
            // A redirect's body, dropped: read to its end, the hop's connection is kept.
            _ = state.receiveBody(bytes)
            return state.redirectBodyTooLong ? .abort : .taken
        }
        if let throttle, !throttle.admit(bytes.count, transfer: id, priority: priority, owner: state.request.owner,
                                           now: clock.monotonic) { return .pause }
        let before = state
        let (offset, length) = state.receiveBody(bytes)
        if length > 0 {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
            switch sink.fetchOffer(slice) {
            case .proceed:
                tookBytes = true
            case .pause:
                state = before   // the same bytes come again
                return .pause
            case .stop:
                state.sinkCancelled()
                // The engine stops a fetch with its last byte: when that is also the answer's
                // last byte, curl finishes the answer and keeps the connection for the next
                // request (an abort would close it). The sink still hears `.cancelled`.
                return state.attemptBodyComplete ? .taken : .abort
            }
        }
        return state.abort == nil ? .taken : .abort
    }

    /// Curl finished the attempt with CURLE_OK and no final head was handled yet (empty body).
    func completeHeadIfNeeded() {
        guard !state.headSeen, state.abort == nil, parser.current.complete else { return }
        _ = handleHead(parser.current)
    }

    private func handleHead(_ block: ResponseHeaderBlock) -> Bool {
        let location = (300..<400).contains(block.status) ? block.field("location").flatMap { URLOrigin.resolve($0, against: state.url) } : nil
        let action = state.receiveHead(block, finalURL: state.url, location: location)
        if let ignored = state.rangeAnswer { rangeAnswers?.note(origin: origin, ignored: ignored) }
        switch action {
        case .redirect:
            return true
        case let .deliver(head):
            if !sink.fetchDidReceiveHead(head) {
                state.sinkCancelled()
                return false
            }
            return true
        case .proceed:
            return true
        case .abort:
            // An S3 endpoint's refusal: its error document says why (a small body, read whole).
            if toS3, case .status = state.abort, block.status >= 400,
               (block.field("content-length").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0) <= S3ErrorDocument.maxBytes {
                errorDocument = []
                errorDate = block.field("date").flatMap(HTTPDate.parse)
                return true
            }
            return false
        }
    }

}
