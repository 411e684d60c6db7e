import CacheCore
import Foundation

/// The logic of one logical fetch across its attempts, with no curl and no I/O: what to ask
/// for, what each answer means, which bytes reach the sink, and whether to retry.
///
/// The sink must see one head and one continuous body, whatever happens underneath:
/// - The first acceptable answer (200 or 206) becomes the head. Its validator (strong ETag,
///   else Last-Modified) is sent as `If-Range` on every resume.
/// - A resume asks for `Range: bytes=<next undelivered byte>-...`. A 206 that starts earlier
///   than needed, or a 200 (server without ranges), has its leading bytes skipped. A different
///   ETag, Last-Modified or length, or a 416, means the resource changed: `.remoteChanged`.
/// - Error statuses never reach the sink. 5xx, 429 and 408 are retried (429/503 after their
///   `Retry-After`), dropped connections resume (at once if the attempt moved bytes), a stall
///   is retried only if the attempt moved some bytes first. Progress resets the retry budget.
/// - A head without a strong validator (no ETag, a weak one, `ignoreETag`, or rotating ETags; a
///   Last-Modified alone survives a same-second replacement) cannot show a change on a resume:
///   the transfer keeps the last bytes it delivered (`ResumeOverlap`), a resume asks again from
///   that many bytes before the resume point (a 200 has them among its skipped lead), and they are
///   compared before anything new is delivered: other bytes are `.remoteChanged` ("the bytes
///   before the resume point differ"); equal ones are dropped. A strong ETag asks nothing again.
/// - Bytes beyond what the head promised (a 200 resume past the requested range) end the
///   transfer successfully.
/// - A 206 to an `If-Range` (the origin says the version matched) whose Content-Range total is
///   not the length the request expects, or differs from the head's on a resume, is a bad
///   response, retried like a 5xx: not a new version (a total that flips between answers).
/// - `ignoreETag` compares no ETags and resumes with Last-Modified as `If-Range`.
/// - An answer to an `If-Range` ETag (or to a tiered open-time check, which carries the cached
///   ETag without sending it) that carries another ETag but the expected length and
///   Last-Modified is asked once more at once (a second look). Answers retried before the head
///   (that one, and 200s to a `requireRange` request) that carried two or more ETags for the same
///   length and Last-Modified mark the head `etagRotating`: evidence, for the engine, of an origin
///   whose ETags change on every answer (one file replaced once gives the same new ETag every time).
/// - With `requireRange`, a 200 to a range that does not start at 0 is retried with backoff
///   (`maxIgnoredRanges` times, `maxIgnoredRangesServedLately` where the origin served most of its
///   ranges lately: `OriginRangeAnswers`) before it is accepted: one 200 from a flaky CDN is no
///   verdict that the origin ignores ranges. Unless the range starts within `usableLead` of byte 0: then
///   the 200 is used as the range it was asked for, its leading bytes dropped (the head says
///   `bodyStart` = the range's start, status 200), and it ends at the range's end like a 206.
///   Cutting a 200 is not free: the origin has pushed a connection's worth of its body by the time
///   the head is read (about 2 MiB on loopback), so reading that far costs no more than a cut.
/// - The head of a `requireRange` request tells the engine how many 200s its range got (those cut,
///   and the head's own) and whether the head is a 206 (`ResponseHead.rangeAnswers`): the engine
///   remembers per origin that ranges are unreliable, and its reads then ask for less
///   (`RangeReliability`).
///
/// Redirects are followed here, not by libcurl, so that every hop passes the same rules: a 3xx
/// (not 304) with a `Location` ends the hop (its small body is read and dropped, keeping the
/// connection), and the attempt goes on at the absolute target (`Next.redirect`), at most
/// `RedirectRules.maxHops` hops, never one seen before in the attempt (a loop), only to http and
/// https, and, with `--allow-host`, only to another origin a pattern allows (else the transfer
/// fails with `.refusedAddress`, which the proxy answers 403). Every attempt (a retry, a resume)
/// starts again from the request's URL, as an origin's redirect may change (a signed CDN URL).
/// A 303 turns a method other than GET/HEAD into a GET without body; 301, 302, 307, 308 keep
/// method and body (a WebDAV `PROPFIND` to `/dir` answered 301 `/dir/` stays a PROPFIND).
/// Credentials go only to a hop at the request's own origin (`atRequestOrigin`), curl's rule,
/// for every header the user added. Failures carry the hop's URL, so that an unreachable
/// redirect target is never taken for the requested origin being down.
struct TransferState {
    let request: FetchRequest
    let policy: RetryPolicy
    let redirects: RedirectRules

