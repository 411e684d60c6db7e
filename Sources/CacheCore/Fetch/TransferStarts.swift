import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// A fetch a locked block registered in its entry's in-flight table, to be started once the
/// shard lock is let go (`TransferStarts.launch`).
struct Launch: Sendable {
    let entry: EntryHandle
    let fetch: ReadPlanner.Fetch
    let id: Int
}

/// What a transfer needs to know of its entry, read under the shard lock as it launches.
struct LaunchFacts {
    let url: String
    /// Its origin's ETags are not compared (`--ignore-etag`, or they rotate): asked once.
    let ignoreETag: Bool
    /// The validator an `If-Range` carries (Last-Modified where ETags are ignored): only for a
    /// version already saved.
    let ifRange: String?
    let generation: Int64
    /// The origin answered ranges before: a 200 from byte 0 is retried, not taken as a verdict.
    let rangesKnown: Bool
    let priority: FetchPriority
    let owner: Int?
    let length: Int64?
    let lastModified: String?
    let isProbe: Bool
    /// Without a strong validator: the bytes around the range to compare (`VersionOverlap`).
    let overlap: OverlapPlan?
    /// Without a strong validator and with no held bytes before the range: the held bytes to
    /// sample before its transfer starts (`VersionSample`).
    let sample: Range<Int64>?
}

/// The start of transfers: a fetch registered in its entry's in-flight table becomes a request
/// to the `FetchCoordinator` with an `EntrySink` for its bytes (after a version sample where no
/// held bytes come before it: `TransferStarts+Sample.swift`).
///
/// It is also what those sinks reach of the engine (`TransferEngine`): the parts they carry out
/// their entry's machine's actions with, and more launches.
///
/// Threads: the launching thread (a reader's, the fetch thread, a job of `pool`) with no lock
/// held; it takes the entry's shard lock once to read the launch's facts, and never blocks
/// beside it (a source's `start` only queues the transfer).
final class TransferStarts: TransferEngine {
    let store: SliceStore
    let fetches: FetchCoordinator
    let evictor: Evictor
    let memory: MemoryBudget
    let versions: Versions
    let answers: ReadAnswers
    let metrics: CacheMetrics
    let logger: Logger
    let configuration: CacheConfiguration
    private let shards: [Shard]
    private let ids: EngineIDs
    private let originRanges: OriginRangeMemory
    private let hook: @Sendable () -> (@Sendable (EngineCore.Step) -> Void)?

    init(configuration: CacheConfiguration, shards: [Shard], store: SliceStore, fetches: FetchCoordinator, evictor: Evictor,
         memory: MemoryBudget, versions: Versions, answers: ReadAnswers, ids: EngineIDs, originRanges: OriginRangeMemory,
         metrics: CacheMetrics, logger: Logger, testHook: @escaping @Sendable () -> (@Sendable (EngineCore.Step) -> Void)?) {
        self.configuration = configuration
        self.shards = shards
        self.store = store
        self.fetches = fetches
        self.evictor = evictor
        self.memory = memory
        self.versions = versions
        self.answers = answers
        self.ids = ids
        self.originRanges = originRanges
        self.metrics = metrics
        self.logger = logger
        self.hook = testHook
    }

    func now() -> Date { configuration.clock() }

    func makeID() -> Int { ids.makeID() }

    var testHook: (@Sendable (EngineCore.Step) -> Void)? { hook() }

    /// How far a body without a length may run before it is taken for an endless stream (an
    /// internet radio station, a hostile origin) and stopped: half the capacity, so such a body
    /// can neither evict more than half of what the cache holds nor download forever.
    var unknownLengthLimit: Int64 { max(configuration.halfCapacity, configuration.sliceSize) }

    /// Records what a transfer's head said of its origin's ranges (`EntrySink`, on the source's
    /// thread, no lock held), and says so when the origin's standing changes.
    func noteRangeAnswers(_ answers: ResponseHead.RangeAnswers, url: String) {
        switch originRanges.note(url: url, answers) {
        case .becameUnreliable:
            logger.notice("the origin answers some range requests with the whole file; reads of its files ask only for what they want", metadata: [
                "origin": "\(OriginVersions.originName(url))", "url": "\(url)"])
        case .becameReliable:
            logger.notice("the origin serves ranges again; read-ahead as usual", metadata: ["origin": "\(OriginVersions.originName(url))"])
        case .none:
            break
        }
    }

    /// Starts a launch the entry's machine asked for. Call with no lock held.
    func launch(_ l: Launch) { launch(fetchID: l.id, entry: l.entry, fetch: l.fetch) }

