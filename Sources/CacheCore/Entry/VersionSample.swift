import Foundation

/// The sample: a version without validators checked where a fetch has no held neighbour.
///
/// The overlap check (`VersionOverlap`) compares the 4 KiB before a range with the held ones, but
/// a fetch into an uncached stretch (a seek) has nothing held there: an origin with neither ETag
/// nor Last-Modified replaced a file between a read of its head and a seek, and one open read
/// 8 MiB of the old version, then 8 MiB of the new. So a fetch of such a version whose first
/// bytes no held bytes precede (neither the 4 KiB before it nor, from byte 0, its own first
/// ones are held as it launches) first asks for a sample: the first held bytes of its version
/// (up to `length`: the file's first cached 4 KiB as a rule), in a small request of its own
/// (`SampleSink`), compared with the held ones. The same: its transfer starts. Other bytes, or
/// another length or date in the sample's head: the file changed, exactly as when an overlap
/// differs (`Versions.overlapDiffered`: a new version, the open's reads fail with
/// `remoteChanged`, its validation is forgotten, and the next open reads the new version whole).
/// An open's probe samples whenever bytes are held: its head answers the opens before its own
/// first bytes are compared, so without the sample an open of a file replaced since its last
/// check would be answered with the old version and fail every read; with it, the sample differs
/// first, the probe's head is taken as the new version, and the open reads that.
/// The sample cannot be asked: the fetch fails with its cause, having delivered nothing.
///
/// Why before, not beside: a transfer held open while its sample waits for a connection holds
/// one itself; with every connection to an origin (`--max-connections`) held that way by
/// fetches of several files, no sample would ever get one. Asked first, the sample needs one
/// connection for a moment, and nothing waits while holding one. What that leaves: a change in
/// the moment between the sample's answer and the fetch's (one round trip) is not seen by it;
/// the next comparison of the old bytes with the new finds it (a later fetch's overlap or
/// sample, the next open's probe), and the open's reads fail from then on.
///
/// Cost, on origins without a strong ETag only: one request of 4 KiB, and a round trip before
/// the first bytes, per fetch that launches with no held bytes before it (a seek away from
/// cached bytes, a read-ahead launched before its predecessor brought the 4 KiB before it) and
/// per open that checks a cached file (after `--revalidate-after`).
/// Not caught: a change that keeps the sampled bytes (an edit in place elsewhere).
///
/// Pure: the engine plans under the shard lock (`plan`) and acts on the answer (`Outcome`).
enum VersionSample {
    /// Bytes a sample compares.
    static let length: Int64 = 4096

    /// The bytes a fetch from `start` of `info`'s version samples before it starts, or nil when
    /// it needs none: a version with a strong ETag (`If-Range` says), one not saved yet (its
    /// first answer: nothing held to mix with), a listing page (read whole, and a page that
    /// changed is a new version by its probe's head), a fetch whose overlap `checks`
    /// (`overlapPlan`) compare held bytes before its first delivered one, or nothing held at all.
    /// An open's probe (`isProbe`) samples whenever bytes are held: its head answers the opens
    /// before its own first bytes are compared, and an open answered with the old version would
    /// fail all its reads once they differ; the sample finds the change first, and the opens get
    /// the new version.
    static func plan(_ info: EntryInfo, persisted: Bool, ignoringETag: Bool, isProbe: Bool = false, listingPage: Bool = false,
                     start: Int64, checks: [Range<Int64>], coverage: RangeSet, pending: RangeSet) -> Range<Int64>? {
        guard persisted, !listingPage, VersionOverlap.needsOverlapCheck(info, ignoringETag: ignoringETag) else { return nil }
        var held = coverage
        for r in pending.ranges { held.insert(r) }
        // The 4 KiB before the range, or (from byte 0) its own first ones: compared as they come,
        // before any byte after them is delivered. The 4 KiB after its end are compared only
        // after it delivered its bytes.
        if !isProbe, checks.contains(where: { $0.lowerBound <= start && held.contains($0) }) { return nil }
        return plan(coverage: coverage, pending: pending)
    }

    /// The bytes to sample for a version held as `coverage` (on disk) and `pending` (in memory):
    /// the first `length` of the first held stretch that long, on disk before in memory (a
    /// sample is compared with bytes held all in one of the two); else the first held bytes
    /// there are. Nil when nothing is held: there is nothing to mix with.
    static func plan(coverage: RangeSet, pending: RangeSet) -> Range<Int64>? {
        for held in [coverage, pending] {
            if let run = held.ranges.first(where: { $0.length >= length }) {
                return run.lowerBound..<(run.lowerBound + length)
            }
        }
        return coverage.ranges.first ?? pending.ranges.first
    }

    /// How a sample's answer compared.
    enum Verdict: Equatable, Sendable {
        case same
        /// Other bytes, or another length or date in its head.
        case differs
        /// The held bytes went (evicted, or a new version) before they could be compared.
        case notHeld
        case failed(FetchError)
    }

    /// What the fetch waiting on a sample does.
    enum Outcome: Equatable {
        /// Its transfer starts; `knownChanged`: its head is taken as another version whatever it
        /// says (an open's probe whose sample differed: the head starts the new version, and
        /// the opens get it).
        case start(knownChanged: Bool)
        /// The file changed: a new version starts, and the fetch ends with `remoteChanged`,
        /// never started.
        case changed
        /// It ends with the sample's error, never started.
        case fail(FetchError)
    }

    static func outcome(of verdict: Verdict, probe: Bool) -> Outcome {
        switch verdict {
        // Held bytes gone: a new version (nothing of it to mix with, and the fetch, of the old
        // one, stops at its first bytes) or evicted ones; goes on as without a sample.
        case .same, .notHeld: return .start(knownChanged: false)
        case .differs: return probe ? .start(knownChanged: true) : .changed
        case let .failed(error): return .fail(error)
        }
    }
}