    /// Why the current attempt was stopped from our side (the curl result is then moot).
    enum Abort: Equatable {
        /// An error status: retry or report it.
        case status(Int, url: String, retryAfter: TimeInterval?)
        /// Give up with this error.
        case fail(FetchError)
        /// The sink returned false.
        case sinkCancelled
        /// Everything the head promised was delivered; the rest of this answer is surplus.
        case complete
        /// A 200 (whole body) answered a range the origin is known to serve: retry.
        case ignoredRange(url: String)
        /// A 206 that says the version matched but gives another total: retry.
        case inconsistentTotal(url: String, message: String)
        /// Only the ETag differs from the expected version: ask once more, at once.
        case secondLook
    }

    /// A redirect body longer than this is not read to its end: the hop's connection is closed.
    static let maxRedirectBody: Int64 = 64 << 10

    /// 200s to a `requireRange` request retried before one is accepted.
    static let maxIgnoredRanges = 2
    /// The same where the origin served most of its ranges lately (`rangesServedLately`): 200s in
    /// a row are bad luck there (four in a row once in ten thousand transfers at one in ten), and
    /// the whole file they would make the entry take is far dearer. At most `maxRetries`.
    static let maxIgnoredRangesServedLately = 4

    /// A 200 to a `requireRange` request whose range starts at most this far into the file is read
    /// up to the range (its lead dropped) rather than cut: about what a cut costs anyway, the
    /// origin's send buffer (Linux sizes it for ten segments: 2 MiB on loopback's 64 KiB MSS).
    static let usableLead: Int64 = 2 << 20

    /// How an attempt ended on the curl side.
    enum AttemptResult: Equatable {
        case ok
        case timedOut
        case failed(message: String, retryable: Bool)
        /// A connection kept from an earlier answer answered this request with something that is
        /// not HTTP (curl: "Received HTTP/0.9", a garbled status line), before any head: an origin
        /// that sent bytes after an earlier body left them in the socket. Nothing is wrong with the
        /// request; a new connection is.
        case staleConnection(message: String)
    }

    enum HeadAction: Equatable {
        /// First head: hand it to the sink.
        case deliver(ResponseHead)
        /// A resume answer that fits: keep going.
        case proceed
        /// Stop the attempt (`abort` says why).
        case abort
        /// A redirect to this absolute URL: read its body (dropped) to the end, then go there.
        case redirect(to: String)
    }

    enum Next: Equatable {
        case finish(FetchError?)
        case retry(after: TimeInterval)
        /// Start the next hop of this attempt at once, at `url`.
        case redirect(to: String)
    }

    /// The URL of the current hop: the request's, or a redirect's target.
    private(set) var url: String
    /// Redirects followed in the current attempt, and the URLs its hops asked.
    private(set) var hops = 0
    private var visited: [String] = []
    /// The current hop answered a redirect to this URL (its body is being dropped).
    private(set) var redirectTarget: String?
    private var redirectBody: Int64 = 0
    /// The next `beginAttempt` is the hop to this URL, not a new attempt.
    private var pendingHop: String?
    /// A 303 turned the request's method into GET (without body) for the rest of the attempt.
    private var seeOther = false
    /// The current hop is at the request's own origin (scheme, host, port).
    private(set) var atRequestOrigin = true

