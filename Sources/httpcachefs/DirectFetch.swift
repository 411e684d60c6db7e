import CacheCore
import Foundation

/// One ranged GET straight to the origin, bypassing the cache, collected in memory. Used by
/// `cache verify --remote` to compare cached bytes with what the origin serves today, so it is
/// only for small ranges.
final class DirectFetch: FetchSink, @unchecked Sendable {
    struct Result {
        var head: ResponseHead
        var bytes: [UInt8]
    }

    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private let wantStart: Int64
    private let wantCount: Int
    /// Bytes of a 200 (range ignored) to skip before `wantStart`; refused beyond this.
    private let maxSkip: Int64 = 64 << 20
    private var head: ResponseHead?
    private var position: Int64 = 0
    private var bytes: [UInt8] = []
    private var error: FetchError?
    private var refusal: String?

    private init(start: Int64, count: Int) {
        wantStart = start
        wantCount = count
        bytes.reserveCapacity(count)
    }

    /// Fetches `[start, start+count)` of `url` through `source`, waiting at most `timeout`.
    /// Blocks the calling thread: dedicated threads only.
    static func fetch(url: String, start: Int64, count: Int, source: RangeSource,
                      timeout: TimeInterval) throws -> Result {
        let sink = DirectFetch(start: start, count: count)
        let handle = source.start(FetchRequest(url: url, start: start, end: start + Int64(count)), sink: sink)
        if sink.done.wait(timeout: .now() + timeout) == .timedOut {
            handle.cancel()
            sink.done.wait()
            throw CacheError.timeout(url: url)
        }
        return try sink.result(url: url)
    }

    private func result(url: String) throws -> Result {
        lock.lock()
        defer { lock.unlock() }
        if let refusal { throw CommandFailure(refusal) }
        if let error, !(error == .cancelled && bytes.count == wantCount) { throw CacheError(error, url: url) }
        guard let head else { throw CacheError.badResponse(url: url, message: "no response head") }
        return Result(head: head, bytes: bytes)
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        self.head = head
        position = head.bodyStart
        if head.bodyStart > wantStart || wantStart - head.bodyStart > maxSkip {
            refusal = "the origin ignored the range request for \(head.finalURL); cannot compare offset \(wantStart)"
            return false
        }
        return true
    }

    func fetchDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        var slice = chunk[...]
        if position < wantStart {
            let skip = Int(min(Int64(slice.count), wantStart - position))
            slice = slice.dropFirst(skip)
            position += Int64(skip)
        }
        let take = min(slice.count, wantCount - bytes.count)
        bytes.append(contentsOf: slice.prefix(take))
        position += Int64(take)
        return bytes.count < wantCount
    }

    func fetchDidFinish(_ error: FetchError?) {
        lock.lock()
        self.error = error
        lock.unlock()
        done.signal()
    }
}
