import CoreMetrics
import Foundation
import Logging

/// The cache: one per process, shared by the FUSE mount, the proxy and the CLI.
///
/// Reads go through a `CacheReader` (one per open file handle or proxy request), which plans each
/// range against the slices on disk and the fetches in flight, starts only the fetches that are
/// missing, and completes when every byte is local. Bytes are written to data files as they
/// arrive and readers are woken per chunk, so a waiting reader gets its bytes as soon as they
/// land, and the disk (page cache) is the only buffer: memory stays bounded by design.
///
/// Completions run on engine threads, never on Swift's cooperative pool: call back quickly.
public final class CacheEngine: Sendable {
    /// The configuration in force (the slice size is the one the cache was created with).
    public var configuration: CacheConfiguration { core.configuration }
    let logger: Logger
    let core: EngineCore
    /// This cache's counters (`statusDocument`), made through the metrics factory it was given.
    public let metrics: CacheMetrics
    /// The transfers running now, for the status page: the layer around the source that lists
    /// them (`FetchLayers`; nil: an engine with no layers lists none).
    let transfers: (any TransferListing)?
    /// Which origins are down (offline mode): a layer around the real source (`FetchLayers`;
    /// nil: none is ever down).
    var originHealth: (any OriginHealthReporting)? { core.originHealth }
    /// The last good answer to each kept document request (WebDAV listings).
    let keptDocuments: KeptDocuments

    /// The source's cache tier, if it fetches through one (`--tier`).
    public let tier: TierReporting?

    /// Runs once the engine has shut down (see `init`).
    private let afterShutdown: (@Sendable () -> Void)?

    /// Opens (creating if needed) the cache at `configuration.directory`, taking its lock.
    /// - Parameters:
    ///   - source: the real source (libcurl, a tier's router, a test's).
    ///   - metricsFactory: the swift-metrics backend this engine's metrics are made with (its own,
    ///     not the process-wide one; see `CacheMetrics`). The default keeps only the totals of the
    ///     status document.
    ///   - layers: wraps `source` before any transfer starts on it, given this engine's metrics,
    ///     clock and logger: Fetcher's `FetchLayers.standard()` (offline mode, every transfer
    ///     counted and listed) for every engine the executable builds. The default, none: the
    ///     source as given, no origin ever down, no transfer counted or listed (engine tests).
    ///   - afterShutdown: runs at the end of `shutdown()`: a process that made the source for this
    ///     engine alone stops it there (its thread must not outlive the cache into `exit`).
    public init(configuration: CacheConfiguration, source: RangeSource,
                logger: Logger = Logger(label: "httpcachefs.cache"),
                metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance,
                layers: (RangeSource, FetchLayerContext) -> FetchLayers = FetchLayers.none,
                afterShutdown: (@Sendable () -> Void)? = nil) throws {
        self.logger = logger
        self.afterShutdown = afterShutdown
        let metrics = CacheMetrics(factory: metricsFactory, clock: configuration.engineClock)
        self.metrics = metrics
        let layered = layers(source, FetchLayerContext(metrics: metrics, clock: configuration.clock,
                                                          scheduler: configuration.engineClock.scheduler, logger: logger))
        self.transfers = layered.transfers
        self.tier = source as? TierReporting
        self.core = try EngineCore(configuration: configuration, source: layered.source, logger: logger, metrics: metrics,
                                   originHealth: layered.originHealth)
        layered.originHealth?.answerOn(core.pool)
        self.keptDocuments = KeptDocuments(held: core.store.held)
        core.versions.changeObservers.add { _ in metrics.remoteChanges.add(1) }
    }

    /// Flushes the index and releases the directory lock. Pending reads fail with `.cancelled`.
    public func shutdown() {
        originHealth?.stop()
        core.shutdown()
        afterShutdown?()
    }

    /// The cache key for `url` under this cache's rules.
    public func key(for url: String) throws -> CacheKey { try core.configuration.keyRules.key(for: url) }