    /// The head given to the sink.
    private(set) var head: ResponseHead?
    /// Body bytes given to the sink.
    private(set) var delivered: Int64 = 0
    /// Body bytes the head promised, if known (range length, or Content-Length of a 200).
    private(set) var promised: Int64?
    private(set) var abort: Abort?
    private(set) var attempts = 0
    /// The current attempt has received its final header block.
    private(set) var headSeen = false
    /// Consecutive failures without progress.
    private(set) var failures = 0
    /// Attempts ended by a stale kept connection (`AttemptResult.staleConnection`): each is retried
    /// at once on a new connection without counting as a failure, a few times per transfer at
    /// most (a new connection cannot be stale, so more would mean something else is wrong).
    private(set) var staleConnections = 0
    /// The next attempts open a connection of their own (`CURLOPT_FRESH_CONNECT`): the pool may
    /// hold more connections the same origin left bytes in.
    private(set) var wantsFreshConnection = false
    static let maxStaleConnections = 2
    /// What differed when a resume showed the resource changed (for the log).
    private(set) var changeDetail: String?
    /// 200s answered to this transfer's ranges so far.
    private(set) var ignoredRanges = 0
    /// The origin served most of its ranges lately (`OriginRangeAnswers`, set by the owner before
    /// each attempt): a `requireRange` request retries more 200s before it takes the whole file.
    var rangesServedLately = false
    /// The current attempt's answer to a required range: true for a 200, false for a 206, nil for
    /// none yet or no required range (the owner notes it in its `OriginRangeAnswers`).
    private(set) var rangeAnswer: Bool?

    /// ETag, Last-Modified and length of the answers retried before the head.
    private var retriedETags: [(String, String?, Int64?)] = []
    /// The second look was taken.
    private var secondLookTaken = false
    /// The current attempt sent `If-Range` (or `If-Match` in its place).
    private var sentIfRange = false
    /// The current attempt sent a `Range`.
    private var sentRange = false
    /// The request goes to an S3 bucket (set by the owner before the first attempt): its
    /// validator, a strong ETag, goes as `If-Match`, not `If-Range` (S3 does not read If-Range;
    /// mountpoint-s3 does the same): a replaced object is answered 412, no byte of it.
    var validatesWithIfMatch = false
    /// The current attempt sent its validator as `If-Match`.
    private(set) var sentIfMatch = false
    /// A 412 answered an `If-Match`: the object changed. Later attempts send no `If-Match`, so
    /// that the answer brings the new version's head, which the engine compares with the one it
    /// holds and takes as a new version (the open's reads fail, the next open reads it), as it
    /// does for an origin that answers a changed `If-Range` with the whole new file.
    private(set) var ifMatchRefused = false
    /// Current attempt: body bytes still to drop before delivering.
    private var skip: Int64 = 0
    private var attemptExpected: Int64?
    private var attemptReceived: Int64 = 0
    private var deliveredAtAttemptStart: Int64 = 0
    /// The last delivered bytes, kept to check a resume against: nil for a head with a strong
    /// ETag (its `If-Range` shows a change), or before the head.
    private(set) var overlap: ResumeOverlap?
    /// Bytes before `resumeOffset` the current attempt asked again (to compare).
    private(set) var askedAgain: Int64 = 0

    init(request: FetchRequest, policy: RetryPolicy, redirects: RedirectRules = RedirectRules()) {
        self.request = request
        self.policy = policy
        self.redirects = redirects
        url = request.url
    }

    /// The request's origin: parsed only when a redirect needs it (most transfers have none).
    private var requestOrigin: URLOrigin? { URLOrigin(request.url) }

    /// The URL the next `beginAttempt` asks: a redirect's target, or the request's.
    var upcomingURL: String { pendingHop ?? request.url }

    /// The method of the current hop (nil: GET), and its body.
    var method: String? { seeOther ? nil : request.method }
    var body: [UInt8]? { seeOther ? nil : request.body }

    /// Whether the current hop's body is a redirect's, too long to read to its end.
    var redirectBodyTooLong: Bool { redirectTarget != nil && redirectBody > Self.maxRedirectBody }

    /// Resource offset of the next byte the sink is owed.
    var resumeOffset: Int64 { (head?.bodyStart ?? request.start) + delivered }

