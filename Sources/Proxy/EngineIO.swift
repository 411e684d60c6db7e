import CacheCore
import Dispatch

/// Async wrappers over the engine's completion API that never do disk I/O on Swift's
/// cooperative pool: a cache hit is read from disk on the calling thread, so the call itself is
/// made from a GCD queue and only the continuation resumes on the pool.
enum EngineIO {
    private static let queue = DispatchQueue(label: "httpcachefs.proxy.engine-io", attributes: .concurrent)

    static func read(_ reader: CacheReader, offset: Int64, length: Int) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { cont in
            queue.async {
                reader.read(offset: offset, length: length) { cont.resume(with: $0) }
            }
        }
    }

    static func open(_ engine: CacheEngine, url: String) async throws -> EntryInfo {
        try await withCheckedThrowingContinuation { cont in
            queue.async {
                engine.open(url: url) { cont.resume(with: $0) }
            }
        }
    }

    static func remove(_ engine: CacheEngine, url: String) async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            queue.async {
                try? engine.remove(url: url)
                cont.resume()
            }
        }
    }
}
