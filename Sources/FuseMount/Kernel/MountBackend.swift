import CacheCore
import Foundation

/// What the file system needs from the cache. `EngineBackend` adapts `CacheEngine`; tests plug
/// in fakes to drive the FUSE layer without a network.
///
/// Completions may run on any thread (even inline, before the call returns), never while the
/// caller holds a lock of its own.
public protocol MountBackend: AnyObject, ListingTransport {
    /// Metadata, revalidated with the origin when stale. A changed remote file gets a new generation.
    func open(url: String, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void)
    func makeReader(for entry: EntryInfo) -> MountReader
    /// A reader for a process of `readerClass` (`ReaderClass`: its read-ahead and the class of
    /// its fetches).
    func makeReader(for entry: EntryInfo, readerClass: ReaderClass) -> MountReader
    var usage: CacheUsage { get }
    /// Called whenever an entry is found to have changed remotely.
    func onRemoteChange(_ handler: @escaping @Sendable (EntryInfo) -> Void)
    /// Metadata, revalidated when older than `maxAge` (a listing with its own TTL).
    func open(url: String, maxAge: TimeInterval, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void)
    /// The same, for a body read whole up to `limit` bytes (a listing): one without a length
    /// fails, and its download stops, once it passes `limit`.
    func open(url: String, maxAge: TimeInterval, limit: Int,
              completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void)
    /// The whole body of a small resource (directory listings), at most `limit` bytes, revalidated
    /// when older than `maxAge`.
    func fetchWhole(url: String, limit: Int, maxAge: TimeInterval,
                    completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void)
    /// Metadata for `stat`, which reads no bytes: when the origin must be asked, it is asked for
    /// as little as possible (the first open brings the file's first bytes along).
    func lookUp(url: String, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void)
    /// A file's open from the mount: `open(url:)` with `takeFirstBytes` (a player's open), else
    /// `lookUp(url:)`. `key`: `url`'s key as `cacheKey(for:)` gave it (the mount keeps it per
    /// inode). `answerFreshInline`: a fresh entry is answered before the call returns, on the
    /// caller's thread (the FUSE loop, which then answers the open without a hand-off).
    func openFile(url: String, key: CacheKey?, takeFirstBytes: Bool, answerFreshInline: Bool,
                  completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void)
    /// `url`'s cache key, worked out once for the mount to keep; nil when the backend keys
    /// nothing (test fakes) or the URL cannot be cached.
    func cacheKey(for url: String) -> CacheKey?
    /// Loads these entries into memory ahead of their opens, in the background, if the backend
    /// keeps entries out of memory (`FolderScanAhead`: a folder opened file after file).
    func loadAhead(keys: [CacheKey])
    /// How long a read may wait on the network (`--read-timeout`); a directory listing is held to
    /// it as a whole. nil: no limit of the backend's own.
    var readTimeout: TimeInterval? { get }
    /// True while the origin of `url` is known to be down: what the cache answers for it now was
    /// not asked of the origin, however small the max age given.
    func isOriginDown(url: String) -> Bool
    /// What the cache holds of `url` (for the `user.httpcachefs.*` attributes); nil: nothing.
    func status(url: String) -> EntryStatus?
    /// The ranges of `url` kept from eviction.
    func pinnedRanges(url: String) -> [Range<Int64>]
    /// The pool for blocking I/O whose lane sends the replies spliced from data files (the
    /// engine's, so a daemon has one pool; docs/threads.md).
    var blockingIO: BlockingIOPool { get }
    /// Keeps `ranges` of `url` from eviction (within the cache's pin limit), or, with none,
    /// lets every range of it go. Blocking (it records the pins): not on the FUSE loop.
    func setPins(url: String, ranges: [Range<Int64>]) throws
}

/// One reader per open file handle: the engine does sequential detection and read-ahead per reader.
public protocol MountReader: LeaseReading {
    /// A read answered where its bytes are (the data file, or memory), for the reply to send from.
    func lease(offset: Int64, length: Int, completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void)
    /// The same read as bytes (directory listings, which are parsed).
    func read(offset: Int64, length: Int, completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void)
    func close()
    /// The reader's version whole, if all of it is cached, for the kernel to read by itself
    /// (passthrough); held until released. nil: read through `lease`.
    func wholeFile() -> WholeFile?
    /// `[offset, offset+length)` at once if this version is all cached on disk, with
    /// nothing fetched and the reader's read-ahead untouched; else nil.
    func cachedLease(offset: Int64, length: Int) -> ReadLease?
}

extension MountReader {
    /// Readers without data files (test fakes) are always read through `lease`.
    public func wholeFile() -> WholeFile? { nil }

    /// Readers without data files (test fakes) have nothing to put into the page cache.
    public func cachedLease(offset: Int64, length: Int) -> ReadLease? { nil }

    /// Readers that hold bytes in memory (test fakes) lease them as they are.
    public func lease(offset: Int64, length: Int, completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void) {
        read(offset: offset, length: length) { completion($0.map { ReadLease(bytes: $0) }) }
    }
}

extension CacheReader: MountReader {}

extension MountBackend {
    /// Default: backends without read-ahead of their own (test fakes) read alike for everyone.
    public func makeReader(for entry: EntryInfo, readerClass: ReaderClass) -> MountReader { makeReader(for: entry) }

    /// Default: backends without a freshness control of their own use their usual policy.
    public func open(url: String, maxAge: TimeInterval,
                     completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        open(url: url, completion: completion)
    }

    /// Default: backends without downloads of their own (test fakes) have nothing to stop.
    public func open(url: String, maxAge: TimeInterval, limit: Int,
                     completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        open(url: url, maxAge: maxAge, completion: completion)
    }