    /// Metadata for `url`: from the index while fresh, else from the origin (a small ranged GET
    /// whose bytes are kept). A changed remote file gets a new generation here.
    /// - Parameters:
    ///   - maxAge: revalidate if the entry was confirmed longer ago than this (instead of
    ///     `revalidateAfter`): a live playlist or a directory listing with its own TTL.
    ///   - takeFirstBytes: let the probe bring the file's first 256 KiB along (headers, a moov
    ///     atom's start, a playlist); false for metadata alone (a HEAD request): one byte. The
    ///     same behind a cache tier: leaving the header to the tier saved the origin 0.3% of a
    ///     file but made three cold hosts 1.5x slower (docs/fleet.md, "The open-time check").
    ///   - unknownLengthLimit: if the body has no length, the most it may bring before the open
    ///     fails and its transfer stops (a directory listing's cap); nil: the engine's own, half
    ///     the cache's capacity. Given only for listing pages: an entry opened with one is a
    ///     listing, whose changes are not counted or logged as remote file changes.
    ///   - answerFreshInline: an entry that is fresh (nothing to ask the origin) is answered on
    ///     the caller's thread, before `open` returns, instead of on an engine thread. For a
    ///     caller that would hop back to its own thread anyway (the proxy's event loop), or that
    ///     answers such an open without I/O (the mount's FUSE loop): two thread wake-ups fewer
    ///     per open. The caller must hold no lock the completion takes.
    ///   - key: `url`'s cache key (`key(for:)`), when the caller keeps it (the mount, per
    ///     inode): not worked out again. Nil: made from `url`.
    public func open(url: String, key: CacheKey? = nil, maxAge: TimeInterval? = nil, takeFirstBytes: Bool = true,
                     answerFreshInline: Bool = false, unknownLengthLimit: Int64? = nil,
                     completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        let metrics = metrics
        let answer = AnswerOnce { (result: Result<EntryInfo, CacheError>) in
            if case let .failure(error) = result {
                if error != .cancelled { metrics.noteFailedOpen() }
                metrics.noteError(error, url: url, range: nil)
            }
            completion(result)
        }
        core.opener.open(url: url, key: key, maxAge: maxAge ?? core.configuration.revalidateAfter, takeFirstBytes: takeFirstBytes,
                  answerFreshInline: answerFreshInline, unknownLengthLimit: unknownLengthLimit) { answer.fire($0) }
        // An open waits at most the read timeout, as a read does. Its probe's own timeouts end
        // an origin that does not answer or stalls, but not one that answers without a length
        // and never ends its body (an endless stream): the open would wait for that end, and a
        // `stat` in the mount would hang in the kernel. The transfer goes on (its bytes are
        // cached, up to `TransferStarts.unknownLengthLimit`); a later open may find its end. The
        // engine's sweeper, which fails late reads, fails late opens too (`expireOpens`).
        if !answer.isAnswered {
            core.waitingOpens.withLock {
                $0.append((deadline: core.configuration.engineClock.monotonic + .seconds(core.configuration.readTimeout), url: url, answer: answer))
            }
        }
    }

    public func open(url: String, maxAge: TimeInterval? = nil, takeFirstBytes: Bool = true) async throws -> EntryInfo {
        try await withCheckedThrowingContinuation { cont in
            open(url: url, maxAge: maxAge, takeFirstBytes: takeFirstBytes) { cont.resume(with: $0) }
        }
    }

    /// What the cache knows about `url` without asking the origin, or nil.
    public func cachedInfo(url: String) -> EntryInfo? { core.cachedInfo(url: url) }
    /// Loads the entries of `keys` that are in the index but not in memory, in one job of the
    /// pool, so their opens find them in memory (a mount's folder opened file after file).
    public func loadAhead(_ keys: [CacheKey]) { core.loader.loadAhead(keys) }

    /// A reader for one open file or one proxy response. Close it when done.
    /// - Parameters:
    ///   - end: where the reader will stop reading, if it knows (a byte range's end): its
    ///     read-ahead stops there, so the origin sends exactly the bytes asked for.
    ///   - door: where its reads come from, for the counters.
    ///   - requestStartedAt: for a proxy response, when its request arrived
    ///     (`EngineClock.uptimeNanoseconds`): its first read is its time to first byte.
    ///   - background: a warm-up (`preload`): its fetches run in the lowest class, after every
    ///     other reader's (the same as `readerClass: .background`).
    ///   - readerClass: who reads (a scanner, a player, a process nobody listed): its read-ahead
    ///     and the class of its fetches (`ReaderClass`).
    ///   - scanShare: the slices it reads go to the cap's scan share (`ScanShare`), as a
    ///     scanner's do: `preload --head/--tail`, which warms what a scan reads.
    public func makeReader(for entry: EntryInfo, end: Int64? = nil, door: ReadDoor = .cli,
                           requestStartedAt: MonotonicInstant? = nil, background: Bool = false,
                           readerClass: ReaderClass = .player, scanShare: Bool = false) -> CacheReader {
        let readerClass = background ? .background : readerClass
        return CacheReader(core: core, entry: entry, end: end, readerClass: readerClass, scanShare: scanShare,
                           accounting: ReadAccounting(metrics: metrics, door: door, entry: entry, requestStartedAt: requestStartedAt,
                                                      readerClass: readerClass, clock: core.configuration.engineClock))
    }

