import CacheCore
import Foundation

/// A source the test drives by hand: a transfer does nothing until the test sends its head, its
/// chunks and its end, on the test's own thread. Nothing happens between two steps, so races can
/// be replayed in one exact order.
public final class GatedSource: RangeSource, @unchecked Sendable {
    public final class Transfer: FetchHandle, @unchecked Sendable {
        public let request: FetchRequest
        public let sink: FetchSink
        private let lock = NSLock()
        private var cancelled = false
        private var finished = false

        init(request: FetchRequest, sink: FetchSink) {
            self.request = request
            self.sink = sink
        }

        private var resumes = 0

        public func cancel() { lock.lock(); cancelled = true; lock.unlock() }
        public var isCancelled: Bool { lock.lock(); defer { lock.unlock() }; return cancelled }
        /// The sink asked to be offered bytes again after a `.pause`.
        public func resume() { lock.lock(); resumes += 1; lock.unlock() }
        public var resumeCount: Int { lock.lock(); defer { lock.unlock() }; return resumes }

        private var classes: [FetchPriority] = []
        /// The classes the engine gave it after it started, in order.
        public func setPriority(_ priority: FetchPriority, waitedSeconds: Double) { lock.lock(); classes.append(priority); lock.unlock() }
        public var priorities: [FetchPriority] { lock.lock(); defer { lock.unlock() }; return classes }

        /// A 206 for the request's range of a file of `length` bytes.
        @discardableResult
        public func partial(length: Int64, etag: String = "\"a\"") -> Bool {
            sink.fetchDidReceiveHead(ResponseHead(status: 206, finalURL: request.url, bodyStart: request.start,
                                                  totalLength: length, etag: etag, acceptsRanges: true))
        }

        @discardableResult
        public func send(_ bytes: ArraySlice<UInt8>) -> Bool {
            bytes.withUnsafeBytes { sink.fetchDidReceive($0) }
        }

        /// Offers bytes as a source that can pause does (the sink may answer `.pause`); unless
        /// `more`, the source then has nothing more for now (`fetchDidDrain`).
        public func offer(_ bytes: ArraySlice<UInt8>, more: Bool = false) -> FetchFlow {
            let flow = bytes.withUnsafeBytes { sink.fetchOffer($0) }
            if !more { sink.fetchDidDrain() }
            return flow
        }

        /// Ends the transfer (once: a second call does nothing).
        public func finish(_ error: FetchError? = nil) {
            lock.lock()
            let first = !finished
            finished = true
            lock.unlock()
            if first { sink.fetchDidFinish(error) }
        }
    }

    private let lock = NSLock()
    private var started: [Transfer] = []

    public init() {}

    public func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        let t = Transfer(request: request, sink: sink)
        lock.lock(); started.append(t); lock.unlock()
        return t
    }

    public var transfers: [Transfer] { lock.lock(); defer { lock.unlock() }; return started }

    /// Ends every transfer still open, as a source does at shutdown.
    public func finishAll() { for t in transfers { t.finish(.cancelled) } }
}
