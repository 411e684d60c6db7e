import Foundation

/// The overlap check: a version change that no validator can show, found in the bytes.
///
/// With a strong ETag, every request after the first carries it in `If-Range`, and a changed
/// file answers 200 with another ETag: the engine starts a new version, and nothing mixes. An
/// origin with no ETag (a weak one, or `--ignore-etag`) and no Last-Modified, or one whose
/// Last-Modified did not change (a file replaced with its date kept: `cp -p`, `rsync -t`,
/// object stores that copy metadata), gives the engine nothing to tell two versions of the same
/// length apart: a file replaced during one open would be read partly as the old version and
/// partly as the new, and the mixed slices would stay cached.
///
/// So for such a version, a range request also asks for the `overlapLength` bytes just before
/// its start and just after its end (4 KiB each: a page, a few tenths of a percent of a
/// read-ahead request, not a second request), and when they arrive they are compared with the
/// bytes the cache holds there (pending in memory, or on disk), if it holds them by then. Two
/// adjacent streams (parallel read-ahead, one started before the change and one after) are
/// compared where they meet, by whichever gets there second. A request whose own first bytes
/// are held already (an open's probe over a cached head) compares those. Same bytes: the new
/// range is taken as before (the overlaps are never delivered). Other bytes: the
/// file changed. The engine starts a new version (the old slices go, rows first), the reads of
/// the old version fail with `remoteChanged` (the open must be made again), the transfer stops,
/// and nothing it brought is kept: the comparison comes before any of its bytes is delivered.
///
/// A request with no held bytes before it as it launches (a seek into an uncached stretch) has
/// nothing here to compare before its first bytes: it starts only after a sample of the held
/// ones compared equal (`VersionSample`).
///
/// Limits, said in docs/design.md: a change that leaves the compared bytes as they were (a file
/// edited in place, in the middle) is not seen; and where held bytes before a request were
/// evicted between its launch and its first bytes, it is not compared before them. With a
/// strong ETag none of this applies, and nothing is asked twice.
///
/// Threads: `overlapPlan` under the shard lock (in `launch`); `heldBytes` on the transfer's
/// callback thread, taking the shard lock briefly and reading at most 4 KiB of a data file
/// (normally in the page cache: just written or read) with its slices pinned.
extension EngineCore {
    /// Bytes asked again before a range, to compare.
    static let overlapLength: Int64 = 4096

    /// True when `info`'s version can be checked only by its bytes: no strong ETag to send in
    /// `If-Range` (none, a weak one, or ETags ignored for its origin: `ignoringETag`).
    static func needsOverlapCheck(_ info: EntryInfo, ignoringETag: Bool) -> Bool {
        guard let etag = info.etag, !etag.hasPrefix("W/") else { return true }
        return ignoringETag
    }

    /// What a fetch of `start ..< end` of `entry` asks and compares (under the shard lock): the
    /// `overlapLength` bytes before it and after it, asked too, or its own first ones when they
    /// are held already (an open's probe over a cached head). Nil for an entry with a strong
    /// ETag or a new one.
    func overlapPlan(_ entry: EntryState, start: Int64, end: Int64?, ignoringETag: Bool) -> OverlapPlan? {
        guard entry.isPersisted, Self.needsOverlapCheck(entry.info, ignoringETag: ignoringETag) else { return nil }
        var plan = OverlapPlan(checks: [], requestStart: start, requestEnd: end)
        if start > 0 {
            plan.requestStart = max(0, start - Self.overlapLength)
            plan.checks.append(plan.requestStart..<start)
        } else {
            var own = start..<(start + Self.overlapLength)
            if let end { own = own.clamped(to: start..<end) }
            if let length = entry.info.length { own = own.clamped(to: 0..<length) }
            if !own.isEmpty, entry.pending.adding(to: entry.coverage).contains(own) { plan.checks.append(own) }
        }
        // After: a stream that ends where another (started later, from the new version) began
        // is compared with that one's first bytes when it gets there.
        if let end, let length = entry.info.length, end < length {
            plan.requestEnd = min(length, end + Self.overlapLength)
            plan.checks.append(end..<plan.requestEnd!)
        }
        return plan.checks.isEmpty ? nil : plan
    }

    /// The bytes of `range` that the entry holds at `generation`, from memory (pending) or its
    /// data file; nil unless all of them are held (nothing to compare).
    func heldBytes(_ handle: EntryHandle, shard: Shard, generation: Int64, range: Range<Int64>) -> [UInt8]? {
        enum Held { case memory([UInt8]), disk(id: Int64, slices: ClosedRange<Int64>) }
        let held: Held? = shard.locked { entries in
            guard let e = entries[handle], e.isCurrent(generation), e.isPersisted else { return nil }
            if e.coverage.contains(range) {
                let slices = self.slices(of: range)
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
            return (cancels, replanWaiters(entry, failed: nil))
        }
    }
}

/// What a fetch of a version without a strong validator asks for and compares.
struct OverlapPlan: Equatable {
    /// Ranges whose arriving bytes are compared with the held ones.
    var checks: [Range<Int64>]
    /// The request's range: the fetch's, widened by the overlaps.
    var requestStart: Int64
    var requestEnd: Int64?
}
