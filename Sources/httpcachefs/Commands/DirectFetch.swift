import CacheCore
import Foundation

/// One ranged GET straight to the origin, bypassing the cache, collected in memory. Used by
/// `cache verify --remote` to compare cached bytes with what the origin serves today, so it is
/// only for small ranges.
final class DirectFetch: FetchSink, Sendable {
    struct Result {
        var head: ResponseHead
        var bytes: [UInt8]
    }

    /// What arrived so far (on the source's thread).
    private struct State {
        var head: ResponseHead?
        var position: Int64 = 0
        var bytes: [UInt8] = []
        var error: FetchError?
        var refusal: String?
    }

    private let state: LockedValue<State>
    private let done = DispatchSemaphore(value: 0)
    private let wantStart: Int64
    private let wantCount: Int
    /// Bytes of a 200 (range ignored) to skip before `wantStart`; refused beyond this.
    private let maxSkip: Int64 = 64 << 20

    private init(start: Int64, count: Int) {
        wantStart = start
        wantCount = count
        var initial = State()
        initial.bytes.reserveCapacity(count)
        state = LockedValue(initial)
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
        let s = state.withLock { $0 }
        if let refusal = s.refusal { throw CommandFailure(refusal) }
        if let error = s.error, !(error == .cancelled && s.bytes.count == wantCount) { throw CacheError(error, url: url) }
        guard let head = s.head else { throw CacheError.badResponse(url: url, message: "no response head") }
        return Result(head: head, bytes: s.bytes)
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        state.withLock { s in
            s.head = head
            s.position = head.bodyStart
            if head.bodyStart > wantStart || wantStart - head.bodyStart > maxSkip {
                s.refusal = "the origin ignored the range request for \(head.finalURL); cannot compare offset \(wantStart)"
                return false
            }
            return true
        }
    }

    func fetchDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        state.withLock { s in
            var slice = chunk[...]
            if s.position < wantStart {
                let skip = Int(min(Int64(slice.count), wantStart - s.position))
                slice = slice.dropFirst(skip)
                s.position += Int64(skip)
            }
            let take = min(slice.count, wantCount - s.bytes.count)
            s.bytes.append(contentsOf: slice.prefix(take))
            s.position += Int64(take)
            return s.bytes.count < wantCount
        }
    }

    func fetchDidFinish(_ error: FetchError?) {
        state.withLock { $0.error = error }
        done.signal()
    }
}
