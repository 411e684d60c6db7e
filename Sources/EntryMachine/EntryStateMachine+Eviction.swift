import CoreTypes

/// Eviction's per-entry decision: which offered slice may leave now, and the marks that keep
/// writers out of a slice while its rows are being deleted.
///
/// The evictor (`Evictor.take`) offers a slice it found in its last scan, under the entry's
/// shard lock, with the facts of that slice now that the machine does not keep itself (its
/// bytes, when it was last read, the pins of reads and writes, the user's pins, and whether its
/// round still wants the entry: `--cache-max-age` asks again whether it is unread). The machine
/// answers `take` (and marks the slice `evicting`) or `keep` with the reason; the engine carries a
/// `take` out (drops the slice's coverage, bytes and access time, and counts the bytes freed).
/// `evictionCommitted` lifts the mark once the slice's rows are gone. No time is read: the
/// access time seen at the scan travels with the offer, and a slice read since (a different
/// time now) is kept, so eviction never needs a clock here.
extension EntryStateMachine {
    /// A slice as eviction's scan saw it.
    package struct EvictionOffer: Equatable {
        package var slice: Int64
        /// When it was last read or written, as the scan saw it.
        package var access: Double
        /// A scan slice (a scanner read it) when the scan saw it: offered only to keep the
        /// scan share within its bound, or when nothing else is left (`Evictor`).
        package var scan = false

        package init(slice: Int64, access: Double, scan: Bool = false) {
            self.slice = slice
            self.access = access
            self.scan = scan
        }
    }

    /// The offered slice's facts now, read by the caller under the shard lock.
    package struct SliceFacts: Equatable {
        /// Bytes of it on disk; nil: none (evicted already, or never written).
        package var bytes: Int64?
        /// When it was last read or written now.
        package var access: Double
        /// A read or a write is using it.
        package var pinned = false
        /// It holds bytes the user pinned (`preload --pin`).
        package var userPinned = false
        /// The round still wants this entry (`--cache-max-age`: still unread, no reader open).
        package var wanted = true
        /// A scanner read it (`slicesScanned`): a scan slice now.
        package var scan = false

        package init(bytes: Int64? = nil, access: Double, pinned: Bool = false, userPinned: Bool = false, wanted: Bool = true, scan: Bool = false) {
            self.bytes = bytes
            self.access = access
            self.pinned = pinned
            self.userPinned = userPinned
            self.wanted = wanted
            self.scan = scan
        }
    }

    package enum EvictionAnswer: Equatable {
        /// It leaves memory now, marked `evicting` until `evictionCommitted`: readers stop
        /// seeing it, writers stay out of it.
        case take
        case keep(KeepReason)
    }

    package enum KeepReason: Equatable {
        /// Not live: still probing (no row), or removed from its shard.
        case notLive
        /// No bytes of it are on disk (evicted or never written).
        case empty
        /// Already on its way out in another round.
        case evicting
        /// Pinned by a read or a write in progress.
        case inUse
        /// It holds bytes the user pinned.
        case userPinned
        /// Read or written since the scan: no longer among the oldest.
        case readSince
        /// A scanner read it since the scan: it is in the scan share now, which only its own
        /// oldest leave.
        case scannedSince
        /// The round no longer wants the entry.
        case notWanted
    }

    /// Slices whose rows an eviction is deleting now: nothing is written into them until that
    /// commit is done, or the row delete would take the new extents too.
    package var evicting: Set<Int64> {
        switch state {
        case let .probing(f), let .live(f): f.evicting
        case .removed: []
        }
    }

    /// Eviction offers to take `offer` of this entry, whose facts are `now`.
    package mutating func evictionOffered(_ offer: EvictionOffer, now slice: SliceFacts) -> EvictionAnswer {
        guard isLive else { return .keep(.notLive) }
        let reason: KeepReason? =
            if slice.pinned { .inUse }
            else if slice.bytes == nil { .empty }
            else if evicting.contains(offer.slice) { .evicting }
            else if slice.access != offer.access { .readSince }
            else if slice.scan && !offer.scan { .scannedSince }
            else if slice.userPinned { .userPinned }
            else if !slice.wanted { .notWanted }
            else { nil }
        if let reason { return .keep(reason) }
        changeFacts { _ = $0.evicting.insert(offer.slice) }
        return .take
    }

    /// The rows of `slices` are gone: writers may use them again.
    package mutating func evictionCommitted(_ slices: [Int64]) {
        changeFacts { $0.evicting.subtract(slices) }
    }
}