    /// Called (on an engine thread) whenever an entry is found to have changed remotely.
    public func onRemoteChange(_ handler: @escaping @Sendable (EntryInfo) -> Void) { core.versions.changeObservers.add(handler) }

    /// The origins that cannot be reached now (requests to them fail at once; see
    /// `OriginHealthReporting`). None for an engine without offline mode.
    public var originsDown: [OriginDown] { originHealth?.downOrigins() ?? [] }

    /// The origin of `url` is down now (cached bytes are served without asking it).
    public func isOriginDown(url: String) -> Bool { originHealth?.isDown(url: url) ?? false }

    /// Status of one entry for `cache info`, or nil if unknown.
    public func status(url: String) -> EntryStatus? {
        guard var s = core.commands.status(url: url) else { return nil }
        if let split = tier?.tierSplit(ofKey: s.info.key.string) {
            s.fetchedFromTier = split.tier
            s.fetchedFromOrigin = split.origin
        }
        return s
    }

    /// Status of every entry, for `cache ls`.
    public func list() -> [EntryStatus] { core.commands.list() }

    /// Forgets one entry and deletes its slices, and releases its pins: a removed file's pins
    /// went on counting against `--pin-max` (and keeping its slices once fetched again). A URL
    /// that is only pinned, not cached, has its pins released and is no error.
    public func remove(url: String) throws {
        let unpinned = try unpin(url: url)
        do { try core.commands.remove(url: url) } catch let error as CacheError {
            if case .notFound = error, unpinned > 0 { return }
            throw error
        }
    }

    /// The same, awaited: the files are deleted in a job of the engine's pool, never on the
    /// cooperative pool.
    public func remove(url: String) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            core.pool.submit { continuation.resume(with: Result { try self.remove(url: url) }) }
        }
    }

    /// The engine's pool for blocking I/O: the mount's disk replies are a lane of it.
    public var blockingIO: BlockingIOPool { core.pool }

    /// Runs blocking work of the cache's (a removal, a pin, a clear asked over the proxy's
    /// control door) as a job of the engine's pool for blocking I/O. `job` must not wait for
    /// the engine's reads or opens (docs/threads.md).
    public func runBlocking(_ job: @escaping @Sendable () -> Void) {
        core.pool.submit(job)
    }

    /// Forgets every entry, and releases every pin. Pins outlived `cache clear` ("cleared 17
    /// files"): with no file left, `cache ls` showed none of them, yet they still counted
    /// against `--pin-max` and refused the next `preload --pin`.
    public func clear() throws {
        try core.commands.clear()
        keptDocuments.removeAll()
        try unpinAll()
    }

    /// Bytes cached now, and the cap in force.
    public var usage: CacheUsage { core.commands.usage }

    /// Checks every recorded extent against its checksum; bad ones are dropped from the index.
    public func verify() -> VerifyReport { core.commands.verify() }
}

/// One reader's view of one entry: sequential detection, read-ahead and interest.
public final class CacheReader: Sendable {
    let core: EngineCore
    let state: ReaderState
    let accounting: ReadAccounting

    init(core: EngineCore, entry: EntryInfo, end: Int64?, readerClass: ReaderClass = .player, scanShare: Bool = false,
         accounting: ReadAccounting) {
        self.core = core
        self.state = core.reader.makeReaderState(entry: entry, end: end, door: accounting.door, readerClass: readerClass,
                                          scanShare: scanShare)
        self.accounting = accounting
        core.openReaders.open(entry.key, reader: state.id)
        // An open loads its entry; a reader made without one (from `cachedInfo`) loads it here,
        // and keeps it in memory while it is open.
        core.loader.loadNow(entry.key)
    }

    deinit { core.openReaders.close(state.entry.key, reader: state.id) }

    /// The version this reader was made for. It stays bound to it: once the remote file changed,
    /// its reads fail with `CacheError.remoteChanged` (make a new reader for the new version).
    public var entry: EntryInfo { state.entry }

