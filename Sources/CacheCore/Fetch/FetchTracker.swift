import Atomics
import Foundation

/// A sink that wants to hear of each retried attempt of its transfer (sources call it; the
/// retried attempt's bytes never reach the sink, so it cannot tell otherwise).
public protocol FetchRetryObserving: AnyObject {
    func fetchWillRetry()
}

/// The engine's source, seen from outside: wraps the real `RangeSource` so that every transfer
/// the engine starts is counted (answer class, body bytes, retries) and listed while it runs
/// (URL, range, bytes so far, age) for the status page, without a line in the fetch path.
final class FetchTracker: RangeSource, Sendable {
    let inner: RangeSource
    let metrics: CacheMetrics
    /// When transfers started and how old they are now (the engine's wall clock).
    let clock: @Sendable () -> Date
    private let running = LockedValue<[ObjectIdentifier: TrackedSink]>([:])

    init(_ inner: RangeSource, metrics: CacheMetrics, clock: @escaping @Sendable () -> Date = EngineClock.system.wall) {
        self.inner = inner
        self.metrics = metrics
        self.clock = clock
    }

    func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        let tracked = TrackedSink(request: request, sink: sink, tracker: self)
        running.withLock { $0[ObjectIdentifier(tracked)] = tracked }
        return TrackedHandle(inner: inner.start(request, sink: tracked), sink: tracked)
    }

    fileprivate func ended(_ sink: TrackedSink) {
        running.withLock { $0[ObjectIdentifier(sink)] = nil }
    }

    /// The transfers running now, oldest first.
    func inFlight(now: Date? = nil) -> [FetchInFlight] {
        let now = now ?? clock()
        let sinks = running.withLock { Array($0.values) }
        return sinks.map { $0.snapshot(now: now) }.sorted { $0.ageSeconds > $1.ageSeconds }
    }

    var inFlightCount: Int { running.withLock { $0.count } }
}

/// One transfer in flight, for the status document.
public struct FetchInFlight: Sendable, Codable, Equatable {
    public var url: String
    /// First byte asked for, and one past the last (nil: to the end of the file).
    public var start: Int64
    public var end: Int64?
    /// The next byte to arrive: bytes `start..<position` are here.
    public var position: Int64
    public var bytes: Int64
    public var ageSeconds: Double
    /// Average since the transfer started.
    public var bytesPerSecond: Double
    /// Its class now: a read waits on it, read-ahead (near or far), or preload.
    public var priority: FetchPriority
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
        tracker.metrics.noteOrigin(OriginClass(status: head.status))
        return sink.fetchDidReceiveHead(head)
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        received.wrappingIncrement(by: Int64(bytes.count), ordering: .relaxed)
        tracker.metrics.originBytes.add(Int64(bytes.count))
        return sink.fetchDidReceive(bytes)
    }

    /// Forwarded as an offer, so the engine's writer can still pause the transfer; bytes count
    /// once taken (a paused offer comes again), also with `.stop` (a fetch's last bytes).
    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow {
        let flow = sink.fetchOffer(bytes)
        if flow != .pause {
            received.wrappingIncrement(by: Int64(bytes.count), ordering: .relaxed)
            tracker.metrics.originBytes.add(Int64(bytes.count))
        }
        return flow
    }

    func fetchDidDrain() { sink.fetchDidDrain() }

    func fetchDidFinish(_ error: FetchError?) {
        tracker.ended(self)
        switch error {
        case let .http(status, _)?: tracker.metrics.noteOrigin(OriginClass(status: status))
        case .network?, .timeout?, .invalidResponse?, .refusedAddress?: tracker.metrics.noteOrigin(.error)
        case .remoteChanged?, .cancelled?, nil: break
        }
        sink.fetchDidFinish(error)
    }

    func fetchWillRetry() {
        tracker.metrics.retries.add(1)
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
