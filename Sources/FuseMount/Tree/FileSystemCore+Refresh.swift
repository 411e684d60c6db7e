import CacheCore
import Foundation

/// What `refresh` did: how many listings were read again, and the ones that could not be.
public struct ListingRefresh: Sendable, Equatable {
    public var listings = 0
    /// One line per listing that failed ("URL: reason"); it keeps its previous contents.
    public var failures: [String] = []
}

/// Listings re-read on demand (`httpcachefs refresh`, SIGHUP), regardless of their TTL.
extension FileSystemCore {
    /// Re-reads, now, every listing at or under `path` (components from the mount's root; a file
    /// stands for its directory) that has been listed before, and the one at `path` itself. Each
    /// is fetched from the origin (the cached copy is revalidated at once), then applied as a
    /// listing whose TTL ran out is (`listingFetched`). `completion` gets nil when `path` is not in the mount.
    func refreshListings(under path: [String], completion: @escaping @Sendable (ListingRefresh?) -> Void) {
        let found: [(ino: UInt64, url: String)]? = state.withLock { s in
            var node = s.table.root
            for name in path {
                guard node.directory != nil, let child = s.table.child(of: node.ino, named: name) else { return nil }
                node = child
            }
            if node.directory == nil, let parent = s.table.node(node.parent) { node = parent }
            var found: [(UInt64, String)] = []
            var queue = [node.ino]
            while let ino = queue.popLast() {
                guard let n = s.table.node(ino), let dir = n.directory, dir.byURL == nil else { continue }
                if let idx = dir.index, idx.listedAt != nil || ino == node.ino { found.append((ino, idx.url)) }
                queue += dir.children.values
            }
            return found
        }
        guard let found else { return completion(nil) }
        beginChangeBatch()   // the command hears of every listing's changes at once
        let group = DispatchGroup()
        let result = LockedValue(ListingRefresh())
        for (ino, url) in found {
            group.enter()
            let downAtStart = backend.isOriginDown(url: url)
            // maxAge 0: the cache asks the origin now; the listing below then finds that copy fresh.
            fetchListing(url: url, maxAge: 0) { [self] fetched in
                switch fetched {
                case let .failure(error):
                    // The listing stays in use, but past its TTL: the next look tries again
                    // (a failure there holds further tries back for `listingRetryDelay`).
                    state.withLock { s in
                        guard let idx = s.table.node(ino)?.directory?.index, idx.url == url, let listed = idx.listedAt else { return }
                        idx.listedAt = min(listed, now().addingTimeInterval(-options.listingTTL))
                    }
                    result.withLock { $0.failures.append("\(DisplayURL.redacted(url)): \(error)") }
                    group.leave()
                case let .success(entries):
                    // The cache's copy, served because the origin is down: nothing was re-read.
                    // It stays in use, past its TTL, so the next look asks again (`listingFetched`);
                    // kept as fresh, it would hide what changed for a whole --index-ttl.
                    let unconfirmed = downAtStart || backend.isOriginDown(url: url)
                    // Applied as the mount applies a listing it fetched itself (waiters answered).
                    let fetch: UInt64? = state.withLock { s in
                        guard let node = s.table.node(ino), let idx = node.directory?.index, idx.url == url else { return nil }
                        idx.fetching = true
                        return s.beginListingFetch(node, idx)
                    }
                    if let fetch {
                        listingFetched(.success(entries), fetch: fetch, url: url, waited: nil, unconfirmed: unconfirmed)
                    }
                    result.withLock { r in
                        if unconfirmed {
                            r.failures.append("\(DisplayURL.redacted(url)): the origin is down; the cached listing stays in use and is asked again on the next look")
                        } else {
                            r.listings += 1
                        }
                    }
                    group.leave()
                }
            }
        }
        group.notify(queue: .global()) { [self] in
            endChangeBatch()
            completion(result.withLock { $0 })
        }
    }
}