    /// Starts an attempt; returns its `Range` and `If-Range` header values.
    mutating func beginAttempt() -> (range: String?, ifRange: String?) {
        if let next = pendingHop {
            pendingHop = nil
            url = next
        } else {
            attempts += 1
            url = request.url
            hops = 0
            visited = [request.url]
            seeOther = false
        }
        atRequestOrigin = url == request.url || (URLOrigin(url).map { $0 == requestOrigin } ?? false)
        redirectTarget = nil
        redirectBody = 0
        abort = nil
        headSeen = false
        skip = 0
        attemptExpected = nil
        attemptReceived = 0
        deliveredAtAttemptStart = delivered
        askedAgain = 0
        rangeAnswer = nil
        overlap?.beginFresh()
        sentIfMatch = false
        sentRange = true
        guard let head else {
            sentRange = request.rangeHeader != nil
            let ifRange = request.sendsIfRange ? request.ifRange : nil
            sentIfRange = request.rangeHeader != nil && ifRange != nil
            sentIfMatch = sentIfRange && ifMatchUsable(ifRange)
            return (request.rangeHeader, ifRange)
        }
        askedAgain = Int64(overlap?.beginResume() ?? 0)
        let from = resumeOffset - askedAgain
        let range: String
        if let promised {
            let last = head.bodyStart + promised - 1
            range = "bytes=\(from)-\(last)"
        } else {
            range = "bytes=\(from)-"
        }
        let validator = request.sendsIfRange ? (request.ignoreETag ? head.lastModified : head.ifRangeValidator) ?? request.ifRange : nil
        sentIfRange = validator != nil
        sentIfMatch = sentIfRange && ifMatchUsable(validator)
        return (range, validator)
    }

    /// Whether `validator` goes as `If-Match`: to an S3 bucket, a strong ETag, no 412 yet.
    private func ifMatchUsable(_ validator: String?) -> Bool {
        validatesWithIfMatch && !ifMatchRefused && (validator?.hasPrefix("\"") ?? false)
    }

