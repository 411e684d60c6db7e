import CacheCore
import Foundation
import Glibc
import Logging

/// Attributes as the core sees them; the FUSE glue turns them into `struct stat`.
struct Attr: Equatable {
    var ino: UInt64
    var isDirectory: Bool
    var size: Int64
    var mtime: Date
    /// How long the kernel may trust the name and these attributes.
    var ttl: TimeInterval
}

/// An errno as an Error, for `Result`.
struct FSErrno: Error, Equatable, CustomStringConvertible {
    var code: Int32
    init(_ code: Int32) { self.code = code }
    var description: String { String(cString: strerror(code)) }
}

struct DirEntry: Equatable {
    var name: String
    var ino: UInt64
    var isDirectory: Bool
}

struct OpenReply: Equatable {
    var fh: UInt64
    /// The kernel may keep its page cache: same generation as at the last open.
    var keepCache: Bool
}

struct FSStats: Equatable {
    var blockSize: UInt64
    var blocks: UInt64
    var freeBlocks: UInt64
    var files: UInt64
}

/// Tells the kernel to drop what it cached. Implementations must not block the caller on the
/// kernel (FuseSession sends from its own queue).
protocol KernelNotifier: AnyObject, Sendable {
    /// Attributes, and the page cache too when `data` is true (queued: dropping pages can wait
    /// on reads in flight).
    func invalidateInode(_ ino: UInt64, data: Bool)
    /// Queued: the kernel takes the parent directory's lock, which a lookup in progress holds.
    func invalidateEntry(parent: UInt64, name: String)
    /// Attributes only, before returning: safe inside an operation (takes no inode lock), and
    /// needed before an open reply so the first read sees the new size.
    func invalidateAttributesNow(_ ino: UInt64)
    /// Waits until queued invalidations were sent (never call from a FUSE operation).
    func flush()
}

/// The file system in plain Swift: names, attributes, handles, listings, revalidation.
///
/// Every operation answers through a completion, called exactly once, possibly later from an
/// engine thread; nothing here waits on the network. One lock guards all state, is never held
/// while calling the backend, the notifier or a completion, and no operation takes it for longer
/// than a dictionary update (listing parsing happens outside it).
final class FileSystemCore: @unchecked Sendable {
    let backend: MountBackend
    let options: MountOptions
    let logger: Logger
    private let now: @Sendable () -> Date
    let mountTime: Date
    /// Listings larger than this are refused (someone pointed --index at a video).
    static let listingLimit = 64 << 20
    /// After a failed refresh, a stale listing is served this long before trying again.
    static let listingRetryDelay: TimeInterval = 30

    private let lock = NSLock()
    private var table: InodeTable                   // guarded by lock
    private var currentSpec: MountTreeSpec          // guarded by lock
    private var openFiles: [UInt64: OpenFile] = [:] // guarded by lock
    private var openDirs: [UInt64: [DirEntry]] = [:] // guarded by lock
    private var nextHandle: UInt64 = 1              // guarded by lock
    private var inodesByKey: [CacheKey: Set<UInt64>] = [:] // guarded by lock
    private var notifier: KernelNotifier?           // guarded by lock
    private var closed = false                      // guarded by lock
    private let deadlineQueue = DispatchQueue(label: "httpcachefs.fuse.read-deadline")
    /// The engine reads cached bytes from disk on the caller's thread, so reads leave the FUSE
    /// loop: each open file has a serial queue (one reader's reads stay in order, as the
    /// engine's sequential detection expects), and files run in parallel on this one.
    private let readQueue = DispatchQueue(label: "httpcachefs.fuse.read", attributes: .concurrent)

    struct OpenFile {
        var ino: UInt64
        var url: String
        var reader: MountReader
        var queue: DispatchQueue
    }

