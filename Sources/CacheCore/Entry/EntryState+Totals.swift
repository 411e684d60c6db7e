import Foundation

/// An entry's part in the cache's running totals (`RunningTotals`): after each change of its
/// state machine it works out what it adds now and hands the totals the difference. Under the
/// shard lock, as every change of the entry; cheap when nothing counted changed (a read's
/// bookkeeping): a few fields compared, no lock taken.
extension EntryState {
    /// Counts the entry in `totals` from now on, as it is now.
    func attach(to totals: RunningTotals) {
        attach(to: totals, counted: nil)
    }

    /// Counts the entry in `totals` from now on, as already counting `counted` (an entry loaded
    /// from the index: what its row and extents add, which the start's count holds, or a
    /// let-go had left there); only what it adds beyond that goes in.
    func attach(to totals: RunningTotals, counted: EntryFigures?) {
        self.totals = totals
        reported = counted
        reportFigures()
    }

    /// What it adds to the totals now; nil while it is not live.
    func figures(in totals: RunningTotals) -> EntryFigures? {
        guard machine.isLive else { return nil }
        let content = machine.content
        return EntryFigures(info: content.info, coverage: content.coverage, withErrors: !content.recentErrors.isEmpty,
                            reported: reported, in: totals)
    }

    func reportFigures() {
        guard let totals else { return }
        // Most changes (a chunk arrived, a read asked) change nothing counted: compared field by
        // field, in place, without copying the entry's content (this runs after every event).
        if let reported, machine.isLive,
           machine.content.coverage.count == reported.cachedBytes,
           (machine.content.info.length ?? 0) == reported.lengthBytes,
           machine.content.recentErrors.isEmpty != reported.withErrors,
           machine.content.info.contentType == reported.contentType,
           EntryFigures.slices(machine.content.coverage, sliceSize: totals.sliceSize) == reported.slices {
            return
        }
        let now = figures(in: totals)
        guard now != reported else { return }
        totals.replace(reported, with: now)
        reported = now
    }
}

extension EntryFigures {
    /// What an entry of `info` holding `coverage` adds; `reported`: what it added before, whose
    /// folder is kept unless the Content-Type changed.
    init(info: EntryInfo, coverage: RangeSet, withErrors: Bool, reported: EntryFigures? = nil, in totals: RunningTotals) {
        let folder: Int32, listing: Bool
        if let reported, reported.contentType == info.contentType {
            (folder, listing) = (reported.folder, reported.listing)
        } else {
            // Its URL split (once, and again only for a new Content-Type: an HTML page is a listing).
            let place = FileStatus.placement(url: info.url, contentType: info.contentType)
            folder = reported?.folder ?? totals.folderNumber(FolderPlace(origin: place.origin, path: place.folder))
            listing = place.kind == "listing"
        }
        self.init(folder: folder, listing: listing, lengthBytes: info.length ?? 0, cachedBytes: coverage.count,
                  slices: EntryFigures.slices(coverage, sliceSize: totals.sliceSize), withErrors: withErrors,
                  contentType: info.contentType)
    }
}
