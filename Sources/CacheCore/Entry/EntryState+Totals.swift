import Foundation

/// An entry's part in the cache's running totals (`RunningTotals`): after each change of its
/// state machine it works out what it adds now and hands the totals the difference. Under the
/// shard lock, as every change of the entry; cheap when nothing counted changed (a read's
/// bookkeeping): a few fields compared, no lock taken.
extension EntryState {
    /// Counts the entry in `totals` from now on, as it is now.
    func attach(to totals: RunningTotals) {
        self.totals = totals
        reported = nil
        reportFigures()
    }

    /// What it adds to the totals now; nil while it is not live.
    func figures(in totals: RunningTotals) -> EntryFigures? {
        guard machine.isLive else { return nil }
        let content = machine.content
        let info = content.info
        let folder: Int32, listing: Bool
        if let reported, reported.contentType == info.contentType {
            (folder, listing) = (reported.folder, reported.listing)
        } else {
            // Its URL split (once, and again only for a new Content-Type: an HTML page is a listing).
            let place = FileStatus.placement(url: info.url, contentType: info.contentType)
            folder = reported?.folder ?? totals.folderNumber(FolderPlace(origin: place.origin, path: place.folder))
            listing = place.kind == "listing"
        }
        return EntryFigures(folder: folder, listing: listing, lengthBytes: info.length ?? 0, cachedBytes: content.coverage.count,
                            slices: EntryFigures.slices(content.coverage, sliceSize: totals.sliceSize),
                            withErrors: !content.recentErrors.isEmpty, contentType: info.contentType)
    }

    func reportFigures() {
        guard let totals else { return }
        let now = figures(in: totals)
        guard now != reported else { return }
        totals.replace(reported, with: now)
        reported = now
    }
}