    init(backend: MountBackend, spec: MountTreeSpec, options: MountOptions, logger: Logger,
         now: @escaping @Sendable () -> Date = { Date() }) {
        self.backend = backend
        self.options = options
        self.logger = logger
        self.now = now
        self.mountTime = now()
        self.table = InodeTable(rootMtime: mountTime)
        self.currentSpec = MountTreeSpec()
        _ = apply(spec: spec)
        backend.onRemoteChange { [weak self] info in self?.remoteChanged(info) }
    }

    /// The tree spec in force.
    var spec: MountTreeSpec { lock.withLock { currentSpec } }

    func attach(notifier: KernelNotifier?) {
        lock.withLock { self.notifier = notifier }
    }

    // MARK: Tree spec (start and reload)

    /// Replaces the spec-built part of the tree with `newSpec`, keeping every node whose path
    /// and URL did not change (so open files and kernel caches survive a reload).
    func reload(spec newSpec: MountTreeSpec) {
        let (invalidations, n) = lock.withLock { (apply(spec: newSpec), notifier) }
        for (parent, name) in invalidations { n?.invalidateEntry(parent: parent, name: name) }
        n?.flush()  // when reload returns, removed names are gone from the kernel's cache too
    }

    /// Caller holds the lock (or is init).
    private func apply(spec newSpec: MountTreeSpec) -> [(parent: UInt64, name: String)] {
        enum Want: Equatable { case file(String), index(String), directory, byURL }
        var wanted: [[String]: Want] = [:]
        for f in newSpec.files {
            wanted[f.path] = .file(f.url)
            for n in stride(from: 1, to: f.path.count, by: 1) where wanted[Array(f.path.prefix(n))] == nil {
                wanted[Array(f.path.prefix(n))] = .directory
            }
        }
        var rootIndex: String?
        for i in newSpec.indexes {
            if i.path.isEmpty { rootIndex = i.url; continue }
            wanted[i.path] = .index(i.url)
            for n in stride(from: 1, to: i.path.count, by: 1) where wanted[Array(i.path.prefix(n))] == nil {
                wanted[Array(i.path.prefix(n))] = .directory
            }
        }
        if newSpec.byURL { wanted[[MountTreeSpec.byURLName]] = .byURL }

        var invalidations: [(UInt64, String)] = []
        // Root index: changed URL means a different listing.
        let root = table.root.directory!
        if root.index?.url != rootIndex {
            for name in root.index?.listed ?? [] {
                if let ino = root.children[name] { invalidations += table.detach(ino) }
            }
            root.index = rootIndex.map(IndexState.init)
        }
        // Remove spec nodes that are no longer wanted as they are.
        func have(_ node: Node) -> Want? {
            switch node.content {
            case let .file(f): return .file(f.url)
            case let .directory(d):
                if d.byURL == .schemes { return .byURL }
                if let i = d.index { return .index(i.url) }
                return .directory
            }
        }
        func prune(_ dirIno: UInt64, _ path: [String]) {
            guard let dir = table.node(dirIno)?.directory else { return }
            for (name, ino) in dir.children.sorted(by: { $0.key < $1.key }) {
                guard let child = table.node(ino), child.origin == .spec else { continue }
                let childPath = path + [name]
                if let want = wanted[childPath], want == have(child) {
                    if child.directory != nil { prune(ino, childPath) }
                } else {
                    invalidations += table.detach(ino)
                }
            }
        }
        prune(InodeTable.rootIno, [])
        // Add what is missing, parents first.
        for (path, want) in wanted.sorted(by: { $0.key.count < $1.key.count || ($0.key.count == $1.key.count && $0.key.lexicographicallyPrecedes($1.key)) }) {
            var parent: UInt64? = InodeTable.rootIno
            for name in path.dropLast() { parent = parent.flatMap { table.child(of: $0, named: name)?.ino } }
            guard let parent, table.node(parent)?.directory != nil, let name = path.last else { continue }
            if let existing = table.child(of: parent, named: name), existing.origin == .spec { continue }
            let content: NodeContent
            switch want {
            case let .file(url): content = .file(FileState(url: url))
            case let .index(url): content = .directory(DirectoryState(mtime: mountTime, index: IndexState(url: url)))
            case .directory: content = .directory(DirectoryState(mtime: mountTime))
            case .byURL: content = .directory(DirectoryState(mtime: mountTime, byURL: .schemes))
            }
            let hadListed = table.child(of: parent, named: name) != nil
            table.add(parent: parent, name: name, origin: .spec, content: content)
            table.node(parent)?.directory?.index?.listed.remove(name)
            if hadListed { invalidations.append((parent, name)) }
        }
        currentSpec = newSpec
        return invalidations
    }

