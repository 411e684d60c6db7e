import Foundation

/// Everything the engine holds in memory about one entry. Guarded by its shard's lock.
final class EntryState {
    /// Index row id; slice file names use it. -1 until the first successful answer.
    var id: Int64
    var info: EntryInfo
    /// Bytes of `info.generation` that are on disk.
    var coverage = RangeSet()
    var inflight = InFlightTable()
    var waiters: [Waiter] = []
    /// Bytes present per slice, and when each slice was last read or written (LRU).
    var sliceBytes: [Int64: Int64] = [:]
    var sliceAccess: [Int64: Double] = [:]
    /// Slices that must not be evicted now (a read or a write is using them).
    var pins: [Int64: Int] = [:]
    /// Opens waiting for the metadata probe; nil when no probe is running.
    var pendingOpens: [@Sendable (Result<EntryInfo, CacheError>) -> Void]?
    var hits: Int64 = 0
    var misses: Int64 = 0
    var bytesFromCache: Int64 = 0
    var bytesFromOrigin: Int64 = 0
    var lastAccess: Double
    var recentErrors: [String] = []

    init(id: Int64, info: EntryInfo, lastAccess: Double) {
        self.id = id
        self.info = info
        self.lastAccess = lastAccess
    }

    var isPersisted: Bool { id >= 0 }

    func pin(_ slices: ClosedRange<Int64>) { for s in slices { pins[s, default: 0] += 1 } }

    func unpin(_ slices: ClosedRange<Int64>) {
        for s in slices {
            let n = (pins[s] ?? 1) - 1
            pins[s] = n > 0 ? n : nil
        }
    }

    func noteError(_ message: String) {
        recentErrors.append("\(ISO8601DateFormatter().string(from: Date())) \(message)")
        if recentErrors.count > 10 { recentErrors.removeFirst(recentErrors.count - 10) }
    }

    func row() -> CacheIndex.EntryRow {
        CacheIndex.EntryRow(id: id, key: info.key.string, url: info.url, finalURL: info.finalURL, length: info.length,
                            contentType: info.contentType, etag: info.etag, lastModified: info.lastModified,
                            acceptsRanges: info.acceptsRanges, generation: info.generation,
                            validatedAt: info.validatedAt.timeIntervalSince1970, lastAccess: lastAccess, hits: hits,
                            misses: misses, bytesFromCache: bytesFromCache, bytesFromOrigin: bytesFromOrigin,
                            lastError: recentErrors.last)
    }
}

/// A read waiting for bytes to land.
struct Waiter {
    var reader: Int
    var range: Range<Int64>
    var deadline: Double
    var replans: Int = 0
    var completion: @Sendable (Result<[UInt8], CacheError>) -> Void
}

/// Per-reader state: sequential detection and read-ahead window. Guarded by the entry's shard lock.
final class ReaderState: @unchecked Sendable {
    let id: Int
    private let lock = NSLock()
    private var _entry: EntryInfo
    var lastEnd: Int64 = -1
    var readAhead: Int64
    var closed = false

    init(id: Int, entry: EntryInfo, initialReadAhead: Int64) {
        self.id = id
        self._entry = entry
        self.readAhead = initialReadAhead
    }

    var entry: EntryInfo {
        get { lock.lock(); defer { lock.unlock() }; return _entry }
        set { lock.lock(); _entry = newValue; lock.unlock() }
    }
}

/// One lock domain of the engine's per-entry state.
final class Shard: @unchecked Sendable {
    let lock = NSLock()
    var entries: [CacheKey: EntryState] = [:]   // guarded by lock

    @inline(__always)
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
