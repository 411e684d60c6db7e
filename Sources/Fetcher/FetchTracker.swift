import Atomics
import CacheCore
import Foundation

/// A sink that wants to hear of each retried attempt of its transfer (sources call it; the
/// retried attempt's bytes never reach the sink, so it cannot tell otherwise).
public protocol FetchRetryObserving: AnyObject {
    func fetchWillRetry()
}

/// The outer layer of the engine's source (`FetchLayers.standard`): wraps the source so that
/// every transfer the engine starts is counted into the engine's metrics (answer class, body
/// bytes, retries) and listed while it runs (URL, range, bytes so far, age) for the status page,
/// without a line in the fetch path. The engine knows it only as `TransferListing`.
///
/// Threads: `start` on the engine's callers; sink callbacks on the source's thread, in order per
/// transfer (counters are atomics: the status page reads them from its own); `inFlight` on the
/// status page's. One leaf lock guards the table of running transfers, taken once at a
/// transfer's start and once at its end, never per chunk; nothing is called under it.
public final class FetchTracker: RangeSource, TransferListing, Sendable {
    let inner: RangeSource
    let metrics: CacheMetrics
    /// When transfers started and how old they are now (the engine's wall clock).
    let clock: @Sendable () -> Date
    private let running = LockedValue<[ObjectIdentifier: TrackedSink]>([:])

    public init(_ inner: RangeSource, metrics: CacheMetrics, clock: @escaping @Sendable () -> Date) {
        self.inner = inner
        self.metrics = metrics
        self.clock = clock
    }

    public func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        let tracked = TrackedSink(request: request, sink: sink, tracker: self)
        running.withLock { $0[ObjectIdentifier(tracked)] = tracked }
        return TrackedHandle(inner: inner.start(request, sink: tracked), sink: tracked)
    }

    fileprivate func ended(_ sink: TrackedSink) {
        running.withLock { $0[ObjectIdentifier(sink)] = nil }
    }

    /// The transfers running at `now`, oldest first.
    public func inFlight(now: Date) -> [FetchInFlight] {
        let sinks = running.withLock { Array($0.values) }
        return sinks.map { $0.snapshot(now: now) }.sorted { $0.ageSeconds > $1.ageSeconds }
    }

    public var inFlightCount: Int { running.withLock { $0.count } }
}

/// Passes the engine's calls on to the transfer, noting its class for the status page.
private struct TrackedHandle: FetchHandle {
    let inner: FetchHandle
    let sink: TrackedSink
    func cancel() { inner.cancel() }
    func resume() { inner.resume() }
    func setPriority(_ priority: FetchPriority, waitedSeconds: Double) {
        sink.priority.store(priority.rawValue, ordering: .relaxed)
        inner.setPriority(priority, waitedSeconds: waitedSeconds)
    }
}

/// Passes one transfer's callbacks on, counting on the way (callbacks of one transfer come in
/// order on the source's thread; the counters are atomics because the status page reads them).
private final class TrackedSink: FetchSink, FetchRetryObserving, Sendable {
    let request: FetchRequest
    let sink: FetchSink
    let tracker: FetchTracker
    let started: Date
    private let bodyStart: ManagedAtomic<Int64>
    private let received = ManagedAtomic<Int64>(0)
    let priority: ManagedAtomic<Int>

    init(request: FetchRequest, sink: FetchSink, tracker: FetchTracker) {
        self.request = request
        self.sink = sink
        self.tracker = tracker
        started = tracker.clock()
        bodyStart = ManagedAtomic(request.start)
        priority = ManagedAtomic(request.priority.rawValue)
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        bodyStart.store(head.bodyStart, ordering: .relaxed)
        tracker.metrics.noteOriginAnswer(status: head.status)
        tracker.metrics.originTraffic.noteRequest(url: request.url)
        return sink.fetchDidReceiveHead(head)
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        received.wrappingIncrement(by: Int64(bytes.count), ordering: .relaxed)
        tracker.metrics.noteOriginBytes(Int64(bytes.count))
        return sink.fetchDidReceive(bytes)
    }

    /// Forwarded as an offer, so the engine's writer can still pause the transfer; bytes count
    /// once taken (a paused offer comes again), also with `.stop` (a fetch's last bytes).
    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow {
        let flow = sink.fetchOffer(bytes)
        if flow != .pause {
            received.wrappingIncrement(by: Int64(bytes.count), ordering: .relaxed)
            tracker.metrics.noteOriginBytes(Int64(bytes.count))
        }
        return flow
    }

    func fetchDidDrain() { sink.fetchDidDrain() }

    func fetchDidFinish(_ error: FetchError?) {
        tracker.ended(self)
        switch error {
        case let .http(status, _)?:
            tracker.metrics.noteOriginAnswer(status: status)
            tracker.metrics.originTraffic.noteRequest(url: request.url)
        case .network?, .timeout?, .invalidResponse?, .refusedAddress?:
            tracker.metrics.noteOriginFailure()
            tracker.metrics.originTraffic.noteRequest(url: request.url)
        case .remoteChanged?, .cancelled?, .budgetSpent?, nil: break   // budgetSpent: never sent
        }
        tracker.metrics.originTraffic.noteBytes(url: request.url, received.load(ordering: .relaxed))
        sink.fetchDidFinish(error)
    }

    func fetchWillRetry() {
        tracker.metrics.noteRetry()
        tracker.metrics.originTraffic.noteRequest(url: request.url)
        (sink as? FetchRetryObserving)?.fetchWillRetry()
    }

    func snapshot(now: Date) -> FetchInFlight {
        let bytes = received.load(ordering: .relaxed)
        let age = max(0, now.timeIntervalSince(started))
        return FetchInFlight(url: request.url, start: request.start, end: request.end,
                             position: bodyStart.load(ordering: .relaxed) + bytes, bytes: bytes,
                             ageSeconds: age, bytesPerSecond: age > 0 ? Double(bytes) / age : 0,
                             priority: FetchPriority(rawValue: priority.load(ordering: .relaxed)) ?? .waiting)
    }
}
