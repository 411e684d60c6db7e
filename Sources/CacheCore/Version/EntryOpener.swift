import Foundation
import Logging

/// The open of an entry: the metadata a front door asks before it reads (`CacheEngine.open`).
///
/// *What it owns.* The answer to an open: at once for a fresh entry, else after a probe (a small
/// ranged GET whose head carries the validators and whose bytes are cached; what its head
/// means for the version is `Versions`', through the probe's sink). A new entry is made here,
/// in memory, with a new generation; it is indexed only once an origin answered for it. The keys
/// of URLs opened lately (`recentKeys`).
///
/// *Which thread runs it.* The caller's (a FUSE thread, the CLI), or a job of `pool` for a caller
/// that must not wait for the index (an event loop: `answerFreshInline`); the decision under the
/// entry's shard lock (`EntryStateMachine.openRequested`).
///
/// *What it may block on.* The shard lock, and the load of an entry from the index on a caller
/// that may wait (`EntryLoader.loadInline`); answers run as jobs of `pool` unless asked inline.
final class EntryOpener: Sendable {
    typealias EntryMachine = EntryStateMachine<EntryState.OpenCompletion>
    private let configuration: CacheConfiguration
    private let shards: [Shard]
    private let ids: EngineIDs
    private let totals: RunningTotals
    /// Which origins are down: an entry of one is served as cached, not revalidated.
    private let originHealth: (any OriginHealthReporting)?
    private let loader: EntryLoader
    private let transfers: TransferStarts
    private let pool: BlockingIOPool
    private let logger: Logger
    /// Bytes fetched ahead of time when an entry is first opened (file headers, a moov atom start).
    let probeLength: Int64 = 256 << 10
    /// The keys of the URLs opened lately: the proxy opens its entry on every request, and a key
    /// is a function of the URL and the rules, which change only with the process's S3 buckets
    /// (a mount that named one ends: `S3Buckets.generation`).
    private let recentKeys = RecentResults<CacheKey>(capacity: 256)

    init(configuration: CacheConfiguration, shards: [Shard], ids: EngineIDs, totals: RunningTotals,
         originHealth: (any OriginHealthReporting)?, loader: EntryLoader, transfers: TransferStarts, pool: BlockingIOPool,
         logger: Logger) {
        self.configuration = configuration
        self.shards = shards
        self.ids = ids
        self.totals = totals
        self.originHealth = originHealth
        self.loader = loader
        self.transfers = transfers
        self.pool = pool
        self.logger = logger
    }

    /// `url`'s key, through `recentKeys`.
    func recentKey(for url: String) throws -> CacheKey {
        try recentKeys.value(for: url, generation: configuration.keyRules.s3Buckets?.generation ?? 0) {
            try configuration.keyRules.key(for: $0)
        }
    }

    /// What the cache holds of `url`, from memory or the index, without loading it or asking the origin.
    func cachedInfo(url: String) -> EntryInfo? {
        guard let key = try? configuration.keyRules.key(for: url) else { return nil }
        return loader.storedInfo(key)
    }

    /// Resolves metadata: fresh entries answer at once (on the caller's thread with
    /// `answerFreshInline`, else as a job of `pool`); unknown or stale ones start a probe (a
    /// small ranged GET whose head carries the validators and whose bytes are cached).
    func open(url: String, key known: CacheKey? = nil, maxAge: TimeInterval, takeFirstBytes: Bool = true, answerFreshInline: Bool = false,
              unknownLengthLimit: Int64? = nil, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        let key: CacheKey
        do { key = try known ?? recentKey(for: url) } catch {
            let e = error as? CacheError ?? .invalidURL(url, reason: "\(error)")
            pool.submit { completion(.failure(e)) }
            return
        }
        // An entry not in memory is loaded first: on this thread (a FUSE thread, the CLI), or,
        // for a caller that asked for an inline answer (an event loop, which must not wait for
        // the index), as a job of the pool.
        guard answerFreshInline else {
            let asked = loader.loadInline(key)
            return open(key: key, url: url, maxAge: maxAge, takeFirstBytes: takeFirstBytes, answerFreshInline: false,
                        unknownLengthLimit: unknownLengthLimit, askedIndex: asked, completion: completion)
        }
        loader.whenLoaded(key) { [self] asked in
            open(key: key, url: url, maxAge: maxAge, takeFirstBytes: takeFirstBytes, answerFreshInline: answerFreshInline,
                 unknownLengthLimit: unknownLengthLimit, askedIndex: asked, completion: completion)
        }
    }

