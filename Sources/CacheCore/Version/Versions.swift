import Foundation
import Logging

/// The version part: which version of a remote file an entry holds, and what a change of
/// version does to it.
///
/// *What it owns.* Telling versions apart (`differs`, through `OriginVersions`: validators,
/// rotating ETags) and by their bytes where no validator can (`heldBytes`, `overlapDiffered`:
/// `VersionOverlap`); adopting what an origin said of a version (`adopt`, which also notes a
/// `DAV:` header); starting a new generation (`startNewGeneration`: the old slices dropped,
/// the old version's transfers cancelled and its waiting reads failed, the change told to
/// `ChangeObservers`); and answering the opens waiting on a version (`answer`). The open of an
/// entry is `EntryOpener`'s, beside this (the folder `Version/`).
///
/// *Which thread runs it.* The fetch thread (a head, an overlap compared), a launching one (a
/// version sample's verdict), a command's (`cache rm` answers the opens of what it removes):
/// under the entry's shard lock where said; `heldBytes` and `overlapDiffered` take it themselves.
///
/// *What it may block on.* The shard lock (`heldBytes`, `overlapDiffered`), and the 4 KiB read
/// of a data file in `heldBytes`, with the slices pinned and no lock held. Rows and file
/// deletions of a new generation are queued to the index lane, never waited for here.
///
/// Map of this folder (`Version/`): a version's identity, from the head to the new generation.
/// - `Versions.swift` (this file): differs, adopt, new generations, the overlap's verdict.
/// - `EntryOpener.swift`: the open of an entry (fresh answers, probes).
/// - `OriginVersions.swift`: validators and origins whose ETags rotate.
/// - `VersionOverlap.swift`: the bytes asked around a range to compare, where no validator is strong.
/// Neighbours: `Fetch/` (the sinks call it on a head), `Read/` (`ReadAnswers` fails and replans
/// the waiters of a version left), `Eviction/` (the dropped bytes leave its totals).
final class Versions: Sendable {
    /// Validators, and the origins whose ETags rotate.
    let origins: OriginVersions
    /// Who hears that a remote file changed (`CacheEngine.onRemoteChange`).
    let changeObservers: ChangeObservers
    /// Entries whose last answer carried a `DAV:` header (`CacheEngine.answeredDAV`).
    let davAnswers = DAVAnswers()
    private let configuration: CacheConfiguration
    private let ids: EngineIDs
    private let store: SliceStore
    private let evictor: Evictor
    private let fetches: FetchCoordinator
    private let answers: ReadAnswers
    private let pool: BlockingIOPool
    private let metrics: CacheMetrics
    private let logger: Logger

    init(origins: OriginVersions, changeObservers: ChangeObservers, configuration: CacheConfiguration, ids: EngineIDs,
         store: SliceStore, evictor: Evictor, fetches: FetchCoordinator, answers: ReadAnswers, pool: BlockingIOPool,
         metrics: CacheMetrics, logger: Logger) {
        self.origins = origins
        self.changeObservers = changeObservers
        self.configuration = configuration
        self.ids = ids
        self.store = store
        self.evictor = evictor
        self.fetches = fetches
        self.answers = answers
        self.pool = pool
        self.metrics = metrics
        self.logger = logger
    }

    /// True when `head` describes another version than `info` (`OriginVersions.differs`).
    func differs(_ info: EntryInfo, _ head: ResponseHead) -> Bool { origins.differs(info, head) }

    /// Answers opens (call under the shard lock); completions run later.
    func answer(_ opens: [EntryState.OpenCompletion], _ result: Result<EntryInfo, CacheError>) {
        guard !opens.isEmpty else { return }
        pool.submit { opens.forEach { $0(result) } }
    }

    /// Answers opens as the entry's state machine said (call under the shard lock).
    func answer(_ answer: EntryStateMachine<EntryState.OpenCompletion>.Answer?, entry: EntryState, url: String) {
        guard let answer else { return }
        switch answer.with {
        case .info:
            self.answer(answer.opens, .success(entry.info))
        case let .staleCopy(cause):
            logger.warning("origin unavailable; serving the cached copy", metadata: ["url": "\(url)", "error": "\(cause)"])
            self.answer(answer.opens, .success(entry.info))
        case let .failure(cause):
            self.answer(answer.opens, .failure(cause))
        case .noLength:
            self.answer(answer.opens, .failure(.badResponse(url: url, message: "no length")))
        }
    }

    /// Copies what the origin said into the entry (call under the shard lock).
    func adopt(_ head: ResponseHead, into entry: EntryState) {
        entry.machine.headAdopted(head, at: configuration.clock())
        davAnswers.note(head.webDAV, key: entry.info.key)
    }

