import CoreTypes

/// Whether an open is answered from what the entry knows (`openRequested`'s `fresh`).
extension EntryStateMachine {
    package struct Freshness: Equatable {
        /// The entry's version was checked within `maxAge` (0: always check) and its length is
        /// known; or the origin is down and a live entry with a length is served as it is
        /// (`offline`: say that the check was skipped).
        package var fresh: Bool
        package var offline: Bool

        /// - Parameters:
        ///   - age: seconds since the version was last checked (`validatedAt`), on the injected clock.
        ///   - originDown: the origin is known to be down (`OriginHealthReporting`).
        ///   - live: the entry has an index row (bytes of it may be cached).
        package init(maxAge: Double, lengthKnown: Bool, age: Double, originDown: Bool, live: Bool) {
            fresh = maxAge > 0 && lengthKnown && age < maxAge
            // Offline: the origin cannot be asked; what the cache holds is served as it is.
            offline = !fresh && originDown && live && lengthKnown
            fresh = fresh || offline
        }
    }

    /// What a metadata probe asks for: revalidating a cached head costs one byte; a new entry
    /// (or one whose head is not on disk) takes its first `probeLength` bytes along (file
    /// headers, a moov atom's start), unless the open said not to.
    package static func probeFetch(takeFirstBytes: Bool, coverage: RangeSet, length: Int64?, probeLength: Int64) -> ReadPlanner.Fetch {
        let headerCached = coverage.contains(0..<min(probeLength, length ?? probeLength))
        return ReadPlanner.Fetch(start: 0, end: !takeFirstBytes || headerCached ? 1 : probeLength)
    }
}