    /// `open` once the entry is in memory, or the index was asked and has none (`askedIndex`);
    /// an entry let go meanwhile is loaded again first.
    private func open(key: CacheKey, url: String, maxAge: TimeInterval, takeFirstBytes: Bool, answerFreshInline: Bool,
                      unknownLengthLimit: Int64?, askedIndex: Bool,
                      completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        let shard = shards.of(key)
        let originDown = originHealth?.isDown(url: url) ?? false
        let (answer, probe, skipped, notLoaded) = shard.locked { entries -> (Result<EntryInfo, CacheError>?, Launch?, Bool, Bool) in
            // The clock is read under the lock: a transfer may confirm the entry (validatedAt)
            // just before, and an age read earlier would come out negative, hence "fresh".
            let now = configuration.clock()
            let entry: EntryState
            if let existing = entries[key] {
                entry = existing
                // A use again, unless this open just loaded it (that load put it in as new).
                if !askedIndex { entries.touch(key) }
            } else if !askedIndex || entries.isLoading(key) {
                // Let go since it was looked up, or being loaded: a new entry here would replace the index's.
                return (nil, nil, false, true)
            } else {
                let info = EntryInfo(key: key, url: url, finalURL: url, length: nil, contentType: nil, etag: nil,
                                     lastModified: nil, acceptsRanges: true, generation: ids.makeGeneration(),
                                     validatedAt: .distantPast)
                entry = EntryState(id: -1, info: info, lastAccess: now.timeIntervalSince1970)
                entry.attach(to: totals)
                entries.add(entry)
            }
            if let limit = unknownLengthLimit { entry.machine.lengthLimitAsked(limit) }
            let freshness = EntryMachine.Freshness(maxAge: maxAge, lengthKnown: entry.info.length != nil,
                                                   age: now.timeIntervalSince(entry.info.validatedAt),
                                                   originDown: originDown, live: entry.isPersisted)
            switch entry.machine.openRequested(completion, fresh: freshness.fresh, makeFetchID: ids.makeID) {
            case .answer:
                return (.success(entry.info), nil, freshness.offline, false)
            case .cancel:
                return (.failure(.cancelled), nil, false, false)
            case .wait:
                return (nil, nil, false, false)
            case let .startProbe(id):
                let fetch = EntryMachine.probeFetch(takeFirstBytes: takeFirstBytes, coverage: entry.coverage,
                                                    length: entry.info.length, probeLength: probeLength)
                entry.machine.probeStarted(id, url: url, end: fetch.end, now: now.timeIntervalSince1970)
                return (nil, Launch(entry: entry.handle, fetch: fetch, id: id), false, false)
            }
        }
        if notLoaded {
            loader.whenLoaded(key) { [self] asked in
                open(key: key, url: url, maxAge: maxAge, takeFirstBytes: takeFirstBytes, answerFreshInline: false,
                     unknownLengthLimit: unknownLengthLimit, askedIndex: asked, completion: completion)
            }
            return
        }
        if skipped {
            logger.info("origin down: revalidation skipped, serving the cached copy", metadata: ["url": "\(DisplayURL.redacted(url))"])
        }
        if let answer {
            if answerFreshInline, case .success = answer { completion(answer) } else { pool.submit { completion(answer) } }
            return
        }
        if let probe { transfers.launch(probe) }
    }
}
