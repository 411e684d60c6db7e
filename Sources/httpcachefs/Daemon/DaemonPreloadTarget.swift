import CacheCore
import Foundation
import FuseMount

/// `preload --recursive` while a daemon holds the cache: listings' GETs and the files' ranges go
/// through its proxy (so its cache gets them), pins through its control requests, and a WebDAV
/// PROPFIND straight to the origin with this process's fetcher (its answer is never cached).
struct DaemonPreloadTarget: LibraryPreload.Target {
    let daemon: DaemonClient
    let held: HeldCache
    /// The daemon's cache as its index last showed it, with the cap it recorded.
    let snapshot: DaemonListing

    var transport: ListingTransport { DaemonTransport(daemon: daemon) }
    var capacity: Int64 { snapshot.usage.capacity }
    var via: String { " through the running daemon (process \(daemon.pid))" }

    func length(of file: LibraryPreload.File) async throws -> Int64? {
        if let size = file.size { return size }
        let daemon = daemon
        return try await onBlockingPool { try daemon.head(url: file.url, exact: true).length }
    }

    func cachedBytes(url: String, in ranges: [Range<Int64>]) -> Int64 {
        guard let status = snapshot.status(url: url) else { return 0 }
        return ranges.reduce(0) { $0 + CacheCommand.Export.coveredBytes(status.cachedRanges, within: $1) }
    }

    func pin(url: String, ranges: [Range<Int64>], limit: Int64) async throws -> Int64 {
        let held = held
        let query = [("url", url), ("limit", "\(limit)")] + ranges.map { ("range", "\($0.lowerBound)-\($0.upperBound)") }
        let answer = try await onBlockingPool { try held.control("pin", query: query) }
        // "pinned <added> <total>"
        return answer.lines.first.flatMap { line in
            let fields = line.split(separator: "\t")
            return fields.count >= 2 && fields[0] == "pinned" ? Int64(fields[1]) : nil
        } ?? 0
    }

    func fetch(url: String, range: Range<Int64>, scanShare: Bool, progress: @escaping @Sendable (Int64) -> Void) async throws {
        let daemon = daemon
        let end: Int64? = range.upperBound == .max ? nil : range.upperBound
        _ = try await onBlockingPool {
            try daemon.stream(url: url, start: range.lowerBound, end: end, exact: true, scanShare: scanShare) { chunk in
                progress(Int64(chunk.count))
                return true
            }
        }
    }
}

/// Listings through a daemon: GET through its proxy, PROPFIND straight to the origin.
struct DaemonTransport: ListingTransport {
    let daemon: DaemonClient

    func fetchPage(url: String, limit: Int, maxAge: TimeInterval,
                   completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        let daemon = daemon
        // A blocking stream from the daemon: on the command's pool (it waits for another
        // process, never for a job of that pool).
        BlockingPool.shared.submit {
            let body = Collected(limit: limit)
            do {
                try daemon.stream(url: url, end: nil) { body.append($0) }
                completion(body.tooLarge
                    ? .failure(.badResponse(url: url, message: "a directory listing larger than \(limit) bytes"))
                    : .success(body.bytes))
            } catch let error as CacheError {
                completion(.failure(error))
            } catch {
                completion(.failure(.badResponse(url: url, message: "\(error)")))
            }
        }
    }

    func fetchDocument(_ request: FetchRequest, limit: Int, maxAge: TimeInterval,
                       completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        _ = daemon.source.start(request, sink: DocumentSink(url: request.url, limit: limit, completion: completion))
    }

    /// A listing's bytes: appended on the stream's thread, read after it ended.
    private final class Collected: Sendable {
        let limit: Int
        private let collected = LockedValue<(bytes: [UInt8], tooLarge: Bool)>(([], false))
        init(limit: Int) { self.limit = limit }
        var bytes: [UInt8] { collected.withLock { $0.bytes } }
        var tooLarge: Bool { collected.withLock { $0.tooLarge } }
        func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
            collected.withLock { c in
                guard c.bytes.count + chunk.count <= limit else { c.tooLarge = true; return false }
                c.bytes.append(contentsOf: chunk)
                return true
            }
        }
    }
}
