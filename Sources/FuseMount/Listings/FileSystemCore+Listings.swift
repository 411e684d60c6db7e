import CacheCore
import Foundation
import Glibc
import Logging

/// Directories: snapshots for readdir, and HTML/JSON listings fetched, timed out and applied.
extension FileSystemCore {
    // MARK: Directories

    /// A listing past its TTL but within the stale window is served at once while one refresh
    /// runs in the background (stale-while-revalidate): `ls` never waits on the origin for a
    /// directory it listed lately, and shows what changed on the next look. Only a directory
    /// never listed, or not for longer than the window, waits for its listing.
    func opendir(_ ino: UInt64, reply: @escaping @Sendable (Result<UInt64, FSErrno>) -> Void) {
        let age: Result<ListingAge, FSErrno> = state.withLock { s in
            guard let node = s.table.node(ino) else { return .failure(FSErrno(ENOENT)) }
            guard let dir = node.directory else { return .failure(FSErrno(ENOTDIR)) }
            return .success(dir.index.map(listingAge) ?? .fresh)
        }
        switch age {
        case let .failure(e): reply(.failure(e))
        case .success(.fresh): reply(snapshot(ino))
        case .success(.stale):
            refreshInBackground(dirIno: ino)
            reply(snapshot(ino))
        case .success(.expired):
            refreshListing(dirIno: ino) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                reply(snapshot(ino))
            }
        }
    }

    /// Directory contents are frozen at opendir so readdir offsets stay valid.
    func snapshot(_ ino: UInt64) -> Result<UInt64, FSErrno> {
        state.withLock { s in
            guard let node = s.table.node(ino), let dir = node.directory else { return .failure(FSErrno(ENOENT)) }
            if dir.byURL == .schemes { addSchemeDirectories(under: node, &s) }
            let sorted = dir.children.sorted(by: { $0.key < $1.key })
            let children = sorted.compactMap { s.table.node($0.value) }
            let fh = s.nextHandle
            s.nextHandle += 1
            s.openDirs[fh] = DirSnapshot(ino: ino, parent: node.parent, children: children)
            // The kernel keeps the entries this handle reads until a change here (a refresh
            // that added, removed or renumbered a name) makes the next opendir drop them.
            if dir.cachedVersion == dir.version { s.keptDirs.insert(fh) }
            dir.cachedVersion = dir.version
            return .success(fh)
        }
    }

    /// Whether the kernel may keep what it cached of this handle's directory (`keep_cache` on
    /// opendir): nothing in it changed since the opendir that made that copy.
    func keepsDirectoryCache(fh: UInt64) -> Bool {
        state.withLock { $0.keptDirs.contains(fh) }
    }

    /// READDIRPLUS: entries from `offset` on, each with its attributes, handed to `add` in order
    /// until it returns false (the kernel's buffer is full). An entry added with attributes
    /// counts as a lookup (the kernel makes a dentry of it and forgets it later), so `ls -l` of
    /// a large folder costs no LOOKUP per name. "." and "..", names detached since the opendir
    /// and files whose size is not known yet go without attributes: the kernel looks those up
    /// itself. Under the lock: `add` only writes into the reply's buffer. False for a bad handle.
    func readdirplus(fh: UInt64, offset: Int, add: (_ index: Int, DirEntry, Attr?) -> Bool) -> Bool {
        state.withLock { s in
            guard let entries = s.openDirs[fh] else { return false }
            var i = max(offset, 0)
            while i < entries.count {
                let entry = entries[i]
                var attr: Attr?
                // The node still in the table: one the kernel forgot after it was detached is
                // gone from it, though this snapshot holds it.
                if let node = entries.child(at: i), node.attached, s.table.node(entry.ino) === node,
                   !(node.file.map(needsResolve) ?? false) {
                    attr = self.attr(node)
                }
                guard add(i, entry, attr) else { break }
                if attr != nil { s.table.lookedUp(entry.ino) }
                i += 1
            }
            return true
        }
    }

    /// READDIR: entries from `offset` on (offsets are indexes into the snapshot), handed to
    /// `add` in order until it returns false (the kernel's buffer is full). Under the lock, as
    /// `readdirplus`. False for a bad handle.
    func readdir(fh: UInt64, offset: Int, add: (_ index: Int, DirEntry) -> Bool) -> Bool {
        state.withLock { s in
            guard let entries = s.openDirs[fh] else { return false }
            var i = max(offset, 0)
            while i < entries.count, add(i, entries[i]) { i += 1 }
            return true
        }
    }

    func releasedir(fh: UInt64) {
        state.withLock {
            _ = $0.openDirs.removeValue(forKey: fh)
            $0.keptDirs.remove(fh)
        }
    }

    // MARK: Listings

    /// How a listing may be used now (under the lock: it reads the listing's state).
    enum ListingAge: Equatable {
        /// Within its TTL: used as it is.
        case fresh
        /// Past its TTL, within the stale window: used at once, refreshed in the background.
        case stale
        /// Never listed, or past the stale window: refreshed before it is used.
        case expired
    }

    func listingAge(_ idx: IndexState) -> ListingAge {
        guard let listed = idx.listedAt else { return .expired }
        let age = now().timeIntervalSince(listed)
        if age < options.listingTTL { return .fresh }
        return age < options.listingTTL + options.listingStaleWindow ? .stale : .expired
    }

    func isFresh(_ idx: IndexState) -> Bool { listingAge(idx) == .fresh }

    /// Starts a refresh of a listing nobody waits for (one at a time per listing: a refresh
    /// under way is joined, not repeated). A failure keeps the listing and waits
    /// `listingRetryDelay` before the next try, so an origin that is down sees no storm.
    func refreshInBackground(dirIno: UInt64) {
        refreshListing(dirIno: dirIno) { _ in }
    }

    /// What `refreshListing` found under the lock.
    private enum ListingRefreshStart {
        /// No listing to fetch: the directory has none, or it is fresh by now.
        case answered
        /// A fetch is under way: the caller waits for it.
        case joined
        /// Refused by the memory budget lately (`IndexState.refused`): the same answer, no fetch.
        case refused(CacheError)
        case fetch(UInt64, url: String)
    }

    /// Fetches the listing of an index directory (one fetch at a time per directory; callers
    /// that arrive meanwhile wait for it). On failure a previous listing stays in use.
    ///
    /// A listing that is fresh by now is answered at once, with no fetch. `opendir` and `lookup`
    /// judge its age on the FUSE thread before they call, and a refresh may end on an engine
    /// thread in between: fetching again would ignore what that refresh settled (a success's TTL,
    /// a failure's `listingRetryDelay`). The flaky no-storm test counted that extra request: a look
    /// that found the listing stale just before the failed refresh landed asked the origin that is
    /// down again at once.
    func refreshListing(dirIno: UInt64, completion: @escaping @Sendable (CacheError?) -> Void) {
        let start: ListingRefreshStart = state.withLock { s in
            guard let node = s.table.node(dirIno), let idx = node.directory?.index else { return .answered }
            if !idx.fetching, isFresh(idx) { return .answered }
            if !idx.fetching, idx.listedAt == nil, let refused = idx.refused,
               now().timeIntervalSince(refused.at) < Self.listingRetryDelay { return .refused(refused.error) }
            idx.waiters.append(completion)
            if idx.fetching { return .joined }
            idx.fetching = true
            return .fetch(s.beginListingFetch(node, idx), url: idx.url)
        }
        guard case let .fetch(fetch, url) = start else {
            if case .answered = start { completion(nil) }
            if case let .refused(error) = start { completion(error) }
            return
        }
        // The read timeout holds for the listing as a whole: an origin trickling it (one byte a
        // second still counts as progress to libcurl) must not keep `ls` waiting. The fetch may
        // go on and land in the cache; this answer no longer waits for it. A listing of many
        // pages (an S3 folder of 100k keys: 100 requests) holds it per page instead: the
        // deadline waits again while a page came since it was set (`ListingProgress`).
        let timeout = backend.readTimeout ?? options.readDeadline
        let progress = ListingProgress()
        // Down when the fetch starts or when it ends: either way the answer may be the cache's copy.
        let downAtStart = backend.isOriginDown(url: url)
        // The log says how long it really waited: a stalled transfer fails before the timeout.
        let started = clock.monotonic
        let finish = ReplyOnce<Result<[ListingEntry], CacheError>> { [self] result in
            listingFetched(result, fetch: fetch, url: url, waited: (clock.monotonic - started).timeInterval,
                           unconfirmed: downAtStart || backend.isOriginDown(url: url))
        }
        fetchListing(url: url, maxAge: options.listingTTL, progress: progress.note) { finish.fire($0) }
        if let timeout {
            @Sendable func arm() {
                deadlines.after(.seconds(timeout)) {
                    if progress.take() { arm() } else { finish.fire(.failure(.timeout(url: url))) }
                }
            }
            arm()
        }
    }

    /// Listings of index directories already fetched and parsed before the mount (the mount
    /// check's, `at` the time that check began): applied as if this mount had fetched them then,
    /// through the same budget, so the first `ls` neither fetches nor parses the page again (a
    /// hostile listing cost its parse twice). A directory listed or being listed meanwhile keeps
    /// its own; a listing no directory has is dropped.
    func seedListings(_ listings: [String: ListingFetch.Listing], at: Date) {
        guard !listings.isEmpty else { return }
        let fetches: [(fetch: UInt64, url: String, listing: ListingFetch.Listing)] = state.withLock { s in
            var found: [(UInt64, String, ListingFetch.Listing)] = []
            for node in s.table.nodes.values where node.attached {
                guard let idx = node.directory?.index, idx.listedAt == nil, !idx.fetching,
                      let listing = listings[idx.url] else { continue }
                idx.fetching = true
                found.append((s.beginListingFetch(node, idx), idx.url, listing))
            }
            return found
        }
        for seed in fetches {
            listingKinds.note(seed.listing, url: seed.url)
            // Served from the cache while the origin is down: applied, and refreshed on the next look.
            listingFetched(.success(seed.listing.entries), fetch: seed.fetch, url: seed.url, waited: nil,
                           unconfirmed: backend.isOriginDown(url: seed.url), listedAt: at)
        }
    }

    /// Applies a fetched listing (or its failure) and answers everyone waiting for it.
    /// `unconfirmed`: the listing is the cache's copy, served without asking an origin that is
    /// down. It is applied (the best there is) but counts as past its TTL, so the next look
    /// refreshes it in the background: once the origin is back, what changed there shows at once
    /// rather than a whole `--index-ttl` later. (Asking a down origin costs nothing: the cache
    /// answers at once without the network, so this brings no storm.) `listedAt`: when the
    /// listing was fetched, if before now (`seedListings`).
    func listingFetched(_ result: Result<[ListingEntry], CacheError>, fetch: UInt64, url: String,
                        waited: TimeInterval?, unconfirmed: Bool = false, listedAt: Date? = nil) {
        var parsed = result
        let cost: Int64 = (try? parsed.get()).map(Self.listingCost) ?? 0
        typealias Outcome = (waiters: [@Sendable (CacheError?) -> Void], Invalidations, CacheError?, KernelNotifier?)
        let (waiters, invalidations, failure, n): Outcome = state.withLock { s in
            // Each fetch ends once (`ReplyOnce`): not finding it would be a bug, which costs nothing here.
            guard let (node, idx) = s.listingFetches.removeValue(forKey: fetch) else { return ([], Invalidations(), nil, nil) }
            idx.fetching = false
            let waiters = idx.waiters
            idx.waiters = []
            // Still this directory's listing: a reload may have given it another URL meanwhile,
            // whose names this listing must not bring.
            let current = node.attached && node.directory?.index === idx
            if case let .success(entries) = parsed, current {
                // All listings together stay within the budget; this one replaces its own cost.
                let others = s.table.listingBytes - idx.cost
                if others + cost > options.listingBudget {
                    let refusal = CacheError.badResponse(url: url, message:
                        "the listing of \(entries.count) entries (about \(Self.mib(cost))) does not fit the listing memory budget of \(Self.mib(options.listingBudget)) (\(Self.mib(others)) taken by other listings; --listing-memory raises it)")
                    parsed = .failure(refusal)
                    idx.refused = (refusal, now())
                } else {
                    idx.refused = nil
                }
            }
            switch parsed {
            case let .success(entries):
                let inval = current ? applyListing(node, idx, entries, &s) : Invalidations()
                if current { s.table.setListingCost(idx, cost) }
                if let listedAt, current, let applied = idx.listedAt { idx.listedAt = min(listedAt, applied) }
                if unconfirmed, current { idx.listedAt = now().addingTimeInterval(-options.listingTTL) }
                return (waiters, inval, nil, s.notifier)
            case let .failure(error):
                if idx.listedAt != nil {
                    // Serve the stale listing for a while rather than failing every lookup.
                    idx.listedAt = now().addingTimeInterval(Self.listingRetryDelay - options.listingTTL)
                    return (waiters, Invalidations(), nil, s.notifier)
                }
                return (waiters, Invalidations(), error, s.notifier)
            }
        }
        if case let .failure(error) = parsed {
            let why = error == .timeout(url: url) ? "timed out after \(String(format: "%.1f", waited ?? 0))s" : "\(error)"
            logger.error("directory listing failed: \(url): \(why)\(failure == nil ? "; serving the previous listing" : "")")
        } else if case let .success(entries) = parsed {
            logger.debug("listed \(url): \(entries.count) entries")
        }
        for (parent, name) in invalidations.entries { n?.invalidateEntry(parent: parent, name: name) }
        for ino in invalidations.inodes { n?.invalidateInode(ino, data: false) }
        report(changes: invalidations.changed)
        for w in waiters { w(failure) }
        // A large listing's parse (its entries' array and URLs, a JSON decoder's work) is let go
        // once the fetch's closures are: a second later, its freed heap goes back to the system
        // (glibc keeps it otherwise: 28 MiB of 200,000 names, measured).
        if cost >= Self.listingTrimCost {
            deadlines.after(.seconds(1)) { HeapTrim.releaseFreedMemory() }
        }
    }

    /// What a listing's entries cost in memory once in the tree, entry by entry (`entryCost`).
    static func listingCost(_ entries: [ListingEntry]) -> Int64 {
        entries.reduce(0) { $0 + entryCost($1) }
    }

    /// What one listed entry keeps, by its parts: its `Node`, one 112-byte heap block with the
    /// file's state inside it (`ListingMemoryTests` pins that it fits); its slot in
    /// `InodeTable.nodes` (8 bytes, `NodeSlots`) and in its folder's `children` (a 24-byte
    /// bucket, counted at the 3/8 load a dictionary has just after it doubled: 64); its name's bytes
    /// when Swift keeps them on the heap (past 15), and its URL's last part when that is spelled
    /// otherwise than the name (percent escapes). A folder also keeps its own state and URL. The
    /// listing's parse (its page, its `ListingEntry` array) is let go once it is applied.
    static func entryCost(_ e: ListingEntry) -> Int64 {
        var cost = MountOptions.listingEntryCost + heapStringBytes(e.name.utf8.count)
        if e.isDirectory {
            cost += 256 + heapStringBytes(e.url.utf8.count)
        } else {
            let tail = e.url.utf8.lastIndex(of: UInt8(ascii: "/")).map { e.url.utf8[e.url.utf8.index(after: $0)...] }
            if let tail, !tail.elementsEqual(e.name.utf8) { cost += heapStringBytes(tail.count) }
        }
        return cost
    }

    /// The heap block a native String of `count` UTF-8 bytes takes: none up to 15 (they sit in
    /// the String itself), else its 32-byte header, the bytes and their NUL, and malloc's 8-byte
    /// header, in 16-byte steps.
    static func heapStringBytes(_ count: Int) -> Int64 {
        count <= 15 ? 0 : Int64((count + 1 + 32 + 8 + 15) / 16 * 16)
    }

    /// Listings costing this much are followed by a heap trim (`HeapTrim`): about 40,000 names.
    static let listingTrimCost: Int64 = 8 << 20

    static func mib(_ bytes: Int64) -> String {
        String(format: "%.1f MiB", Double(bytes) / Double(1 << 20))
    }

    /// The size a listing gives, if a file may have it: a negative size or one past
    /// FileLength.limit (a hostile listing) counts as missing, so the cache asks the origin on
    /// lookup, and that file alone fails if the origin claims the same.
    static func usableSize(_ e: ListingEntry) -> Int64? {
        e.size.flatMap { FileLength.isRepresentable($0) ? $0 : nil }
    }

    /// Merges a fresh listing into a directory. Under the lock (`s`).
    func applyListing(_ node: Node, _ idx: IndexState, _ listed: [ListingEntry], _ s: inout State) -> Invalidations {
        var invalidations = Invalidations()
        guard let dir = node.directory else { return invalidations }
        // `--include`/`--exclude`: what they leave out is as if not listed.
        var entries = listed
        if let filter = options.listingFilter {
            let base = s.table.path(of: node)
            let prefix = base == "/" ? "/" : base + "/"
            entries = listed.filter { filter.allows(prefix + $0.name, isDirectory: $0.isDirectory) }
        }
        // A first listing adds every name: that is no change anybody must hear of.
        let reports = idx.listedAt != nil
        let dirPath = reports ? path(of: node, s) : ""
        func changed(_ name: String) { if reports { invalidations.changed.append(dirPath.isEmpty ? name : dirPath + "/" + name) } }
        let names = Set(entries.map { EntryName($0.name) })
        for (name, ino) in s.table.listedChildren(of: dir) where !names.contains(name) {
            changed(name.string)
            invalidations.entries += s.table.detach(ino)
        }
        let t = now()
        // The files of one listing share their URLs' start (`URLPrefix`): one String for all.
        var prefix: URLPrefix?
        for e in entries {
            let size = Self.usableSize(e)
            if let existing = s.table.child(of: node.ino, named: e.name) {
                if existing.origin != .listing { continue }  // files given explicitly win
                if e.isDirectory, let d = existing.directory, d.index?.url == e.url {
                    if let m = e.modified { d.mtime = m }
                    continue
                }
                if !e.isDirectory, let f = existing.file, f.hasURL(e.url) {
                    if let size, size != f.size {
                        // The listing says the file changed; the next open asks the origin.
                        if f.size != nil { changed(e.name) }
                        existing.file?.size = size
                        invalidations.inodes.append(existing.ino)
                    }
                    if f.info == nil, let m = e.modified { existing.file?.mtime = m }
                    continue
                }
                invalidations.entries += s.table.detach(existing.ino)
            }
            let content: NodeContent
            if e.isDirectory {
                content = .directory(DirectoryState(mtime: e.modified ?? t, index: IndexState(url: e.url)))
            } else {
                prefix = FileState.sharedPrefix(of: e.url, reusing: prefix)
                content = .file(FileState(url: e.url, size: size, mtime: e.modified, prefix: prefix, name: e.name))
            }
            changed(e.name)
            s.table.add(parent: node.ino, name: e.name, origin: .listing, content: content)
        }
        idx.listedAt = t
        return invalidations
    }
}

/// Whether a listing of several pages moved on since its deadline was last set: each page taken
/// (`note`) lets the deadline wait one more timeout (`take`), so the timeout bounds each page,
/// never a listing that keeps coming. Threads: the page's and the scheduler's.
final class ListingProgress: Sendable {
    private let moved = LockedValue(false)

    @Sendable func note() { moved.withLock { $0 = true } }

    /// Whether a page came since the last call (and forgets it).
    func take() -> Bool { moved.withLock { m in defer { m = false }; return m } }
}
