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
/// Threads: `plan` under the shard lock (in `TransferStarts.launch`); `Versions.heldBytes` on
/// the transfer's callback thread, taking the shard lock briefly and reading at most 4 KiB of a
/// data file (normally in the page cache: just written or read) with its slices pinned.
enum VersionOverlap {
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
    static func plan(_ entry: EntryState, start: Int64, end: Int64?, ignoringETag: Bool) -> OverlapPlan? {
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
}

/// What a fetch of a version without a strong validator asks for and compares.
struct OverlapPlan: Equatable {
    /// Ranges whose arriving bytes are compared with the held ones.
    var checks: [Range<Int64>]
    /// The request's range: the fetch's, widened by the overlaps.
    var requestStart: Int64
    var requestEnd: Int64?
}
