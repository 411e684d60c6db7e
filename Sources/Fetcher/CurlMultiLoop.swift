import CacheCore
import CCurl
import Foundation
import Logging

/// The thread that drives every transfer through one libcurl multi handle.
///
/// Design: callers never touch curl. `submit` and `cancel` put work in an inbox guarded by
/// `lock` and wake the loop with `curl_multi_wakeup`. The loop thread alone owns the multi
/// handle, the easy handles (pooled, so connections and TLS sessions are reused through the
/// multi handle's cache) and every `CurlTransfer`; all sink callbacks therefore arrive on it,
/// in order, never concurrently. Each turn: take the inbox, start due retries, resume paused
/// transfers (their sink made room, or the bandwidth limit has tokens again), `curl_multi_perform`
/// (which runs the header/write callbacks), tell the sinks that took bytes that the turn ended
/// (`fetchDidDrain`: they write what they gathered), collect finished attempts, then `curl_multi_poll`
/// until a socket, a curl timer, the next retry, the bandwidth limit's next token, the request
/// rate's next token (`--tpslimit`) or a wakeup.
///
/// Priorities: every transfer has a class (`FetchPriority`), which the engine changes as reads
/// start and stop waiting on it. `TransferScheduler` decides which transfers yield to a read that
/// is behind; the loop pauses their receiving (`curl_easy_pause(CURLPAUSE_RECV)`: the connection's
/// window closes and the link carries the rest) and lets them go on when it says so. Transfers
/// waiting for a connection start as `TransferAdmission` says (class order; the policy the tier
/// node client follows too), and the bandwidth limit serves classes in order.
///
/// Flow control: a write callback that gets `.pause` from its sink (the disk writer is behind)
/// or finds the bandwidth limit used up returns CURL_WRITEFUNC_PAUSE; curl keeps those bytes and
/// stops reading that connection, and offers them again after `curl_easy_pause(CURLPAUSE_CONT)`.
/// `--max-connections` is CURLMOPT_MAX_HOST_CONNECTIONS and CURLMOPT_MAX_TOTAL_CONNECTIONS, and
/// the loop hands curl no more transfers than the total (`TransferAdmission.Limits.curl`): the
/// rest wait in `admission`'s queue, holding no easy handle. (curl would queue them itself, but
/// each with its easy handle and receive buffer: 100 read-ahead streams waiting for 16
/// connections held 13 MiB.)
///
/// Egress budgets (`--egress-budget`, `EgressLedger`): a request whose origin's budget is used
/// up for its class is not sent (it finishes as `.budgetSpent`); the bytes of
/// every turn are counted (curl's body byte count, so bytes skipped of a 200 to a range count
/// too), and a running transfer whose class's share is used up is stopped after that turn.
// @unchecked: a C boundary. The multi handle, the easy handles and the pinned-address list are
// raw pointers owned by libcurl, used only on the loop thread (with the "loop thread only" state),
// which frees them before `exited` is signalled; other threads only queue work in the inbox,
// under `lock`.
final class CurlMultiLoop: @unchecked Sendable {
    private let configuration: FetcherConfiguration
    private let logger: Logger
    private let multi: UnsafeMutableRawPointer
    /// `configuration.pinnedAddresses` for CURLOPT_RESOLVE, freed with the loop.
    private let pinned: UnsafeMutablePointer<curl_slist>?

    private let lock = NSLock()
    private var inboxStarts: [CurlTransfer] = []  // guarded by lock
    private var inboxCancels: [Int] = []  // guarded by lock
    private var inboxResumes: [Int] = []  // guarded by lock
    private var inboxPriorities: [(id: Int, priority: FetchPriority, waited: Duration)] = []  // guarded by lock
    private var stopping = false  // guarded by lock
    private var nextID = 1  // guarded by lock
    /// The most transfers curl held at once (each with its easy handle and buffer), for tests.
    private var peakAttachedCount = 0  // guarded by lock
    /// Signalled when the loop thread has released every curl resource.
    private let exited = DispatchGroup()
    private var thread: Thread?  // set once before the loop runs