    /// Starts the transfer for a fetch already registered in the entry's in-flight table, its
    /// bytes going to this engine through an `EntrySink` (`FetchCoordinator.start`). None if the
    /// entry left its table since (removed: its fetches are gone with it, and a transfer would
    /// only stop at its first bytes). Call with no lock held.
    func launch(fetchID: Int, entry handle: EntryHandle, fetch: ReadPlanner.Fetch) {
        let key = handle.key
        let shard = shards.of(key)
        let facts: LaunchFacts? = shard.locked { entries in
            guard let entry = entries[handle] else { return nil }
            let f = entry.inflight.fetches[fetchID]
            let ignoreETag = versions.origins.ignoresETag(url: entry.info.url)
            let overlap = VersionOverlap.plan(entry, start: fetch.start, end: fetch.end, ignoringETag: ignoreETag)
            let isProbe = entry.machine.isProbe(fetchID)
            return LaunchFacts(url: entry.info.url, ignoreETag: ignoreETag,
                               ifRange: entry.isPersisted ? (ignoreETag ? entry.info.lastModified : entry.info.ifRangeValidator) : nil,
                               generation: entry.info.generation, rangesKnown: entry.isPersisted && entry.info.acceptsRanges,
                               priority: f?.priority ?? .waiting, owner: f?.owner,
                               length: entry.isPersisted ? entry.info.length : nil, lastModified: entry.info.lastModified,
                               isProbe: isProbe, overlap: overlap,
                               sample: VersionSample.plan(entry.info, persisted: entry.isPersisted, ignoringETag: ignoreETag,
                                                          isProbe: isProbe, listingPage: entry.isListingPage,
                                                          start: fetch.start, checks: overlap?.checks ?? [],
                                                          coverage: entry.coverage, pending: entry.pending.ranges))
        }
        guard let facts else {
            logger.debug("fetch not started: its entry was removed", metadata: ["url": "\(key)", "range": "\(fetch)"])
            return
        }
        // An origin that answered ranges before is held to it: a 200 from byte 0 is retried
        // (a flaky CDN), not taken as a verdict that it ignores ranges.
        // Without a strong validator, the bytes just before and after the range come too, to be
        // compared with the held ones (`VersionOverlap`).
        let requestStart = facts.overlap?.requestStart ?? fetch.start
        var request = FetchRequest(url: facts.url, start: requestStart, end: facts.overlap?.requestEnd ?? fetch.end,
                                   ifRange: facts.ifRange, requireRange: facts.rangesKnown && fetch.start > 0,
                                   priority: facts.priority, owner: facts.owner)
        request.ignoreETag = facts.ignoreETag
        request.expectedLength = facts.ifRange == nil ? nil : facts.length
        request.expectedLastModified = facts.ifRange == nil ? nil : facts.lastModified
        request.cacheKey = key.string
        request.isProbe = facts.isProbe
        let rangeAsked = request.rangeHeader != nil
        let sink: @Sendable (Bool) -> EntrySink = { [self] knownChanged in
            EntrySink(engine: self, entry: handle, shard: shard, fetchID: fetchID, generation: facts.generation,
                      start: requestStart, rangeAsked: rangeAsked, file: key.hashValue, url: facts.url,
                      checks: facts.overlap?.checks ?? [],
                      // Without checks, everything the answer brings is kept (an origin that
                      // answers more than the range asked for saves the next fetch); with
                      // them, the compared bytes around the range are not the range's.
                      deliver: facts.overlap == nil ? fetch.start..<Int64.max : fetch.start..<(fetch.end ?? .max),
                      knownChanged: knownChanged)
        }
        if let sample = facts.sample {
            // No held bytes before it (or an open's probe): a sample of the held ones first
            // (`VersionSample`).
            return startAfterSample(sample, request: request, sink: sink, fetchID: fetchID, entry: handle, shard: shard,
                                    generation: facts.generation)
        }
        fetches.start(request, sink: sink(false), fetchID: fetchID)
    }
}

extension HeadDecision.Provenance {
    /// What `head` shows against the entry's version `info`.
    init(head: ResponseHead, entry info: EntryInfo, rangeAsked: Bool) {
        let ours = Self.mediaType(info.contentType), theirs = Self.mediaType(head.contentType)
        self.init(namesVersion: head.etag != nil || head.lastModified != nil,
                  otherMediaType: ours != nil && theirs != nil && ours != theirs,
                  rangeAsked: rangeAsked, rangesServed: info.acceptsRanges)
    }

    /// "text/html; charset=utf-8" → "text/html"; nil for none.
    static func mediaType(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        // ASCII (every Content-Type in practice): where `.whitespaces` is SP and HTAB, exactly
        // what `mediaTypeEssence` trims, read as bytes (Foundation's trimming showed in a miss's
        // profile on the curl loop).
        var text = contentType
        if let type = text.withUTF8(HTTPSyntax.asciiMediaTypeEssence) { return type.isEmpty ? nil : type }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return type.isEmpty ? nil : type
    }
}

extension EntryInfo {
    var ifRangeValidator: String? { FetchRequest.ifRangeValidator(etag: etag, lastModified: lastModified) }
}
