import Foundation
import Logging

/// Verified bytes: a slice that was on disk before this start is served only once its extents
/// matched their checksums.
///
/// Owns: the check of a slice against the XXH64 its extents were recorded with (read back and
/// compared by the `SliceStore`, which recorded them with their checksums), and what follows
/// a mismatch (the extents' rows dropped, the bytes forgotten and fetched again, logged and
/// counted). Bytes written by this process are trusted: they came from the network through it.
/// A read whose bytes lie in unverified slices is held until they are checked (a job of `pool`
/// with `verifyKey`, so checks run one at a time, in the order asked: disk reads and hashing,
/// never on a FUSE or event-loop thread), then planned again by the same job; the
/// sweeper checks one slice a second in the background (the scrub), so a long-running daemon
/// ends up with every slice checked. Runs under the shard lock only to read and update the
/// entry's `unverified` set.
///
/// Not covered: bytes another program changes in a data file after their slice was checked
/// (a daemon has it open; the check runs once per slice and start), and bytes the kernel still
/// has in its page cache from before a change on disk.
///
/// Threads: `verify` on a job of `pool` with `EngineCore.verifyKey`, blocking on the data file's
/// reads and hashing with no lock held; the rest under the entry's shard lock, as each says.
final class SliceVerifier: Sendable {
    private let configuration: CacheConfiguration
    private let store: SliceStore
    private let answers: ReadAnswers
    private let metrics: CacheMetrics
    private let logger: Logger

    init(configuration: CacheConfiguration, store: SliceStore, answers: ReadAnswers, metrics: CacheMetrics, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.answers = answers
        self.metrics = metrics
        self.logger = logger
    }

    /// The slices of `range` that must be checked before their bytes are served. Call under the
    /// shard lock.
    func unverifiedSlices(_ entry: EntryState, in range: Range<Int64>) -> [Int64] {
        let unverified = entry.unverified
        guard !unverified.isEmpty, !range.isEmpty else { return [] }
        return store.slices(of: range).filter { unverified.contains($0) }
    }

    /// How many slices past a read are checked ahead of its reader (a film read after a restart
    /// otherwise waits for each slice's disk read and hash in turn, and the disk idles while the
    /// reader reads).
    static let verifyAheadSlices: Int64 = 2

    /// The cached, unchecked slices just past `request` that no job is checking yet; marked as
    /// queued. Call under the shard lock.
    func slicesToVerifyAhead(_ entry: EntryState, after request: Range<Int64>) -> [Int64] {
        let first = store.sliceIndex(of: max(request.lowerBound, request.upperBound - 1)) + 1
        return entry.machine.verifyAheadRequested(Array(first..<(first + Self.verifyAheadSlices)))
    }

    /// Checks `slices` of `entry` (at `generation`) against their recorded checksums. Blocking:
    /// call from a job of `pool` with `EngineCore.verifyKey`. Returns the bytes found damaged (dropped, to be fetched again).
    @discardableResult
    func verify(_ entry: EntryHandle, shard: Shard, slices asked: [Int64], generation: Int64) -> Int64 {
        // Only what is still unchecked: reads of one slice queue a check each (the kernel's
        // read-ahead has several in flight), and the checks ahead of a reader queue theirs.
        // Removed (nothing found): nothing to check.
        let (id, wanted): (Int64?, [Int64]) = shard.locked { entries in
            guard let entry = entries[entry] else { return (nil, []) }
            let unchecked = entry.machine.verifyStarted(asked)
            guard entry.isCurrent(generation) && entry.isPersisted else { return (nil, []) }
            return (entry.id, unchecked)
        }
        guard let id, !wanted.isEmpty else { return 0 }
        let extents: [CacheIndex.ExtentRow]
        do {
            extents = try store.extents(entryID: id, generation: generation, slices: wanted)
        } catch {
            logger.warning("cannot read the index to check cached bytes; they stay unchecked", metadata: ["error": "\(error)"])
            return 0
        }
        var damaged: Int64 = 0
        for slice in wanted {
            let range = store.sliceRange(slice)
            shard.locked { $0[entry]?.pin(slice...slice, generation: generation) }
            var bad: [CacheIndex.ExtentRow] = []
            for x in extents where x.slice == slice {
                switch store.check(x) {
                case .matches: break
                case .differs: bad.append(x)
                case let .unreadable(e):
                    answers.logUnreadable(e)
                    bad.append(x)
                }
            }
            shard.locked { $0[entry]?.unpin(slice...slice, generation: generation) }
            if bad.isEmpty {
                markVerified(slice, of: entry, shard: shard, generation: generation)
                continue
            }
            let url = shard.locked { entries -> String in
                guard let entry = entries[entry] else { return entry.key.string }
                entry.noteError("cached bytes were damaged on disk; fetched again", at: configuration.clock())
                return entry.info.url
            }
            for x in bad {
                logger.warning("cached bytes damaged on disk (checksum mismatch); dropped, they will be fetched again",
                               metadata: ["url": "\(url)", "bytes": "\(x.start)-\(x.end - 1)"])
                damaged += x.end - x.start
            }
            metrics.damagedBytes.add(damaged)
            // The whole slice goes, rows and coverage (coverage is forgotten per slice): its
            // other extents are fine, but cheap to fetch again.
            store.dropExtents(extents.filter { $0.slice == slice })
            answers.forget(entry: entry, shard: shard, range: range, generation: generation)
            markVerified(slice, of: entry, shard: shard, generation: generation)
        }
        return damaged
    }

    private func markVerified(_ slice: Int64, of entry: EntryHandle, shard: Shard, generation: Int64) {
        shard.locked { entries in
            if let entry = entries[entry], entry.isCurrent(generation) { entry.machine.verifyFinished(slice) }
        }
    }
}
