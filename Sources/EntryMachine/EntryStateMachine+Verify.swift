import CoreTypes

/// The verify marks: which slices of the entry came from before this start and are not checked
/// against their checksums yet (their bytes are not served until they are), and which of those a
/// job will check ahead of a reader (so none is queued twice). `SliceVerifier` carries the
/// checks out (disk reads and hashing, as jobs of `Maintenance.verifyKey`); the machine only
/// keeps the marks, and answers which slices a request leaves to check.
///
/// Slices become unchecked only at start (`loadedUnchecked`), so the marks only shrink after
/// that: a check finishes (`verifyFinished`, whatever it found: damaged bytes were dropped), or
/// the entry's version changes (`uncheckedSlicesForgotten`: the old version's bytes are gone).
extension EntryStateMachine {
    /// Slices on disk since before this start whose extents were not checked yet.
    package var unverified: Set<Int64> {
        switch state {
        case let .probing(f), let .live(f): f.unverified
        case .removed: []
        }
    }

    /// Unchecked slices a job will check ahead of a reader.
    package var verifyQueued: Set<Int64> {
        switch state {
        case let .probing(f), let .live(f): f.verifyQueued
        case .removed: []
        }
    }

    /// At start: `slices` were found on disk, recorded by an earlier process.
    package mutating func loadedUnchecked(_ slices: [Int64]) {
        changeFacts { $0.unverified.formUnion(slices) }
    }

    /// A reader would have the `ahead` slices checked before it gets there: returns those that
    /// are unchecked and not queued yet, now queued (the caller submits their check).
    package mutating func verifyAheadRequested(_ ahead: [Int64]) -> [Int64] {
        changeFacts { f in
            let wanted = ahead.filter { f.unverified.contains($0) && !f.verifyQueued.contains($0) }
            f.verifyQueued.formUnion(wanted)
            return wanted
        } ?? []
    }

    /// A check job takes `asked`: none of them is queued any more, and the job checks those
    /// still unchecked (a read of one slice queues a check each time it waits; the first
    /// check that runs does the work).
    package mutating func verifyStarted(_ asked: [Int64]) -> [Int64] {
        changeFacts { f in
            f.verifyQueued.subtract(asked)
            return asked.filter { f.unverified.contains($0) }
        } ?? []
    }

    /// `slice` was checked (its damaged bytes, if any, dropped): its bytes are served now.
    package mutating func verifyFinished(_ slice: Int64) {
        changeFacts { _ = $0.unverified.remove(slice) }
    }

    /// The entry's version changed: nothing of the old one is left to check.
    package mutating func uncheckedSlicesForgotten() {
        changeFacts { f in
            f.unverified = []
            f.verifyQueued = []
        }
    }
}