    /// The final header block of the current hop arrived.
    /// - Parameter location: the block's `Location` made absolute against the hop's URL
    ///   (`URLOrigin.resolve`), nil if it has none or it is no URL.
    mutating func receiveHead(_ block: ResponseHeaderBlock, finalURL: String, location: String? = nil) -> HeadAction {
        headSeen = true
        let status = block.status
        if redirects.follow, (300..<400).contains(status), status != 304, let raw = block.field("location") {
            return redirect(status: status, raw: raw, to: location)
        }
        if status == 412, sentIfMatch {
            // The object is no longer the version asked for. Before this transfer's head: ask
            // again without the condition (see `ifMatchRefused`); after it: a resume of another
            // version, which this transfer cannot deliver.
            ifMatchRefused = true
            changeDetail = "412 to If-Match \(request.ifRange ?? head?.etag ?? "")"
            return stop(head == nil ? .secondLook : .fail(.remoteChanged(url: request.url)))
        }
        guard (200..<300).contains(status) else {
            if head != nil && status == 416 {
                // Our resume range came from the original length: the resource shrank.
                return stop(.fail(.remoteChanged(url: request.url)))
            }
            return stop(.status(status, url: finalURL, retryAfter: block.retryAfter))
        }
        if let refusal = block.lengthRefusal {
            return stop(.fail(.invalidResponse(url: finalURL, message: refusal)))
        }
        // A 200 with the Content-Range of the range asked is that range: rclone's `serve s3`
        // (gofakes3) answers ranges so. Without a range asked, a 200 is the whole file.
        let partial = status == 206 || (status == 200 && sentRange && block.contentRange != nil)
        if request.requireRange && resumeOffset > 0 { rangeAnswer = !partial }
        // A 200 to a range near the start: its lead is dropped, the rest is the range asked for.
        let useLead = !partial && request.requireRange && head == nil && request.start > 0
            && request.start <= Self.usableLead && (block.contentLength.map { request.start < $0 } ?? false)
        if !partial, !useLead, request.requireRange, resumeOffset > 0, ignoredRanges < ignoredRangeLimit {
            ignoredRanges += 1
            if head == nil, let etag = block.etag { retriedETags.append((etag, block.lastModified, block.contentLength)) }
            return stop(.ignoredRange(url: finalURL))
        }
        let range = block.contentRange
        if partial && range == nil {
            return stop(.fail(.invalidResponse(url: finalURL, message:
                "206 without a usable Content-Range (\(block.field("content-range") ?? "none"))")))
        }
        if partial, let length = block.contentLength, length < range!.length {
            // A body shorter than its range (a compressed one, say) is not those bytes. A longer
            // one is cut at the range's end, as a body running past it always is.
            return stop(.fail(.invalidResponse(url: finalURL, message:
                "206 with Content-Length \(length) for Content-Range \(block.field("content-range") ?? "") (\(range!.length) bytes)")))
        }
        attemptExpected = partial ? range!.length : block.contentLength
        if partial, sentIfRange, let total = range!.total,
           let known = head?.totalLength ?? request.expectedLength, total != known {
            return stop(.inconsistentTotal(url: finalURL, message:
                "a 206 to If-Range (the same version) with the total \(total), not \(known)"))
        }

        // A tiered open-time check carries the cached validator without sending it: its answer
        // gets the same second look.
        let comparesValidator = sentIfRange || (request.isProbe && !request.sendsIfRange)
        if head == nil, !secondLookTaken, comparesValidator, let sent = request.ifRange, sent.hasPrefix("\""),
           let etag = block.etag, etag != sent, let date = block.lastModified, date == request.expectedLastModified,
           let total = partial ? range!.total : block.contentLength, total == request.expectedLength,
           !Self.rotating(retriedETags, etag: etag, date: date, length: total) {
            secondLookTaken = true
            retriedETags.append((etag, date, total))
            return stop(.secondLook)
        }

        if let head {
            if let why = changeReason(from: head, to: block) {
                changeDetail = why
                return stop(.fail(.remoteChanged(url: request.url)))
            }
            let answerStart = partial ? range!.start : 0
            let wanted = resumeOffset - askedAgain
            if answerStart > wanted {
                return stop(.fail(.invalidResponse(url: finalURL, message:
                    "resume asked for byte \(wanted), the answer starts at \(answerStart)")))
            }
            skip = wanted - answerStart
            return .proceed
        }

        if useLead {
            skip = request.start
            attemptExpected = block.contentLength
        }
        var first = ResponseHead(
            status: partial ? 206 : 200, finalURL: finalURL,
            bodyStart: partial ? range!.start : useLead ? request.start : 0,
            totalLength: partial ? range!.total : block.contentLength,
            contentType: block.contentType, etag: block.etag, lastModified: block.lastModified,
            acceptsRanges: partial || block.advertisesByteRanges)
        first.webDAV = block.webDAV
        if request.requireRange && request.start > 0 {
            // The engine's memory of the origin's ranges: the 200s cut before this answer, and this one.
            first.rangeAnswers = .init(ignored: ignoredRanges + (partial ? 0 : 1), served: partial)
        }
        if let etag = first.etag, let date = first.lastModified, let length = first.totalLength {
            first.etagRotating = Self.rotating(retriedETags, etag: etag, date: date, length: length)
        }
        head = first
        overlap = Self.hasStrongValidator(first, ignoringETag: request.ignoreETag) ? nil : ResumeOverlap()
        if useLead, let length = block.contentLength {
            promised = min(request.end ?? length, length) - request.start
        } else {
            promised = attemptExpected
        }
        return .deliver(first)
    }

