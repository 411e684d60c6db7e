import Foundation

/// The cap's scan share (`--scan-share`): the bytes scanner-class readers read (a media server's
/// probes: headers, indexes, tails), kept apart from playback's bytes so that a nightly re-scan
/// after weeks of playback never reaches the origin.
///
/// *The unit is a slice.* A slice a scanner's read touched (hit or miss), or one `preload --head`
/// / `--tail` read, becomes a scan slice (`EntryStateMachine.slicesScanned`), marked in the index
/// (`scan_slice`) so the mark survives restarts, until the slice leaves the disk. The share counts
/// a scan slice's bytes on disk, all of them: a film a player also read from its start holds a
/// whole slice in the share, a film only probed holds what the probe fetched.
///
/// *Eviction* (`Evictor.takeForEviction`): scan slices are offered only (1) when the share holds
/// more than `bound`, its own oldest, until it fits, before any other slice; (2) when nothing else
/// is left and the disk's free-space floor (not the cap) is what needs the room. A write for
/// playback never pushes a scan slice out otherwise: with every other slice in use or pinned, it
/// gets no room (its bytes reach their readers uncached). Pins (a read's, the user's) win over
/// the share as over everything. A bound of 0 turns the share off: no slice is marked, eviction
/// is plain LRU.
///
/// Thread-safe: a leaf lock around the count, added to under shard locks.
final class ScanShare: Sendable {
    /// Bytes of the cap the share may hold (0: off).
    let bound: Int64
    private let used = LockedValue<Int64>(0)

    init(bound: Int64) { self.bound = max(0, bound) }

    var isOn: Bool { bound > 0 }

    /// Bytes on disk of every scan slice now.
    var usedBytes: Int64 { used.withLock { $0 } }

    func add(_ n: Int64) {
        guard n != 0 else { return }
        used.withLock { $0 += n }
    }

    /// Splits scan slices (oldest first) into the oldest that must go for the rest to fit
    /// `bound` (`excess`) and those the share keeps (`kept`). `used` is the share's bytes now.
    static func split(_ scan: [Evictor.Candidate], used: Int64, bound: Int64) -> (excess: [Evictor.Candidate], kept: [Evictor.Candidate]) {
        var over = used - bound
        var i = 0
        while over > 0, i < scan.count {
            over -= scan[i].bytes
            i += 1
        }
        return (Array(scan[..<i]), Array(scan[i...]))
    }
}