    /// Default: an ordinary open.
    public func lookUp(url: String, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        open(url: url, completion: completion)
    }

    public var readTimeout: TimeInterval? { nil }

    /// Default: backends without keys of their own (test fakes) open as ever, on their own threads.
    public func openFile(url: String, key: CacheKey?, takeFirstBytes: Bool, answerFreshInline: Bool,
                         completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        if takeFirstBytes { open(url: url, completion: completion) } else { lookUp(url: url, completion: completion) }
    }

    public func cacheKey(for url: String) -> CacheKey? { nil }

    /// Default: backends that hold everything in memory (test fakes) have nothing to load.
    public func loadAhead(keys: [CacheKey]) {}

    /// Default: backends without origins of their own (test fakes) never have one down.
    public func isOriginDown(url: String) -> Bool { false }

    /// Default: backends without an engine (test fakes) use the pool of readers of no engine.
    public var blockingIO: BlockingIOPool { ChunkedRead.sharedPool }

    /// Default: backends without a cache of their own (test fakes) hold nothing, pin nothing.
    public func status(url: String) -> EntryStatus? { nil }
    public func pinnedRanges(url: String) -> [Range<Int64>] { [] }
    public func setPins(url: String, ranges: [Range<Int64>]) throws {
        throw CacheError.storage(path: "", message: "this mount keeps no pins")
    }

    /// A listing's GET: `fetchWhole`.
    public func fetchPage(url: String, limit: Int, maxAge: TimeInterval,
                          completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        fetchWhole(url: url, limit: limit, maxAge: maxAge, completion: completion)
    }

    /// Default: backends without a network of their own (test fakes) know no WebDAV.
    public func fetchDocument(_ request: FetchRequest, limit: Int, maxAge: TimeInterval,
                              completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        completion(.failure(.httpStatus(url: request.url, status: 405)))
    }

    /// Default: open, then read from 0 until the end, through one reader, so listing pages are
    /// cached and revalidated like any other entry. A page whose length is past `limit` fails
    /// without a read; one without a length fails once `limit` bytes came.
    public func fetchWhole(url: String, limit: Int, maxAge: TimeInterval,
                           completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        open(url: url, maxAge: maxAge, limit: limit) { result in
            switch result {
            case let .failure(error): completion(.failure(error))
            case let .success(info):
                let tooLarge = CacheError.badResponse(url: url, message: ListingError.tooLarge(url: url, limit: limit).reason)
                // A length past the limit is refused by it, before any of its bytes are read.
                if let length = info.length, length > Int64(limit) { return completion(.failure(tooLarge)) }
                let reader = self.makeReader(for: info)
                ChunkedRead.readAll(reader, limit: limit) { result in
                    reader.close()
                    completion(result.mapError { $0 as? CacheError ?? .storage(path: "", message: "\($0)") }.flatMap { bytes in
                        bytes.map { .success($0) }
                            ?? .failure(tooLarge)
                    })
                }
            }
        }
    }
}

/// `CacheEngine` as a mount backend.
public final class EngineBackend: MountBackend {
    public let engine: CacheEngine

    public init(engine: CacheEngine) { self.engine = engine }

    public func open(url: String, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        engine.open(url: url, completion: completion)
    }
    public func open(url: String, maxAge: TimeInterval,
                     completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        engine.open(url: url, maxAge: maxAge, completion: completion)
    }
    public func open(url: String, maxAge: TimeInterval, limit: Int,
                     completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        engine.open(url: url, maxAge: maxAge, unknownLengthLimit: Int64(limit), completion: completion)
    }
    /// A one-byte probe instead of the usual 256 KiB: `ls -la` of a large listing without sizes
    /// must not download the start of every file.
    public func lookUp(url: String, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        engine.open(url: url, takeFirstBytes: false, completion: completion)
    }
    public func openFile(url: String, key: CacheKey?, takeFirstBytes: Bool, answerFreshInline: Bool,
                         completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        engine.open(url: url, key: key, takeFirstBytes: takeFirstBytes, answerFreshInline: answerFreshInline, completion: completion)
    }
    public func cacheKey(for url: String) -> CacheKey? { try? engine.key(for: url) }
    public func loadAhead(keys: [CacheKey]) { engine.loadAhead(keys) }
    public var readTimeout: TimeInterval? { engine.configuration.readTimeout }
    public var blockingIO: BlockingIOPool { engine.blockingIO }
    public func isOriginDown(url: String) -> Bool { engine.isOriginDown(url: url) }
    public func fetchDocument(_ request: FetchRequest, limit: Int, maxAge: TimeInterval,
                              completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        engine.fetchDocument(request, limit: limit, maxAge: maxAge, completion: completion)
    }
    public func hasKeptListing(_ request: FetchRequest) -> Bool { engine.hasKeptDocument(request) }
    public func answeredDAV(url: String) -> Bool { engine.answeredDAV(url: url) }
    public func makeReader(for entry: EntryInfo) -> MountReader { engine.makeReader(for: entry, door: .fuse) }
    public func makeReader(for entry: EntryInfo, readerClass: ReaderClass) -> MountReader {
        engine.makeReader(for: entry, door: .fuse, readerClass: readerClass)
    }
    public var usage: CacheUsage { engine.usage }
    public func onRemoteChange(_ handler: @escaping @Sendable (EntryInfo) -> Void) { engine.onRemoteChange(handler) }
    public func status(url: String) -> EntryStatus? { engine.status(url: url) }
    public func pinnedRanges(url: String) -> [Range<Int64>] { engine.pinnedRanges(url: url) }
    public func setPins(url: String, ranges: [Range<Int64>]) throws {
        if ranges.isEmpty { try engine.unpin(url: url) } else { try engine.pin(url: url, ranges: ranges, limit: engine.pinLimit) }
    }
}
