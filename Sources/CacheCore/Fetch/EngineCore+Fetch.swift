import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fetch a locked block registered in its entry's in-flight table, to be started once the
/// shard lock is let go (`EngineCore.launch`).
struct Launch: Sendable {
    let entry: EntryHandle
    let fetch: ReadPlanner.Fetch
    let id: Int
}

extension EngineCore {
    func launch(_ l: Launch) { launch(fetchID: l.id, entry: l.entry, fetch: l.fetch) }

    /// Starts the transfer for a fetch already registered in the entry's in-flight table. None
    /// if the entry left its table since (removed: its fetches are gone with it, and a transfer
    /// would only stop at its first bytes).
    func launch(fetchID: Int, entry handle: EntryHandle, fetch: ReadPlanner.Fetch) {
        let key = handle.key
        let shard = shard(for: key)
        typealias Facts = (url: String, ifRange: String?, generation: Int64, rangesKnown: Bool, priority: FetchPriority,
                           owner: Int?, length: Int64?, lastModified: String?, isProbe: Bool,
                           overlap: OverlapPlan?)
        let facts: Facts? = shard.locked { entries in
            guard let entry = entries[handle] else { return nil }
            let f = entry.inflight.fetches[fetchID]
            return (entry.info.url, entry.isPersisted ? ifRangeValidator(entry.info) : nil, entry.info.generation,
                    entry.isPersisted && entry.info.acceptsRanges, f?.priority ?? .waiting, f?.owner,
                    entry.isPersisted ? entry.info.length : nil, entry.info.lastModified, entry.machine.isProbe(fetchID),
                    overlapPlan(entry, start: fetch.start, end: fetch.end))
        }
        guard let (url, ifRange, generation, rangesKnown, priority, owner, length, lastModified, isProbe, overlap) = facts else {
            logger.debug("fetch not started: its entry was removed", metadata: ["url": "\(key)", "range": "\(fetch)"])
            return
        }
        // An origin that answered ranges before is held to it: a 200 from byte 0 is retried
        // (a flaky CDN), not taken as a verdict that it ignores ranges.
        // Without a strong validator, the bytes just before and after the range come too, to be
        // compared with the held ones (`VersionOverlap`).
        let requestStart = overlap?.requestStart ?? fetch.start
        var request = FetchRequest(url: url, start: requestStart, end: overlap?.requestEnd ?? fetch.end, ifRange: ifRange,
                                   requireRange: rangesKnown && fetch.start > 0, priority: priority, owner: owner)
        request.ignoreETag = ignoresETag(url: url)
        request.expectedLength = ifRange == nil ? nil : length
        request.expectedLastModified = ifRange == nil ? nil : lastModified
        request.cacheKey = key.string
        request.isProbe = isProbe
        let sink = EntrySink(core: self, entry: handle, shard: shard, fetchID: fetchID, generation: generation,
                             start: requestStart, rangeAsked: request.rangeHeader != nil, file: key.hashValue, url: url,
                             checks: overlap?.checks ?? [],
                             // Without checks, everything the answer brings is kept (an origin that
                             // answers more than the range asked for saves the next fetch); with
                             // them, the compared bytes around the range are not the range's.
                             deliver: overlap == nil ? fetch.start..<Int64.max : fetch.start..<(fetch.end ?? .max))
        activeSinks.withLock { $0 += 1 }
        let box = handles.box(fetchID)
        logger.debug("fetch", metadata: ["url": "\(url)", "range": "\(fetch)"])
        box.set(source.start(request, sink: sink))
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