    /// The remote file changed: start a new generation. Old slices are dropped (rows first, files
    /// after), running fetches of the old generation are cancelled, and reads still waiting for
    /// the old version fail (their readers are bound to it). Call under the shard lock.
    func startNewGeneration(_ entry: EntryState, head: ResponseHead, keeping fetchID: Int) -> [FetchHandleBox] {
        let old = entry.info.generation
        // A listing page that changed (an autoindex page has no validators, so every re-read is a
        // new version) is told at debug level only and counted nowhere: changes count files.
        let isFile = !entry.isListingPage
        logger.log(level: isFile ? .notice : .debug,
                   isFile ? "remote file changed; dropping cached bytes" : "listing page changed; dropping its cached copy", metadata: [
            "url": "\(entry.info.url)", "etag": "\(entry.info.etag ?? "-") -> \(head.etag ?? "-")",
            "length": "\(entry.info.length.map(String.init) ?? "?") -> \(head.totalLength.map(String.init) ?? "?")"])
        let dropped = evictor.countingScanBytes(entry) { entry.machine.generationStarted(ids.makeGeneration(), keeping: fetchID) }
        metrics.noteWasted(entry.machine.takeWasted())
        adopt(head, into: entry)
        evictor.addBytes(-dropped.droppedBytes)
        store.forgetFiles(of: entry.handle)
        answers.failStaleWaiters(entry)
        let cancelled = fetches.stop(dropped.cancel)
        if entry.isPersisted {
            store.save(entry)
            store.deleteOtherVersions(entryID: entry.id, keep: entry.info.generation, old: old)
        }
        if isFile { changeObservers.notify(entry.info) }
        return cancelled
    }

    /// The bytes of `range` that the entry holds at `generation`, from memory (pending) or its
    /// data file; nil unless all of them are held (nothing to compare).
    func heldBytes(_ handle: EntryHandle, shard: Shard, generation: Int64, range: Range<Int64>) -> [UInt8]? {
        enum Held { case memory([UInt8]), disk(id: Int64, slices: ClosedRange<Int64>) }
        let held: Held? = shard.locked { entries in
            guard let e = entries[handle], e.isCurrent(generation), e.isPersisted else { return nil }
            if e.coverage.contains(range) {
                let slices = store.slices(of: range)
                e.pin(slices, generation: generation)   // not evicted under the read
                return .disk(id: e.id, slices: slices)
            }
            let views = e.pending.views(in: range)
            guard views.reduce(Int64(0), { $0 + $1.range.length }) == range.length else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(Int(range.length))
            for v in views { out += UnsafeRawBufferPointer(rebasing: v.chunk.bytes[v.lo..<(v.lo + Int(v.range.length))]) }
            return .memory(out)
        }
        switch held {
        case nil: return nil
        case let .memory(bytes): return bytes
        case let .disk(id, slices):
            defer { shard.locked { $0[handle]?.unpin(slices, generation: generation) } }
            return try? store.read(entry: id, generation: generation, range: range)
        }
    }

    /// The overlap's bytes differ: the file changed though its validators did not say so. Starts
    /// a new version (under the shard lock; the old slices go and the old version's waiting reads
    /// fail), to be probed again by the next open. Returns what to cancel and launch after the
    /// locks.
    func overlapDiffered(_ handle: EntryHandle, shard: Shard, generation: Int64, fetchID: Int,
                         at range: Range<Int64>, by what: String) -> (cancels: [FetchHandleBox], launches: [Launch]) {
        shard.locked { entries in
            guard let entry = entries[handle], entry.isCurrent(generation) else { return ([], []) }
            logger.warning("the file changed at its origin though its validators did not (no strong ETag); compared bytes differ from the cached ones", metadata: [
                "compared": "\(what)",
                "url": "\(entry.info.url)", "at": "\(range.lowerBound)", "etag": "\(entry.info.etag ?? "-")",
                "last_modified": "\(entry.info.lastModified ?? "-")"])
            let info = entry.info
            let head = ResponseHead(status: 200, finalURL: info.finalURL, bodyStart: 0, totalLength: info.length,
                                    contentType: info.contentType, etag: info.etag, lastModified: info.lastModified,
                                    acceptsRanges: info.acceptsRanges)
            let cancels = startNewGeneration(entry, head: head, keeping: fetchID)
            entry.machine.validationForgotten()   // what the origin now has is asked at the next open
            store.save(entry)
            return (cancels, answers.replanWaiters(entry, failed: nil))
        }
    }
}
