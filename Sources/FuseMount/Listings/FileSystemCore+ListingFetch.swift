import CacheCore
import Foundation

/// The mount's listings through `ListingFetch`: HTML or JSON by GET, WebDAV by PROPFIND, with
/// what each folder turned out to be remembered in `listingKinds`.
extension FileSystemCore {
    /// The parsed listing of the folder at `url`. Runs the completion on a backend thread.
    func fetchListing(url: String, maxAge: TimeInterval, progress: (@Sendable () -> Void)? = nil,
                      completion: @escaping @Sendable (Result<[ListingEntry], CacheError>) -> Void) {
        let kinds = listingKinds
        // Each entry costs at least `listingEntryCost` of the budget (`listingCost`): a page with
        // more than the budget's worth fails as it is parsed, before its entries take the memory.
        let maxEntries = options.maxListingEntries
        ListingFetch.fetch(url: url, through: backend, limit: options.maxListingBytes, maxAge: maxAge,
                           webDAVFirst: kinds.isWebDAV(url), timers: deadlines, logger: logger, maxEntries: maxEntries, progress: progress) { fetched in
            if case let .success(listing) = fetched { kinds.note(listing, url: url) }
            completion(fetched.map(\.entries))
        }
    }
}