    /// Whether its reads are judged bulk now (`ReaderTempo`): a program of a class whose fetches
    /// follow its pace (a player by name, an unknown one) that has read as fast as it was given
    /// for long; its fetches yield like warm-up's.
    public var readsInBulk: Bool { state.progress.withLock { $0.tempo?.isBulk ?? false } }

    /// Reads `[offset, offset+length)` clipped to the end of the file. Completes once every byte
    /// is here, with bytes of this reader's version only; an empty array at or past the end.
    ///
    /// The answer is a lease on the bytes where they are (the open data file, or memory for bytes
    /// that arrived while the read waited): send them from there, then `release()` it. Until
    /// then its slices are not evicted. Completes on the caller's thread for a cache hit (which
    /// does no I/O but, at most, opening the data file once per reader), else on an engine thread.
    public func lease(offset: Int64, length: Int,
                      completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void) {
        let accounting = accounting, started = core.configuration.engineClock.monotonic
        core.reader.read(reader: state, offset: offset, length: length) { result in
            accounting.readEnded(result, offset: offset, length: length, startedAt: started)
            completion(result)
        }
    }

    /// `[offset, offset+length)` if this reader's version is all cached on disk: a lease
    /// at once, with nothing fetched and the reader's read-ahead untouched; else nil. For putting
    /// bytes ahead of a reader where it will find them (the kernel's page cache).
    public func cachedLease(offset: Int64, length: Int) -> ReadLease? {
        core.reader.cachedLease(reader: state, offset: offset, length: length)
    }

    /// The same read, as bytes (read from the data file on the completing thread): for callers
    /// that parse what they read rather than send it on.
    public func read(offset: Int64, length: Int,
                     completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        lease(offset: offset, length: length) { result in
            completion(result.flatMap { lease in
                defer { lease.release() }
                do { return .success(try lease.bytes()) } catch let e as StorageError {
                    return .failure(e.cacheError)
                } catch {
                    return .failure(.storage(path: "", message: "\(error)"))
                }
            })
        }
    }

    /// The same read, awaited; the bytes are read out in a job of the engine's pool, never on
    /// the cooperative pool.
    public func read(offset: Int64, length: Int) async throws -> [UInt8] {
        try await ChunkedRead.read(self, offset: offset, count: length)
    }

    /// Releases this reader's interest: its pending reads fail with `.cancelled`, and fetches
    /// that nobody else waits for are stopped.
    public func close() {
        core.openReaders.close(state.entry.key, reader: state.id)
        core.reader.close(reader: state)
    }
}

/// Per-entry statistics and coverage, for `cache ls` and `cache info`.
public struct EntryStatus: Sendable {
    public var info: EntryInfo
    /// Byte ranges present on disk (half-open).
    public var cachedRanges: [Range<Int64>]
    public var cachedBytes: Int64
    public var hits: Int64
    public var misses: Int64
    public var bytesFromCache: Int64
    public var bytesFromOrigin: Int64
    public var lastAccess: Date
    public var recentErrors: [String]
    /// Reads since this process started, by door (not kept in the index).
    public var readsByDoor = DoorReads()
    /// With a cache tier (`--tier`): of the bytes this process (the daemon, for `cache info`
    /// while one runs) fetched for the file, those a tier node sent and those the origin sent
    /// itself. nil: no tier, or nothing fetched.
    public var fetchedFromTier: Int64?
    public var fetchedFromOrigin: Int64?
}

public struct CacheUsage: Sendable, Equatable {
    public var bytes: Int64
    public var capacity: Int64
    public var entries: Int

    public init(bytes: Int64, capacity: Int64, entries: Int) {
        self.bytes = bytes
        self.capacity = capacity
        self.entries = entries
    }
}

public struct VerifyReport: Sendable {
    public var extentsChecked: Int
    public var bytesChecked: Int64
    /// Human-readable descriptions of what was wrong (and dropped).
    public var problems: [String]
}

/// A completion called once, by whichever comes first (an engine's answer or a deadline). The
/// sweeper's list of waiting opens holds only this box, which lets go of the completion once it
/// is called.
final class AnswerOnce<Value: Sendable>: Sendable {
    private let pending: LockedValue<(@Sendable (Value) -> Void)?>

    init(_ completion: @escaping @Sendable (Value) -> Void) { pending = LockedValue(completion) }

    var isAnswered: Bool { pending.withLock { $0 == nil } }

    func fire(_ value: Value) {
        let completion: (@Sendable (Value) -> Void)? = pending.withLock { p in
            defer { p = nil }
            return p
        }
        completion?(value)
    }
}