    /// A redirect answer: the hop to `target`, or why not.
    private mutating func redirect(status: Int, raw: String, to target: String?) -> HeadAction {
        let unusable = FetchError.invalidResponse(url: url, message: "a \(status) redirect to '\(raw.prefix(200))', which is not a usable URL")
        guard let target else { return stop(.fail(unusable)) }
        let scheme = target.prefix { $0 != ":" }.lowercased()
        guard scheme == "http" || scheme == "https" else {
            return stop(.fail(.refusedAddress(url: target, reason:
                "\(DisplayURL.redacted(url)) redirected there: only http and https redirects are followed")))
        }
        guard let origin = URLOrigin(target) else { return stop(.fail(unusable)) }
        guard hops < redirects.maxHops else {
            return stop(.fail(.invalidResponse(url: url, message:
                "more than \(redirects.maxHops) redirects (the last to \(DisplayURL.redacted(target)))")))
        }
        guard !visited.contains(target) else {
            return stop(.fail(.invalidResponse(url: url, message:
                "a redirect loop: \(DisplayURL.redacted(target)) was asked before in this chain")))
        }
        if !redirects.allowedHosts.isEmpty, origin != requestOrigin,
           !redirects.allowedHosts.contains(where: { $0.matches(origin) }) {
            return stop(.fail(.refusedAddress(url: target, reason:
                "\(DisplayURL.redacted(url)) redirected to host '\(origin.hostPort)', which --allow-host does not allow")))
        }
        redirectTarget = target
        if status == 303, let method = request.method, method != "GET", method != "HEAD" { seeOther = true }
        return .redirect(to: target)
    }

    /// Body bytes of the current attempt arrived: returns the slice of them to give the sink.
    /// Bytes asked again before a resume point are compared with the delivered ones first (and
    /// dropped); when they differ, nothing is delivered and the transfer stops (`.remoteChanged`).
    mutating func receiveBody(_ bytes: UnsafeRawBufferPointer) -> (offset: Int, length: Int) {
        let count = bytes.count
        if redirectTarget != nil {
            redirectBody += Int64(count)
            return (count, 0)   // a redirect's body: dropped
        }
        attemptReceived += Int64(count)
        var dropped = Int(min(skip, Int64(count)))
        skip -= Int64(dropped)
        if let pending = overlap?.pending, pending > 0, dropped < count {
            guard let compared = overlap!.compare(UnsafeRawBufferPointer(rebasing: bytes[dropped...])) else {
                changeDetail = "the \(askedAgain) bytes before the resume point (byte \(resumeOffset)) differ from the delivered ones"
                abort = .fail(.remoteChanged(url: request.url))
                return (count, 0)
            }
            dropped += compared
        }
        var length = count - dropped
        if let promised { length = Int(min(Int64(length), max(0, promised - delivered))) }
        delivered += Int64(length)
        if length > 0 { overlap?.keep(UnsafeRawBufferPointer(rebasing: bytes[dropped..<(dropped + length)])) }
        if let promised, delivered >= promised {
            let surplus = dropped + length < count
            let more = attemptExpected.map { attemptReceived < $0 } ?? false
            if surplus || more { abort = .complete }
        }
        return (dropped, length)
    }

    /// The sink returned false from a callback.
    mutating func sinkCancelled() { abort = .sinkCancelled }

    /// The endpoint refused the attempt's signature for its time (`RequestTimeTooSkewed`) and
    /// the signer has learnt the server's: the attempt is made again at once, signed anew,
    /// once per transfer. False when it was already (the refusal then ends the transfer).
    mutating func retryWithCorrectedClock() -> Bool {
        guard !clockRetried, case .status = abort else { return false }
        clockRetried = true
        abort = .secondLook
        return true
    }
    private var clockRetried = false

    /// 200s to a required range retried before one is taken as the whole file.
    var ignoredRangeLimit: Int {
        guard rangesServedLately else { return Self.maxIgnoredRanges }
        return max(Self.maxIgnoredRanges, min(Self.maxIgnoredRangesServedLately, policy.maxRetries))
    }

    /// Every body byte of the current attempt's answer has arrived (its length was known).
    var attemptBodyComplete: Bool { attemptExpected.map { attemptReceived >= $0 } ?? false }

    /// Every byte the head promised went to the sink: there is nothing left to resume (a resumed
    /// attempt would ask for the empty range `bytes=N-(N-1)`, which a server answers 416).
    var allDelivered: Bool { promised.map { delivered >= $0 } ?? false }