    // MARK: Names and attributes

    func lookup(parent: UInt64, name: String, reply: @escaping (Result<Attr, FSErrno>) -> Void) {
        lookup(parent: parent, name: name, afterListing: false, reply: reply)
    }

    private enum LookupStep {
        case done(Result<Attr, FSErrno>)
        case resolve(Node, FileState)
        case refreshListing
        case byURL(ByURLLevel)
    }

    private func lookup(parent: UInt64, name: String, afterListing: Bool,
                        reply: @escaping (Result<Attr, FSErrno>) -> Void) {
        let step: LookupStep = lock.withLock {
            guard let p = table.node(parent) else { return .done(.failure(FSErrno(ENOENT))) }
            guard let dir = p.directory else { return .done(.failure(FSErrno(ENOTDIR))) }
            if let child = table.child(of: parent, named: name) {
                if let f = child.file, needsResolve(f) { return .resolve(child, f) }
                table.lookedUp(child.ino)
                return .done(.success(attr(child)))
            }
            if let level = dir.byURL { return .byURL(level) }
            if let idx = dir.index, !afterListing, !isFresh(idx) { return .refreshListing }
            return .done(.failure(FSErrno(ENOENT)))
        }
        switch step {
        case let .done(result):
            reply(result)
        case let .resolve(node, file):
            resolve(node, file) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                reply(lock.withLock {
                    guard node.attached else { return .failure(FSErrno(ENOENT)) }
                    table.lookedUp(node.ino)
                    return .success(attr(node))
                })
            }
        case .refreshListing:
            refreshListing(dirIno: parent) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                lookup(parent: parent, name: name, afterListing: true, reply: reply)
            }
        case let .byURL(level):
            resolveByURL(parent: parent, level: level, name: name, reply: reply)
        }
    }

    func forget(_ ino: UInt64, count: UInt64) {
        lock.withLock { table.forget(ino, count: count) }
    }

    func getattr(_ ino: UInt64, reply: @escaping (Result<Attr, FSErrno>) -> Void) {
        let step: LookupStep = lock.withLock {
            guard let node = table.node(ino) else { return .done(.failure(FSErrno(ENOENT))) }
            if let f = node.file, needsResolve(f) { return .resolve(node, f) }
            return .done(.success(attr(node)))
        }
        switch step {
        case let .resolve(node, file):
            resolve(node, file) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                reply(.success(lock.withLock { attr(node) }))
            }
        case let .done(result): reply(result)
        default: reply(.failure(FSErrno(EIO)))
        }
    }

    /// A file needs the cache's word when its size is unknown or its check is too old.
    private func needsResolve(_ f: FileState) -> Bool {
        guard f.size != nil, let checked = f.checkedAt else { return true }
        return now().timeIntervalSince(checked) >= options.revalidateAfter
    }

    /// Asks the cache about a file (which revalidates it with the origin when stale).
    private func resolve(_ node: Node, _ file: FileState, completion: @escaping (CacheError?) -> Void) {
        let url = lock.withLock { file.url }
        backend.open(url: url) { [self] result in
            switch result {
            case let .failure(error):
                logger.warning("lookup failed: \(url): \(error)")
                completion(error)
            case let .success(info):
                lock.withLock { record(info, for: node, file) }
                completion(nil)
            }
        }
    }

    /// Caller holds the lock.
    private func record(_ info: EntryInfo, for node: Node, _ file: FileState) {
        file.update(from: info, at: now())
        inodesByKey[info.key, default: []].insert(node.ino)
    }

    private func attr(_ node: Node) -> Attr {
        switch node.content {
        case let .file(f): return Attr(ino: node.ino, isDirectory: false, size: f.size ?? 0, mtime: f.mtime ?? mountTime, ttl: ttl(node))
        case let .directory(d): return Attr(ino: node.ino, isDirectory: true, size: 0, mtime: d.mtime, ttl: ttl(node))
        }
    }

    /// Children of a listing are trusted no longer than the listing itself.
    private func ttl(_ node: Node) -> TimeInterval {
        node.origin == .listing ? min(options.revalidateAfter, options.listingTTL) : options.revalidateAfter
    }

    // MARK: Files

    func open(_ ino: UInt64, flags: Int32, reply: @escaping (Result<OpenReply, FSErrno>) -> Void) {
        if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 { return reply(.failure(FSErrno(EROFS))) }
        let target: Result<(Node, FileState, String), FSErrno> = lock.withLock {
            guard let node = table.node(ino) else { return .failure(FSErrno(ENOENT)) }
            guard let f = node.file else { return .failure(FSErrno(EISDIR)) }
            return .success((node, f, f.url))
        }
        guard case let .success((node, file, url)) = target else {
            if case let .failure(e) = target { reply(.failure(e)) }
            return
        }
        backend.open(url: url) { [self] result in
            switch result {
            case let .failure(error):
                logger.error("open failed: \(url): \(error)")
                reply(.failure(FSErrno(error.errno)))
            case let .success(info):
                let reader = backend.makeReader(for: info)
                let outcome: (OpenReply, Bool, KernelNotifier?)? = lock.withLock {
                    if closed { return nil }
                    let oldSize = file.size
                    record(info, for: node, file)
                    let keep = file.lastOpenGeneration == info.generation
                    let changed = oldSize != file.size || (file.lastOpenGeneration != nil && !keep)
                    file.lastOpenGeneration = info.generation
                    let fh = nextHandle
                    nextHandle += 1
                    openFiles[fh] = OpenFile(ino: ino, url: url, reader: reader,
                                             queue: DispatchQueue(label: "httpcachefs.fuse.read.\(fh)", target: readQueue))
                    return (OpenReply(fh: fh, keepCache: keep), changed, notifier)
                }
                guard let (open, changed, n) = outcome else {
                    reader.close()
                    return reply(.failure(FSErrno(EIO)))
                }
                // The open reply carries no attributes: a new size must reach the kernel this way,
                // before the first read clips at the old one.
                if changed { n?.invalidateAttributesNow(ino) }
                reply(.success(open))
            }
        }
    }

    /// Reads through the handle's reader; fails with EIO once `readDeadline` passes.
    func read(fh: UInt64, offset: Int64, size: Int, reply: @escaping (Result<[UInt8], FSErrno>) -> Void) {
        guard let file = lock.withLock({ openFiles[fh] }) else { return reply(.failure(FSErrno(EBADF))) }
        let once = ReplyOnce(reply)
        let range = "bytes \(offset)-\(offset + Int64(size) - 1)"
        file.queue.async { [logger, deadlineQueue, readDeadline = options.readDeadline] in
            file.reader.read(offset: offset, length: size) { result in
                switch result {
                case let .success(bytes):
                    once.fire(.success(bytes))
                case let .failure(error):
                    if once.fire(.failure(FSErrno(error.errno))), error != .cancelled {
                        logger.error("read failed: \(file.url) \(range): \(error)")
                    }
                }
            }
            // A cache hit has been answered by now; only reads still waiting get a deadline
            // (a backstop behind the engine's own read timeout).
            guard let readDeadline, !once.hasFired else { return }
            deadlineQueue.asyncAfter(deadline: .now() + readDeadline) {
                if once.fire(.failure(FSErrno(EIO))) {
                    logger.error("read timed out after \(readDeadline)s: \(file.url) \(range)")
                }
            }
        }
    }

    func release(fh: UInt64) {
        lock.withLock { openFiles.removeValue(forKey: fh) }?.reader.close()
    }

    // MARK: Directories

    func opendir(_ ino: UInt64, reply: @escaping (Result<UInt64, FSErrno>) -> Void) {
        let refresh: Result<Bool, FSErrno> = lock.withLock {
            guard let node = table.node(ino) else { return .failure(FSErrno(ENOENT)) }
            guard let dir = node.directory else { return .failure(FSErrno(ENOTDIR)) }
            if let idx = dir.index, !isFresh(idx) { return .success(true) }
            return .success(false)
        }
        switch refresh {
        case let .failure(e): reply(.failure(e))
        case .success(false): reply(snapshot(ino))
        case .success(true):
            refreshListing(dirIno: ino) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                reply(snapshot(ino))
            }
        }
    }

    /// Directory contents are frozen at opendir so readdir offsets stay valid.
    private func snapshot(_ ino: UInt64) -> Result<UInt64, FSErrno> {
        lock.withLock {
            guard let node = table.node(ino), let dir = node.directory else { return .failure(FSErrno(ENOENT)) }
            var entries = [DirEntry(name: ".", ino: ino, isDirectory: true),
                           DirEntry(name: "..", ino: node.parent, isDirectory: true)]
            for (name, childIno) in dir.children.sorted(by: { $0.key < $1.key }) {
                guard let child = table.node(childIno) else { continue }
                entries.append(DirEntry(name: name, ino: childIno, isDirectory: child.directory != nil))
            }
            let fh = nextHandle
            nextHandle += 1
            openDirs[fh] = entries
            return .success(fh)
        }
    }

    /// Entries from `offset` on (offsets are indexes into the snapshot), or nil for a bad handle.
    func readdir(fh: UInt64, offset: Int) -> ArraySlice<DirEntry>? {
        lock.withLock {
            guard let entries = openDirs[fh] else { return nil }
            return offset < entries.count ? entries[max(offset, 0)...] : []
        }
    }

    func releasedir(fh: UInt64) {
        lock.withLock { _ = openDirs.removeValue(forKey: fh) }
    }

    // MARK: Listings

    private func isFresh(_ idx: IndexState) -> Bool {
        guard let listed = idx.listedAt else { return false }
        return now() < listed.addingTimeInterval(options.listingTTL)
    }

    /// Fetches the listing of an index directory (one fetch at a time per directory; callers
    /// that arrive meanwhile wait for it). On failure a previous listing stays in use.
    private func refreshListing(dirIno: UInt64, completion: @escaping (CacheError?) -> Void) {
        let start: (Node, IndexState, String)? = lock.withLock {
            guard let node = table.node(dirIno), let idx = node.directory?.index else { return nil }
            idx.waiters.append(completion)
            if idx.fetching { return nil }
            idx.fetching = true
            return (node, idx, idx.url)
        }
        guard let (node, idx, url) = start else {
            if lock.withLock({ table.node(dirIno)?.directory?.index == nil }) { completion(nil) }
            return
        }
        backend.fetchWhole(url: url, limit: Self.listingLimit, maxAge: options.listingTTL) { [self] result in
            let parsed: Result<[ListingEntry], CacheError>
            switch result {
            case let .success(bytes):
                do { parsed = .success(try DirectoryListing.parse(bytes, url: url, logger: logger)) } catch {
                    parsed = .failure(.badResponse(url: url, message: "\(error)"))
                }
            case let .failure(error): parsed = .failure(error)
            }
            let (waiters, invalidations, failure, n): ([(CacheError?) -> Void], Invalidations, CacheError?, KernelNotifier?) = lock.withLock {
                idx.fetching = false
                let waiters = idx.waiters
                idx.waiters = []
                switch parsed {
                case let .success(entries):
                    let inval = node.attached ? applyListing(node, idx, entries) : Invalidations()
                    return (waiters, inval, nil, notifier)
                case let .failure(error):
                    if idx.listedAt != nil {
                        // Serve the stale listing for a while rather than failing every lookup.
                        idx.listedAt = now().addingTimeInterval(Self.listingRetryDelay - options.listingTTL)
                        return (waiters, Invalidations(), nil, notifier)
                    }
                    return (waiters, Invalidations(), error, notifier)
                }
            }
            if case let .failure(error) = parsed {
                logger.error("directory listing failed: \(url): \(error)")
            } else if case let .success(entries) = parsed {
                logger.debug("listed \(url): \(entries.count) entries")
            }
            for (parent, name) in invalidations.entries { n?.invalidateEntry(parent: parent, name: name) }
            for ino in invalidations.inodes { n?.invalidateInode(ino, data: false) }
            for w in waiters { w(failure) }
        }
    }

    /// Merges a fresh listing into a directory. Caller holds the lock.
    private func applyListing(_ node: Node, _ idx: IndexState, _ entries: [ListingEntry]) -> Invalidations {
        var invalidations = Invalidations()
        guard let dir = node.directory else { return invalidations }
        let names = Set(entries.map(\.name))
        for name in idx.listed where !names.contains(name) {
            if let ino = dir.children[name], table.node(ino)?.origin == .listing { invalidations.entries += table.detach(ino) }
        }
        idx.listed = []
        let t = now()
        for e in entries {
            if let existing = table.child(of: node.ino, named: e.name) {
                if existing.origin != .listing { continue }  // files given explicitly win
                if e.isDirectory, let d = existing.directory, d.index?.url == e.url {
                    if let m = e.modified { d.mtime = m }
                    idx.listed.insert(e.name)
                    continue
                }
                if !e.isDirectory, let f = existing.file, f.url == e.url {
                    if let size = e.size, size != f.size {
                        // The listing says the file changed: trust it only as far as asking the cache again.
                        f.size = size
                        f.checkedAt = nil
                        invalidations.inodes.append(existing.ino)
                    }
                    if f.info == nil, let m = e.modified { f.mtime = m }
                    idx.listed.insert(e.name)
                    continue
                }
                invalidations.entries += table.detach(existing.ino)
            }
            let content: NodeContent = e.isDirectory
                ? .directory(DirectoryState(mtime: e.modified ?? t, index: IndexState(url: e.url)))
                : .file(FileState(url: e.url, size: e.size, mtime: e.modified, checkedAt: e.size == nil ? nil : t))
            table.add(parent: node.ino, name: e.name, origin: .listing, content: content)
            idx.listed.insert(e.name)
        }
        idx.listedAt = t
        return invalidations
    }

    // MARK: By-URL directory

    private func resolveByURL(parent: UInt64, level: ByURLLevel, name: String,
                              reply: @escaping (Result<Attr, FSErrno>) -> Void) {
        switch level {
        case .schemes:
            guard ByURLPath.schemes.contains(name) else { return reply(.failure(FSErrno(ENOENT))) }
            reply(addResolved(parent: parent, name: name, content: .directory(DirectoryState(mtime: mountTime, byURL: .hosts(scheme: name)))))
        case let .hosts(scheme):
            guard ByURLPath.validHost(name) else { return reply(.failure(FSErrno(ENOENT))) }
            reply(addResolved(parent: parent, name: name, content: .directory(DirectoryState(mtime: mountTime, byURL: .path(base: "\(scheme)://\(name)")))))
        case let .path(base):
            let url = ByURLPath.childURL(base: base, name: name)
            backend.open(url: url) { [self] result in
                switch result {
                case let .success(info):
                    if Self.isDirectoryRedirect(requested: url, final: info.finalURL) {
                        return reply(addResolved(parent: parent, name: name, content: .directory(DirectoryState(mtime: now(), byURL: .path(base: url)))))
                    }
                    let file = FileState(url: url)
                    reply(addResolved(parent: parent, name: name, content: .file(file), info: info))
                case .failure(.notFound) where !name.contains("?"):
                    // Servers answer 404 for path prefixes (S3, CDNs): a name that is not a file
                    // may still lead to one, so it is a directory.
                    reply(addResolved(parent: parent, name: name, content: .directory(DirectoryState(mtime: now(), byURL: .path(base: url)))))
                case let .failure(error):
                    logger.warning("by-URL lookup failed: \(url): \(error)")
                    reply(.failure(FSErrno(error.errno)))
                }
            }
        }
    }

    private func addResolved(parent: UInt64, name: String, content: NodeContent, info: EntryInfo? = nil) -> Result<Attr, FSErrno> {
        lock.withLock {
            if let existing = table.child(of: parent, named: name) {
                table.lookedUp(existing.ino)
                return .success(attr(existing))
            }
            guard let p = table.node(parent), p.attached, p.directory != nil else { return .failure(FSErrno(ENOENT)) }
            let node = table.add(parent: parent, name: name, origin: .resolved, content: content)
            if let info, let f = node.file { record(info, for: node, f) }
            table.lookedUp(node.ino)
            return .success(attr(node))
        }
    }

    /// `http://h/dir` redirected to `http://h/dir/`: a directory, whatever the body says.
    static func isDirectoryRedirect(requested: String, final: String) -> Bool {
        let path = { (s: String) in URLComponents(string: s)?.path ?? "" }
        return path(final).hasSuffix("/") && !path(requested).hasSuffix("/")
    }

    // MARK: Remote changes, statistics, shutdown

    /// The cache saw a new generation: new attributes, and the kernel's pages are stale.
    func remoteChanged(_ info: EntryInfo) {
        let (inos, n): ([UInt64], KernelNotifier?) = lock.withLock {
            var live: [UInt64] = []
            for ino in inodesByKey[info.key] ?? [] {
                guard let node = table.node(ino), let f = node.file else {
                    inodesByKey[info.key]?.remove(ino)
                    continue
                }
                f.update(from: info, at: now())
                live.append(ino)
            }
            return (live, notifier)
        }
        if !inos.isEmpty { logger.info("remote file changed: \(info.url) (generation \(info.generation))") }
        for ino in inos { n?.invalidateInode(ino, data: true) }
    }

    func statfs() -> FSStats {
        let usage = backend.usage
        let files = lock.withLock { UInt64(table.count) }
        let bs: UInt64 = 4096
        let cap = UInt64(max(usage.capacity, usage.bytes, 0))
        let used = UInt64(max(usage.bytes, 0))
        return FSStats(blockSize: bs, blocks: cap / bs, freeBlocks: (cap - min(used, cap)) / bs, files: files)
    }

    /// Closes every reader; later opens fail. Called once the session stopped.
    func shutdown() {
        let readers: [MountReader] = lock.withLock {
            closed = true
            let r = openFiles.values.map(\.reader)
            openFiles = [:]
            openDirs = [:]
            return r
        }
        for r in readers { r.close() }
    }

    // MARK: Introspection for tests

    func inode(at path: [String]) -> UInt64? {
        lock.withLock {
            var ino = InodeTable.rootIno
            for name in path {
                guard let child = table.child(of: ino, named: name) else { return nil }
                ino = child.ino
            }
            return ino
        }
    }

    var openFileCount: Int { lock.withLock { openFiles.count } }
    var inodeCount: Int { lock.withLock { table.count } }
}

struct Invalidations {
    var entries: [(parent: UInt64, name: String)] = []
    var inodes: [UInt64] = []
}

/// A completion that runs at most once (a read's answer races its deadline).
final class ReplyOnce<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var fn: ((T) -> Void)?  // guarded by lock

    init(_ fn: @escaping (T) -> Void) { self.fn = fn }

    var hasFired: Bool { lock.withLock { fn == nil } }

    /// Runs the completion if nobody did yet; true if this call did.
    @discardableResult
    func fire(_ value: T) -> Bool {
        guard let f = lock.withLock({ () -> ((T) -> Void)? in defer { fn = nil }; return fn }) else { return false }
        f(value)
        return true
    }
}
