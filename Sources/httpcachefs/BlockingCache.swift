import CacheCore
import Foundation

/// Synchronous forms of the engine's completion-based calls, for the CLI's dedicated threads
/// (`onDedicatedThread`) only: they block the calling thread until the engine answers, which
/// would starve Swift's cooperative pool if called from a task.
private final class Waiter<T>: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private var result: Result<T, CacheError>?

    func complete(_ r: Result<T, CacheError>) {
        result = r
        semaphore.signal()
    }

    func wait() throws -> T {
        semaphore.wait()
        return try result!.get()
    }
}

extension CacheEngine {
    func openBlocking(url: String) throws -> EntryInfo {
        let waiter = Waiter<EntryInfo>()
        open(url: url) { waiter.complete($0) }
        return try waiter.wait()
    }
}

extension CacheReader {
    func readBlocking(offset: Int64, length: Int) throws -> [UInt8] {
        let waiter = Waiter<[UInt8]>()
        read(offset: offset, length: length) { waiter.complete($0) }
        return try waiter.wait()
    }
}

/// Reads `[start, end)` of an entry through a reader in chunks, handing each to `consume`. The
/// reader is bound to one version: if the origin's file changes between two chunks, the next read
/// fails (`CacheError.remoteChanged`) and the stream stops there, never splicing two versions.
enum RangeStreamer {
    static let chunkSize = 1 << 20

    enum Stop: Equatable { case end, consumerStopped }

    /// Returns the bytes handed over, and why the stream stopped. `end == nil` reads until the
    /// cache reports the end of the file. `consume` returns false to stop early.
    @discardableResult
    static func stream(reader: CacheReader, start: Int64, end: Int64?, chunkSize: Int = chunkSize,
                       consume: ([UInt8]) throws -> Bool) throws -> (bytes: Int64, stop: Stop) {
        var offset = start
        while end.map({ offset < $0 }) ?? true {
            let want = end.map { Int(min(Int64(chunkSize), $0 - offset)) } ?? chunkSize
            let bytes = try reader.readBlocking(offset: offset, length: want)
            if bytes.isEmpty {
                if let end, let length = reader.entry.length, end > length {
                    throw CacheError.rangeNotSatisfiable(url: reader.entry.url, length: length)
                }
                break
            }
            offset += Int64(bytes.count)
            if try !consume(bytes) { return (offset - start, .consumerStopped) }
        }
        return (offset - start, .end)
    }
}
