import Foundation

/// Requests whose answer is a small document read whole: a WebDAV `PROPFIND` (the listing of a
/// folder that lists on no GET). They go through the engine's source, so they obey the same
/// address policy, credentials, retries, bandwidth limit and connection cap as every other
/// request, and show among its transfers. Multistatus answers are kept (`KeptDocuments`) when
/// the caller gives a max age, and then live as a cached GET listing does: answered from the
/// cache while younger than that, and served as they are while the origin is down.
extension CacheEngine {
    /// The body of `request`'s answer, at most `limit` bytes (more is `.badResponse`).
    /// - Parameter maxAge: keep the answer, and answer from the kept one when it is younger than
    ///   this (0: ask the origin now), or when the origin is down or cannot be reached. nil:
    ///   neither kept nor looked up.
    public func fetchDocument(_ request: FetchRequest, limit: Int, maxAge: TimeInterval? = nil,
                              completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        guard let maxAge, let method = request.method, let key = try? key(for: request.url) else {
            _ = core.fetches.source.start(request, sink: DocumentSink(url: request.url, limit: limit, completion: completion))
            return
        }
        let kept = keptDocuments.load(method: method, key: key)
        if let kept, maxAge > 0, core.configuration.clock().timeIntervalSince(kept.storedAt) < maxAge {
            return completion(.success(kept.body))
        }
        let url = DisplayURL.redacted(request.url)
        if let kept, isOriginDown(url: request.url) {
            logger.info("origin down: serving the kept \(method) answer", metadata: ["url": "\(url)"])
            return completion(.success(kept.body))
        }
        let store = keptDocuments
        let logger = self.logger, clock = core.configuration.clock
        let sink = DocumentSink(url: request.url, limit: limit) { result in
            switch result {
            case let .success(body):
                // Only a multistatus is worth keeping (the fetcher tells no 207 from a 200: a
                // server answering PROPFIND with a page must not replace a good listing).
                if Self.looksLikeMultistatus(body) {
                    do { try store.store(method: method, key: key, body: body, at: clock()) } catch {
                        logger.warning("cannot keep a listing for offline use", metadata: ["url": "\(url)", "error": "\(error)"])
                    }
                }
                completion(result)
            case let .failure(error):
                if let kept, Self.originAway(error) {
                    logger.warning("origin unavailable; serving the kept \(method) answer", metadata: [
                        "url": "\(url)", "error": "\(error)"])
                    return completion(.success(kept.body))
                }
                completion(result)
            }
        }
        _ = core.fetches.source.start(request, sink: sink)
    }

    /// True when `url`'s last answer carried a `DAV:` header (its origin speaks WebDAV).
    public func answeredDAV(url: String) -> Bool { (try? key(for: url)).map(core.versions.davAnswers.answered) ?? false }

    /// True when a kept answer to `request` (a document request) is on disk.
    public func hasKeptDocument(_ request: FetchRequest) -> Bool {
        guard let method = request.method, let key = try? key(for: request.url) else { return false }
        return keptDocuments.load(method: method, key: key) != nil
    }

    /// The origin could not be asked (rather than answering no): a kept answer stands in.
    static func originAway(_ error: CacheError) -> Bool {
        switch error {
        case .unreachable, .timeout, .budgetSpent: return true
        case let .httpStatus(_, status): return status >= 500
        default: return false
        }
    }

    /// A WebDAV multistatus names its root element within its first bytes.
    static func looksLikeMultistatus(_ body: [UInt8]) -> Bool {
        String(decoding: body.prefix(1024), as: UTF8.self).lowercased().contains("multistatus")
    }
}

/// Collects one answer in memory, up to a limit.
public final class DocumentSink: FetchSink, Sendable {
    private let url: String
    private let limit: Int
    private let completion: @Sendable (Result<[UInt8], CacheError>) -> Void
    // Locked: the source calls in order, but not always on one thread.
    private struct Collected {
        var bytes: [UInt8] = []
        var tooLarge = false
    }
    private let collected = LockedValue(Collected())

    public init(url: String, limit: Int, completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        self.url = url
        self.limit = limit
        self.completion = completion
    }

    public func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        if let total = head.totalLength, total > Int64(limit) {
            collected.withLock { $0.tooLarge = true }
            return false
        }
        return true
    }

    public func fetchDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        collected.withLock { c in
            guard c.bytes.count + chunk.count <= limit else { c.tooLarge = true; return false }
            c.bytes.append(contentsOf: chunk)
            return true
        }
    }

    public func fetchDidFinish(_ error: FetchError?) {
        let (bytes, tooLarge) = collected.withLock { ($0.bytes, $0.tooLarge) }
        if tooLarge {
            completion(.failure(.badResponse(url: url, message: "an answer larger than \(limit) bytes")))
        } else if let error {
            completion(.failure(CacheError(error, url: url)))
        } else {
            completion(.success(bytes))
        }
    }
}