    // Loop thread only.
    private var live: [Int: CurlTransfer] = [:]
    private var transferOfEasy: [UnsafeMutableRawPointer: Int] = [:]
    private var idleEasy: [UnsafeMutableRawPointer] = []
    /// Which transfers hold an easy handle (run), and which wait for one, in what order.
    private var admission: TransferAdmission
    private let throttle: Throttle?
    private var scheduler: TransferScheduler
    /// Answers to required ranges by origin: whether an origin served most of them lately.
    private let rangeAnswers = OriginRangeAnswers()
    private let ledger: EgressLedger?
    /// The body bytes each attached easy handle had received at the last count (`meterTurn`).
    private var counted: [UnsafeMutableRawPointer: Int64] = [:]
    /// The budget's origin of each live transfer that has one (set when it is first attached).
    private var budgetOrigin: [Int: String] = [:]

    init(configuration: FetcherConfiguration, logger: Logger) {
        CurlEasy.globalInit
        self.configuration = configuration
        self.logger = logger
        multi = curl_multi_init()
        let clock = configuration.clock
        throttle = configuration.bandwidthTimetable.map { Throttle(timetable: $0, date: clock.wall(), now: clock.monotonic) }
            ?? (configuration.maxBytesPerSecond > 0
                ? Throttle(bytesPerSecond: configuration.maxBytesPerSecond, now: clock.monotonic) : nil)
        scheduler = TransferScheduler(patience: .seconds(max(0, configuration.yieldAfter)))
        admission = TransferAdmission(limits: .curl(configuration))
        ledger = configuration.egressLedger
        pinned = configuration.pinnedAddresses.reduce(nil) { curl_slist_append($0, $1) }
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, ccurl_pipe_multiplex)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, configuration.maxConnections))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max(1, configuration.maxTotalConnections))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(4, configuration.maxConnections * 2))
        exited.enter()
        let thread = Thread { [self] in
            BlockingIOPool.nameCurrentThread("curl")  // as `top -H` and `perf` show it
            self.run()
        }
        thread.name = "httpcachefs-curl"
        self.thread = thread
        thread.start()
    }

    /// Queues a transfer; nil once the loop is stopping.
    func submit(_ request: FetchRequest, sink: FetchSink) -> Int? {
        lock.lock()
        guard !stopping else {
            lock.unlock()
            return nil
        }
        let id = nextID
        nextID += 1
        inboxStarts.append(CurlTransfer(id: id, request: request, sink: sink, policy: configuration.retryPolicy,
                                        redirects: configuration.redirectRules,
                                        addressPolicy: configuration.addressPolicy, throttle: throttle,
                                        clock: configuration.clock, rangeAnswers: rangeAnswers))
        curl_multi_wakeup(multi)  // under the lock: the loop frees `multi` only after `stopping`
        lock.unlock()
        return id
    }

    var peakAttached: Int { lock.withLock { peakAttachedCount } }

    /// Asks the loop to stop transfer `id` (no effect if it already finished).
    func cancel(_ id: Int) {
        lock.lock()
        if !stopping {
            inboxCancels.append(id)
            curl_multi_wakeup(multi)
        }
        lock.unlock()
    }

    /// Asks the loop to deliver again to transfer `id`, which its sink paused (no effect if it
    /// is not paused or already finished).
    func resume(_ id: Int) {
        lock.lock()
        if !stopping {
            inboxResumes.append(id)
            curl_multi_wakeup(multi)
        }
        lock.unlock()
    }

    /// Tells the loop that transfer `id` changed class (see `FetchHandle.setPriority`).
    func setPriority(_ id: Int, _ priority: FetchPriority, waitedSeconds: Double) {
        let waited = Duration.seconds(max(0, min(waitedSeconds, 1e6)))
        lock.lock()
        if !stopping {
            inboxPriorities.append((id, priority, waited))
            curl_multi_wakeup(multi)
        }
        lock.unlock()
    }

    /// Stops the loop: every live transfer finishes with `.cancelled`. Waits for the thread
    /// unless called from it (e.g. from a sink callback).
    func shutdown() {
        lock.lock()
        if !stopping { curl_multi_wakeup(multi) }
        stopping = true
        lock.unlock()
        if Thread.current != thread { exited.wait() }
    }

    // MARK: Loop thread

    private func run() {
        while true {
            lock.lock()
            let starts = inboxStarts
            let cancels = inboxCancels
            let resumes = inboxResumes
            let priorities = inboxPriorities
            let stop = stopping
            inboxStarts.removeAll()
            inboxCancels.removeAll()
            inboxResumes.removeAll()
            inboxPriorities.removeAll()
            lock.unlock()

            if stop {
                for t in starts { live[t.id] = t }
                break
            }
            let now = configuration.clock.monotonic
            for t in starts {
                live[t.id] = t
                scheduler.add(t.id, origin: t.origin, priority: t.priority, owner: t.state.request.owner, now: now)
            }
            for p in priorities where live[p.id] != nil {
                live[p.id]!.priority = p.priority
                admission.reclass(p.id, p.priority)
                scheduler.setPriority(p.id, p.priority, waited: p.waited, now: now)
                throttle?.reclass(p.id, p.priority)
            }
            for t in starts { launch(t) }
            for id in cancels { if let t = live[id] { cancelNow(t) } }

            for t in live.values where t.retryAt.map({ $0 <= now }) ?? false {
                t.retryAt = nil
                launch(t)
            }
            throttle?.follow(date: configuration.clock.wall(), now: now)
            for id in resumes + (throttle?.due(now: now) ?? []) {
                // curl may offer the kept bytes right here, inside curl_easy_pause. A held
                // transfer goes on once the scheduler lets it go.
                if let t = live[id], let easy = t.easy, !t.held { _ = curl_easy_pause(easy, ccurl_pause_cont) }
            }

            startWaiting()
            let nextCheck = applyHolds(now: now)
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            if ledger != nil { meterTurn() }
            // Only transfers curl holds can have taken bytes (at most the connection cap).
            for id in transferOfEasy.values {
                guard let t = live[id], t.tookBytes else { continue }
                t.tookBytes = false
                t.sink.fetchDidDrain()
            }
            collectFinished()
            startWaiting()

            var timeoutMs: Int32 = 1000
            let after = configuration.clock.monotonic
            // Each wake-up as a poll timeout: the time until it, in whole milliseconds rounded up,
            // at most a second (nothing is due before the next turn anyway).
            func pollTimeout(_ wait: Duration) -> Int32 { Int32(min(1000, wait.nanoseconds / 1_000_000 + 1)) }
            if let due = live.values.compactMap(\.retryAt).min() {
                timeoutMs = due <= after ? 0 : pollTimeout(due - after)
            }
            if let wait = throttle?.wait(now: after) {
                timeoutMs = min(timeoutMs, pollTimeout(wait))
            }
            if let wait = admission.tokenWait(now: after) {   // --tpslimit
                timeoutMs = min(timeoutMs, pollTimeout(wait))
            }
            if let nextCheck {
                timeoutMs = min(timeoutMs, nextCheck <= after ? 0 : pollTimeout(nextCheck - after))
            }
            _ = curl_multi_poll(multi, nil, 0, timeoutMs, nil)
        }
        for t in Array(live.values) { cancelNow(t) }
        for easy in idleEasy { curl_easy_cleanup(easy) }
        idleEasy.removeAll()
        curl_multi_cleanup(multi)
        if let pinned { curl_slist_free_all(pinned) }
        exited.leave()
    }

    /// Attaches the transfers `admission` lets run: the highest class first (see
    /// `TransferAdmission`). A transfer a read waits on that finds every connection taken takes
    /// one from far read-ahead, a scan or preload (`preempt`).
    private func startWaiting() {
        let now = configuration.clock.monotonic
        while let step = admission.next(now: now, preemptible: { self.canPreempt($0) }) {
            switch step {
            case let .start(id):
                if let t = live[id] { attach(t) } else { admission.leave(id) }
            case let .preempt(victim, id):
                if let v = live[victim] { preempt(v) }
                if let t = live[id] { attach(t) } else { admission.leave(id) }
            }
        }
    }

    /// Whether `id`'s connection can be handed to a waiting read: one whose origin sent the whole
    /// body (a 200) would start over, and one that has every byte it promised has nothing to
    /// resume (its connection frees itself).
    private func canPreempt(_ id: Int) -> Bool {
        guard let t = live[id], t.easy != nil else { return false }
        return t.state.head?.status != 200 && !t.state.allDelivered
    }

    /// Takes `t`'s connection (the admission queued it again): it resumes where it was, with
    /// `If-Range`, as after a dropped connection.
    private func preempt(_ t: CurlTransfer) {
        guard let easy = t.easy else { return }
        logger.debug("connection handed to a waiting read", metadata: ["url": "\(t.state.request.url)", "class": "\(t.priority)"])
        curl_multi_remove_handle(multi, easy)
        transferOfEasy.removeValue(forKey: easy)
        t.endAttempt()
        recycle(easy)
    }

    /// Queues `t` for a connection; `startWaiting` attaches it, in this turn of the loop.
    private func launch(_ t: CurlTransfer) {
        admission.arrive(t.id, origin: t.origin, priority: t.priority)
    }

    /// Pauses the receiving of the transfers the scheduler holds and lets go of the others;
    /// returns when to decide again. Only transfers curl holds can be paused: one that starts
    /// later is held once it is attached. A transfer is held only once its response head is in:
    /// libcurl 7.88 paused in the middle of a head can lose header lines (a 206 then arrives
    /// without its Content-Range), and holding it there would save nothing anyway (the request
    /// is sent, the head comes regardless).
    private func applyHolds(now: MonotonicInstant) -> MonotonicInstant? {
        let decision = scheduler.decide(now: now)
        for id in transferOfEasy.values {
            guard let t = live[id], let easy = t.easy else { continue }
            let hold = decision.held.contains(id) && (t.held || t.state.headSeen)
            if hold == t.held { continue }
            t.held = hold
            _ = curl_easy_pause(easy, hold ? ccurl_pause_recv : ccurl_pause_cont)
        }
        return decision.nextCheck
    }

    private func attach(_ t: CurlTransfer) {
        // A refused name or address literal fails before any lookup or connection (every hop).
        let url = t.state.upcomingURL
        if let reason = configuration.addressPolicy.refusal(url: url) {
            finish(t, .refusedAddress(url: url, reason: reason))
            return
        }
        if let ledger, let origin = budgetOrigin[t.id] ?? EgressLedger.originKey(of: t.state.request.url), ledger.governs(origin) {
            budgetOrigin[t.id] = origin
            if let refusal = ledger.refusal(origin, priority: t.priority) {
                refuse(t, refusal)
                return
            }
        }
        guard let easy = idleEasy.popLast() ?? curl_easy_init() else {
            finish(t, .network(url: url, message: "curl_easy_init failed"))
            return
        }
        t.beginAttempt(on: easy, configuration: configuration, pinned: pinned)
        if !t.sendsCredentials, configuration.hasScopedCredentials, let origin = URLOrigin(t.state.url),
           configuration.access.scope.firstWithheld(origin) {
            logger.info(t.state.atRequestOrigin
                ? "credentials withheld: this origin was not given on the command line (name it with --credential-host to send them)"
                : "credentials withheld after a redirect to another origin (as curl does; give a URL at that origin to send them there)",
                metadata: ["origin": "\(origin)"])
        }
        transferOfEasy[easy] = t.id
        if ledger != nil { counted[easy] = 0 }
        let attached = transferOfEasy.count
        lock.withLock { peakAttachedCount = max(peakAttachedCount, attached) }
        let added = curl_multi_add_handle(multi, easy)
        if added != CURLM_OK {
            transferOfEasy.removeValue(forKey: easy)
            t.endAttempt()
            recycle(easy)
            finish(t, .network(url: t.state.request.url,
                               message: "curl_multi_add_handle: \(String(cString: curl_multi_strerror(added)))"))
        }
    }

    private func collectFinished() {
        var queued: Int32 = 0
        while let msg = curl_multi_info_read(multi, &queued) {
            guard ccurl_msg_is_done(msg) != 0, let easy = ccurl_msg_easy(msg) else { continue }
            attemptDone(easy, ccurl_msg_result(msg))
        }
    }

    private func attemptDone(_ easy: UnsafeMutableRawPointer, _ code: CURLcode) {
        curl_multi_remove_handle(multi, easy)
        let detached = transferOfEasy.removeValue(forKey: easy)
        if let detached { admission.leave(detached) }
        guard let id = detached, let t = live[id] else {
            recycle(easy)
            return
        }
        if let refused = t.refusalError(code) {
            // Never retried: the answer would be the same.
            t.endAttempt()
            recycle(easy)
            logger.warning("refused to connect", metadata: ["url": "\(t.state.request.url)", "why": "\(refused)"])
            finish(t, refused)
            return
        }
        if !t.state.headSeen, let fault = CurlEasy.requestFault(code, url: t.state.url) {
            // The request's own fault (a malformed URL): never retried, and no word on its origin.
            let url = t.state.url
            t.endAttempt()
            recycle(easy)
            finish(t, .refusedAddress(url: url, reason: "\(fault) (\(t.failureMessage(code)))"))
            return
        }
        let result: TransferState.AttemptResult
        switch code {
        case CURLE_OK:
            t.completeHeadIfNeeded()
            result = .ok
        case CURLE_OPERATION_TIMEDOUT:
            result = .timedOut
        case _ where t.endedOnStaleConnection(code, easy: easy):
            result = .staleConnection(message: t.failureMessage(code))
        default:
            result = .failed(message: t.failureMessage(code), retryable: CurlEasy.isRetryable(code))
        }
        if CurlEasy.isUnreachable(code), !t.state.headSeen, t.state.atRequestOrigin, let observer = t.sink as? OriginReachObserving {
            // Before the retry is planned: offline mode ends the transfer now (`OriginHealth`).
            // Only about the requested origin: a redirect's target that cannot be reached is not it.
            let url = t.state.url
            observer.fetchCouldNotReach(code == CURLE_OPERATION_TIMEDOUT
                ? .timeout(url: url) : .network(url: url, message: t.failureMessage(code)))
        }
        if let bytes = t.errorDocument, let document = S3ErrorDocument.parseWithTime(bytes) {
            noteS3Refusal(document, transfer: t)
        }
        t.endAttempt()
        recycle(easy)
        switch t.state.attemptEnded(result) {
        case let .finish(error):
            if let detail = t.state.changeDetail, case .remoteChanged = error {
                logger.info("remote file changed during transfer", metadata: ["url": "\(t.state.request.url)", "why": "\(detail)"])
            }
            finish(t, error)
        case let .redirect(target):
            logger.debug("following a redirect", metadata: [
                "url": "\(DisplayURL.redacted(t.state.request.url))", "to": "\(DisplayURL.redacted(target))",
                "hop": "\(t.state.hops)",
            ])
            launch(t)
        case let .retry(delay):
            logger.debug("retrying transfer", metadata: [
                "url": "\(t.state.request.url)", "after": "\(delay)s", "attempt": "\(t.state.attempts + 1)",
                "cause": "\(result)", "abort": "\(String(describing: t.state.abort))",
            ])
            t.retryAt = configuration.clock.monotonic + .seconds(max(0, delay))
            (t.sink as? FetchRetryObserving)?.fetchWillRetry()
        }
    }

    private func cancelNow(_ t: CurlTransfer) {
        if let easy = t.easy {
            curl_multi_remove_handle(multi, easy)
            transferOfEasy.removeValue(forKey: easy)
            t.endAttempt()
            recycle(easy)
        }
        finish(t, .cancelled)
    }

    private func finish(_ t: CurlTransfer, _ error: FetchError?) {
        guard live.removeValue(forKey: t.id) != nil else { return }
        admission.leave(t.id)
        scheduler.remove(t.id)
        throttle?.forget(t.id)
        budgetOrigin.removeValue(forKey: t.id)
        t.retryAt = nil
        t.sink.fetchDidFinish(error)
    }

    private func recycle(_ easy: UnsafeMutableRawPointer) {
        counted.removeValue(forKey: easy)
        curl_easy_reset(easy)
        if idleEasy.count < max(4, configuration.maxConnections * 2) {
            idleEasy.append(easy)
        } else {
            curl_easy_cleanup(easy)
        }
    }

    // MARK: Egress budgets (loop thread)

    /// Counts the body bytes this turn brought into each origin's budget, then stops the running
    /// transfers whose class's share is used up.
    private func meterTurn() {
        guard let ledger else { return }
        var stop: [(CurlTransfer, EgressLedger.Refusal)] = []
        for (easy, id) in transferOfEasy {
            guard let origin = budgetOrigin[id], let t = live[id] else { continue }
            var size: curl_off_t = 0
            _ = ccurl_easy_getinfo_off_t(easy, CURLINFO_SIZE_DOWNLOAD_T, &size)
            let delta = Int64(size) - counted[easy, default: 0]
            guard delta > 0 else { continue }
            counted[easy] = Int64(size)
            ledger.add(origin, bytes: delta)
            // One that has every byte it asked for ends by itself (its bytes are counted).
            if !t.state.allDelivered, let refusal = ledger.refusal(origin, priority: t.priority) { stop.append((t, refusal)) }
        }
        for (t, refusal) in stop { refuse(t, refusal) }
    }

    /// Ends `t` for its origin's budget: detached if it runs, finished as `.budgetSpent` (the
    /// engine's `CacheError.budgetSpent`: EIO in the mount, 503 with `Retry-After` in the proxy).
    private func refuse(_ t: CurlTransfer, _ refusal: EgressLedger.Refusal) {
        if let easy = t.easy {
            curl_multi_remove_handle(multi, easy)
            transferOfEasy.removeValue(forKey: easy)
            t.endAttempt()
            recycle(easy)
        }
        logger.debug("egress budget: not fetched", metadata: [
            "url": "\(DisplayURL.redacted(t.state.request.url))", "class": "\(t.priority)",
            "used": "\(refusal.used)", "budget": "\(refusal.budget)", "spent": "\(refusal.spent)",
        ])
        finish(t, .budgetSpent(url: t.state.request.url))
    }
}

extension CurlMultiLoop {
    /// An S3 endpoint's refusal of `t`'s attempt: noted for the messages that report it
    /// (`S3ErrorLog`), logged in one line with what it means; `RequestTimeTooSkewed` teaches the
    /// signer the server's time (said once, not per request) and the attempt is made again.
    func noteS3Refusal(_ document: S3ErrorDocument, transfer t: CurlTransfer) {
        S3ErrorLog.note(document, url: t.state.url)
        let url = DisplayURL.redacted(t.state.url)
        if document.code == "RequestTimeTooSkewed", let buckets = configuration.s3Buckets,
           let server = document.serverTime ?? t.errorDate {
            let now = configuration.clock.wall()
            if buckets.learnServerTime(server, now: now) {
                logger.warning("S3: this machine's clock is \(Int(server.timeIntervalSince(now).rounded())) s off the server's: requests are signed with the server's time from now on",
                               metadata: ["url": "\(url)"])
            }
            if t.state.retryWithCorrectedClock() { return }
        }
        let meaning = document.meaning.map { " (\($0))" } ?? ""
        logger.warning("S3 refused the request: \(document)\(meaning)", metadata: ["url": "\(url)"])
    }
}