    /// The current attempt ended: finish, or retry after a delay.
    mutating func attemptEnded(_ result: AttemptResult) -> Next {
        if let target = redirectTarget {
            // However its body ended: the target is known.
            redirectTarget = nil
            hops += 1
            visited.append(target)
            pendingHop = target
            return .redirect(to: target)
        }
        let progressed = delivered > deliveredAtAttemptStart
        if progressed { failures = 0 }
        // A connection that broke after moving bytes is resumed at once: the reader is waiting.
        let immediate: TimeInterval? = progressed ? 0 : nil
        if let abort {
            switch abort {
            case .complete: return .finish(nil)
            case .sinkCancelled: return .finish(.cancelled)
            case let .fail(error): return .finish(error)
            case let .ignoredRange(url):
                return retry(.invalidResponse(url: url, message: "the origin answered a range request with the whole file"),
                             retryAfter: nil)
            case let .inconsistentTotal(url, message):
                return retry(.invalidResponse(url: url, message: message), retryAfter: nil)
            case .secondLook:
                return .retry(after: 0)
            case let .status(status, url, retryAfter):
                let error = FetchError.http(status: status, url: url)
                // 508 (a loop) answers the same every time.
                guard (status >= 500 && status != 508) || status == 429 || status == 408 else { return .finish(error) }
                return retry(error, retryAfter: status == 429 || status == 503 ? retryAfter : nil)
            }
        }
        switch result {
        case .ok:
            guard headSeen else {
                return .finish(.invalidResponse(url: url, message: "the answer had no final header block"))
            }
            if let promised, delivered < promised {
                return retry(.invalidResponse(url: url,
                                              message: "short body: \(delivered) of \(promised) bytes"),
                             retryAfter: immediate)
            }
            return .finish(nil)
        case .timedOut:
            if allDelivered { return .finish(nil) }
            // A stall after progress is worth a new connection; a server that never answers is not.
            return progressed ? retry(.timeout(url: url), retryAfter: immediate) : .finish(.timeout(url: url))
        case let .staleConnection(message):
            if allDelivered { return .finish(nil) }
            guard staleConnections < Self.maxStaleConnections else {
                return .finish(.network(url: url, message: message))
            }
            staleConnections += 1
            wantsFreshConnection = true
            return .retry(after: 0)
        case let .failed(message, retryable):
            if allDelivered { return .finish(nil) }   // the connection broke after the last byte
            let error = FetchError.network(url: url, message: message)
            return retryable ? retry(error, retryAfter: immediate) : .finish(error)
        }
    }

    private mutating func retry(_ error: FetchError, retryAfter: TimeInterval?) -> Next {
        guard failures < policy.maxRetries else { return .finish(error) }
        failures += 1
        return .retry(after: policy.delay(retry: failures, retryAfter: retryAfter))
    }

    private mutating func stop(_ reason: Abort) -> HeadAction {
        abort = reason
        return .abort
    }

    /// Two or more ETags among `seen` and `etag` for the same date and length.
    static func rotating(_ seen: [(String, String?, Int64?)], etag: String, date: String, length: Int64) -> Bool {
        Set(seen.filter { $0.1 == date && $0.2 == length }.map(\.0) + [etag]).count >= 2
    }

    /// Whether `head`'s version shows in its validators on a resume: a strong ETag, sent in
    /// `If-Range` and compared, that neither the request ignores nor the origin rotates.
    static func hasStrongValidator(_ head: ResponseHead, ignoringETag: Bool) -> Bool {
        guard let etag = head.etag, !etag.hasPrefix("W/"), !ignoringETag else { return false }
        return !head.etagRotating
    }

    /// Why a resume answer describes a different resource than the head, or nil.
    func changeReason(from head: ResponseHead, to block: ResponseHeaderBlock) -> String? {
        let total = block.status == 206 ? block.contentRange?.total : block.contentLength
        return RemoteVersion.changeReason(etag: head.etag, lastModified: head.lastModified, length: head.totalLength,
                                          to: block.etag, block.lastModified, total, ignoringETag: request.ignoreETag)
    }
}
