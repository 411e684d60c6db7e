import Foundation

/// Requests whose answer is a small document read whole and never cached: a WebDAV `PROPFIND`
/// (the listing of a folder that lists on no GET). They go through the engine's source, so they
/// obey the same address policy, credentials, retries, bandwidth limit and connection cap as every
/// other request, and show among its transfers.
extension CacheEngine {
    /// The body of `request`'s answer, at most `limit` bytes (more is `.badResponse`).
    public func fetchDocument(_ request: FetchRequest, limit: Int,
                              completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        let sink = DocumentSink(url: request.url, limit: limit, completion: completion)
        _ = tracker.start(request, sink: sink)
    }
}

/// Collects one answer in memory, up to a limit.
public final class DocumentSink: FetchSink, @unchecked Sendable {
    private let url: String
    private let limit: Int
    private let completion: @Sendable (Result<[UInt8], CacheError>) -> Void
    private let lock = NSLock()
    // Guarded by `lock` (the source calls in order, but not always on one thread).
    private var bytes: [UInt8] = []
    private var tooLarge = false

    public init(url: String, limit: Int, completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        self.url = url
        self.limit = limit
        self.completion = completion
    }

    public func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        if let total = head.totalLength, total > Int64(limit) {
            lock.withLock { tooLarge = true }
            return false
        }
        return true
    }

    public func fetchDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        lock.withLock {
            guard bytes.count + chunk.count <= limit else { tooLarge = true; return false }
            bytes.append(contentsOf: chunk)
            return true
        }
    }

    public func fetchDidFinish(_ error: FetchError?) {
        let (bytes, tooLarge) = lock.withLock { (self.bytes, self.tooLarge) }
        if tooLarge {
            completion(.failure(.badResponse(url: url, message: "an answer larger than \(limit) bytes")))
        } else if let error {
            completion(.failure(CacheError(error, url: url)))
        } else {
            completion(.success(bytes))
        }
    }
}
