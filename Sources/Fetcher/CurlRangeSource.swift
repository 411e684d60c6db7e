import CacheCore
import Dispatch
import Logging

/// `RangeSource` over the libcurl multi interface: one thread, one multi handle, pooled
/// connections, HTTP/2 multiplexing when the origin offers it over TLS.
///
/// Implements the contract documented on `RangeSource` (one head, one continuous body, errors
/// without head, resume with If-Range, retries). The mechanics live in `CurlMultiLoop` (thread,
/// curl) and `TransferState` (what each answer means).
public final class CurlRangeSource: RangeSource, Sendable {
    public let configuration: FetcherConfiguration
    private let loop: CurlMultiLoop

    public init(configuration: FetcherConfiguration, logger: Logger) {
        self.configuration = configuration
        loop = CurlMultiLoop(configuration: configuration, logger: logger)
    }

    deinit { loop.shutdown() }

    /// The most transfers libcurl held at once (tests: the connection cap bounds them).
    var peakAttachedTransfers: Int { loop.peakAttached }

    public func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        guard let id = loop.submit(request, sink: sink) else {
            // Shut down: still exactly one fetchDidFinish, but not on the caller's stack (on the
            // timer thread: the engine that called is stopping, its pool may be gone).
            configuration.clock.scheduler.after(.zero) { sink.fetchDidFinish(.cancelled) }
            return CurlFetchHandle(id: 0, loop: nil)
        }
        return CurlFetchHandle(id: id, loop: loop)
    }

    /// Stops every transfer (each finishes with `.cancelled`) and the loop thread.
    /// Later `start` calls finish at once with `.cancelled`.
    public func shutdown() { loop.shutdown() }
}

/// Cancels or resumes one transfer of a `CurlRangeSource`, from any thread.
struct CurlFetchHandle: FetchHandle {
    let id: Int
    let loop: CurlMultiLoop?

    func cancel() { loop?.cancel(id) }
    func resume() { loop?.resume(id) }
    func setPriority(_ priority: FetchPriority, waitedSeconds: Double) {
        loop?.setPriority(id, priority, waitedSeconds: waitedSeconds)
    }
}
