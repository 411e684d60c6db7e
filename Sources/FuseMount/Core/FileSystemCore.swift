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
    /// Open with passthrough to this backing file: the kernel reads the file without us.
    var backingID: Int32? = nil
    /// Direct I/O (`FOPEN_DIRECT_IO`): the kernel passes the reader's reads as they are, with
    /// no read-ahead of its own and no page cache for this handle. For scanners: a probe's
    /// 32 KiB reads otherwise arrive as the kernel's ever larger read-ahead requests.
    var directIO = false
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
    /// Puts each lease's bytes into the page cache of `ino` at its offset, one after another
    /// (queued, ordered against the invalidations: storing waits on the kernel's reads in
    /// flight), while `current()` says so; then releases the leases. The leases are asked of
    /// `pieces` only when there is room for another store job: false when there was none (the
    /// kernel then asks for those bytes itself, as it would without filling).
    func store(_ ino: UInt64, if current: @escaping @Sendable () -> Bool,
               pieces: () -> [(offset: Int64, lease: ReadLease)]) -> Bool
    /// Runs `body` once everything queued before it was sent.
    func afterQueued(_ body: @escaping @Sendable () -> Void)
    /// Reads the file pieces of the lease `make` gives into their data files' page cache, on a
    /// thread of its own, then releases it. `make` is asked only when there is room for another
    /// such job: false when there was none.
    func readAhead(_ make: () -> ReadLease?) -> Bool
}

extension KernelNotifier {
    /// Notifiers without data files to read (test fakes) read nothing ahead.
    func readAhead(_ make: () -> ReadLease?) -> Bool { false }
}

/// The kernel's passthrough (Linux 6.9+): a file registered with it can back open files, which
/// the kernel then reads itself. Calls are quick ioctls on /dev/fuse.
protocol BackingFiles: AnyObject, Sendable {
    /// Registers `fd`; the id for an open reply, or nil when the kernel refuses (said once in the log).
    func register(_ fd: Int32) -> Int32?
    func unregister(_ id: Int32)
}

/// The file system in plain Swift: names, attributes, handles, listings, revalidation.
///
/// Every operation answers through a completion, called exactly once, possibly later from an
/// engine thread; nothing here waits on the network. All mutable state is one `State` in one
/// `LockedValue`, which is never held while calling the backend, the notifier or a completion,
/// and no operation holds it for longer than a dictionary update (listing parsing happens
/// outside it).
///
/// The tree's nodes (`Node`, holding a file's `FileState` value; `IndexState`) are classes that live inside `State` and
/// never leave the lock: work that goes on outside it (a lookup at the origin, a listing's fetch)
/// names its node by inode number, which is never reused, or by its entry in
/// `State.listingFetches`, and finds it again under the lock when it ends.
///
/// Threads: the FUSE loop calls in; completions run on engine threads (the curl loop, the
/// completion queue) and on the scheduler's thread (`deadlines`).
///
/// Map of this folder (`Core/`): the file system in plain Swift, testable without FUSE.
/// - `FileSystemCore.swift` (this file): the state, the lock, and the replies' types.
/// - `FileSystemCore+Files.swift`: open, read with leases, release, passthrough.
/// - `FileSystemCore+Attributes.swift`: extended attributes and `setfattr` pins, through
///   `CacheAttributes.swift` (pure: names to answers).
/// - `FileSystemCore+ByURL.swift`: the `.url/` tree; `ByURLPath.swift` turns its names into URLs.
/// - `InodeTable.swift`: nodes, why each exists, and when it goes.
/// Neighbours: called by `Kernel/` (`FuseOperations`); its tree is built and reloaded by `Tree/`
/// and filled by `Listings/` (both extend `FileSystemCore`); reaches the cache only through
/// `Kernel/`'s `MountBackend`.
final class FileSystemCore: Sendable {
    let backend: MountBackend
    let options: MountOptions
    /// `options.effectiveMaxRead`, read once: it parses the libfuse option strings, which an
    /// open of a small file (`opensOrdinarily`) must not redo.
    let maxRead: Int
    let logger: Logger
    /// The mount's time, given by whoever builds it (the executable: the engine's clock; tests
    /// their own): its monotonic clock times listing fetches, its scheduler runs the deadlines,
    /// and its wall clock dates what users see (the mount's and the `.url/` folders' mtimes) and
    /// ages listings. A listing's age is set back by whole TTLs ("expired now": `now - TTL`),
    /// which a monotonic instant cannot be near boot, when a mount from fstab starts.
    let clock: EngineClock
    let mountTime: Date
    /// After a failed refresh, a stale listing is served this long before trying again.
    static let listingRetryDelay: TimeInterval = 30

    /// Now, by the wall clock: what listings are aged by and new folders dated with.
    func now() -> Date { clock.wall() }

    /// Everything that changes, under one lock.
    struct State {
        var table: InodeTable
        var currentSpec = MountTreeSpec()
        var openFiles: [UInt64: OpenFile] = [:]
        var openDirs: [UInt64: DirSnapshot] = [:]
        /// Directory handles whose entries the kernel may keep from an earlier opendir.
        var keptDirs: Set<UInt64> = []
        /// LOOKUP requests answered (for tests: READDIRPLUS spares `ls -l` one per name).
        var lookupRequests = 0
        /// Who hears of files a refresh added, removed or changed (`--on-change`), and the paths
        /// held back while a `refresh` re-reads several listings (`changeBatches` > 0), so the
        /// command runs once for all of them.
        var onChange: (@Sendable ([String]) -> Void)?
        var changeBatches = 0
        var pendingChanges: [String] = []
        var nextHandle: UInt64 = 1
        /// Folders whose files are opened one after the other (`FolderScanAhead`).
        var scanAhead = FolderScanAhead()
        var inodesByKey: [CacheKey: Set<UInt64>] = [:]
        var notifier: KernelNotifier?
        var backing: BackingFiles?
        /// Inodes open with passthrough: all their opens share one backing file (the kernel
        /// refuses a second one, and any open without passthrough, while one is attached).
        var passthroughInodes: [UInt64: PassthroughInode] = [:]
        var closed = false
        /// Listings being fetched, by fetch number: the directory and its listing's state as
        /// they were when the fetch began. A reload may replace a directory's listing state
        /// meanwhile; the fetch still answers the callers that waited on the one it began for.
        var listingFetches: [UInt64: (node: Node, idx: IndexState)] = [:]
        var nextListingFetch: UInt64 = 1

        /// Records a listing fetch about to begin; its number for `listingFetched`.
        mutating func beginListingFetch(_ node: Node, _ idx: IndexState) -> UInt64 {
            let fetch = nextListingFetch
            nextListingFetch += 1
            listingFetches[fetch] = (node, idx)
            return fetch
        }
    }

    let state: LockedValue<State>
    /// Read deadlines and listing timeouts: timers of the clock's scheduler (the process's one
    /// timer thread), whose actions only fail a reply that is still waiting (`ReplyOnce`), so
    /// they never block; off the FUSE loop, which must not wait, and out of the engine's pool.
    var deadlines: Scheduler { clock.scheduler }
    /// Warm-ups of files pinned with `setfattr` still running (tests wait for them).
    let warmUps = DispatchGroup()
    /// GETXATTR requests answered (for tests: `ls -l` asks for `security.selinux` once per
    /// mount, not once per file, since we answer ENOTSUP).
    let xattrRequests = LockedValue(0)
    /// Folders that list by WebDAV PROPFIND (`ListingFetch`).
    let listingKinds = ListingKinds()
    /// Releases and forgets being handled, and those handled (each counted once it let go of
    /// everything): tests wait on it, as the kernel sends them after `close()` returns, with
    /// nothing else to wait for.
    let letGo = ConditionLock(LetGo())
    struct LetGo { var handling = 0, handled = 0 }

    struct OpenFile {
        var ino: UInt64
        var url: String
        var reader: MountReader
        var passthrough = false
        /// The version this handle reads, and its size (nil: unknown).
        var generation: Int64 = 0
        var size: Int64?
        /// Where the page cache is filled ahead of this handle's reader; nil: not filled.
        var fill: LockedValue<PageCacheFill>?
        /// Where the data file is read from the disk ahead of this handle's reader; nil: not.
        var readAhead: LockedValue<DataFileReadAhead>?
    }

    /// An inode's backing file, registered while any of its handles (`OpenFile.passthrough`) is open.
    struct PassthroughInode {
        var backingID: Int32
        var file: WholeFile
    }

    init(backend: MountBackend, spec: MountTreeSpec, options: MountOptions, clock: EngineClock, logger: Logger) {
        self.backend = backend
        self.options = options
        maxRead = options.effectiveMaxRead
        self.logger = logger
        self.clock = clock
        let mountTime = clock.wall()
        self.mountTime = mountTime
        state = LockedValue(State(table: InodeTable(rootMtime: mountTime)))
        state.withLock { _ = apply(spec: spec, &$0) }
        backend.onRemoteChange { [weak self] info in self?.remoteChanged(info) }
    }

    /// The tree spec in force.
    var spec: MountTreeSpec { state.withLock { $0.currentSpec } }

    func attach(notifier: KernelNotifier?) {
        state.withLock { $0.notifier = notifier }
    }

    func attach(backing: BackingFiles?) {
        state.withLock { $0.backing = backing }
    }

    // MARK: Names and attributes

    func lookup(parent: UInt64, name: String, reply: @escaping @Sendable (Result<Attr, FSErrno>) -> Void) {
        lookup(parent: parent, name: name, afterListing: false, reply: reply)
    }

    private enum LookupStep {
        case done(Result<Attr, FSErrno>)
        /// The file's size is unknown: ask the cache about `url` for inode `ino`.
        case resolve(ino: UInt64, url: String)
        case refreshListing
        case missingRefreshing
        case byURL(ByURLLevel)
    }

    func lookup(parent: UInt64, name: String, afterListing: Bool,
                reply: @escaping @Sendable (Result<Attr, FSErrno>) -> Void) {
        let step: LookupStep = state.withLock { s in
            if !afterListing { s.lookupRequests += 1 }
            guard let p = s.table.node(parent) else { return .done(.failure(FSErrno(ENOENT))) }
            guard let dir = p.directory else { return .done(.failure(FSErrno(ENOTDIR))) }
            if let child = s.table.child(of: parent, named: name) {
                if let f = child.file, needsResolve(f) { return .resolve(ino: child.ino, url: f.url) }
                s.table.lookedUp(child.ino)
                return .done(.success(attr(child)))
            }
            if let level = dir.byURL { return .byURL(level) }
            if let idx = dir.index, !afterListing {
                switch listingAge(idx) {
                case .fresh: break
                // A name the listing lacks (a scanner's folder.jpg, a shell's probe) is answered
                // now, as `ls` is; the refresh shows a new file to the next lookup.
                case .stale: return .missingRefreshing
                case .expired: return .refreshListing
                }
            }
            return .done(.failure(FSErrno(ENOENT)))
        }
        switch step {
        case let .done(result):
            reply(result)
        case let .resolve(ino, url):
            resolve(ino: ino, url: url) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                reply(state.withLock { s in
                    guard let node = s.table.node(ino), node.attached else { return .failure(FSErrno(ENOENT)) }
                    s.table.lookedUp(ino)
                    return .success(attr(node))
                })
            }
        case .refreshListing:
            refreshListing(dirIno: parent) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                lookup(parent: parent, name: name, afterListing: true, reply: reply)
            }
        case .missingRefreshing:
            refreshInBackground(dirIno: parent)
            reply(.failure(FSErrno(ENOENT)))
        case let .byURL(level):
            resolveByURL(parent: parent, level: level, name: name, reply: reply)
        }
    }

    func forget(_ ino: UInt64, count: UInt64) {
        beginLetGo()
        state.withLock { $0.table.forget(ino, count: count) }
        endLetGo()
    }

    /// A release or forget starts (before it changes anything a test may look at).
    func beginLetGo() { letGo.withLock { $0.handling += 1 } }

    /// A release or forget let go of everything: counted, and whoever waits is woken.
    func endLetGo() {
        letGo.withLock {
            $0.handling -= 1
            $0.handled += 1
        }
        letGo.broadcast()
    }

    /// Tests: true once `condition` holds with no release or forget half done (one that made it
    /// true has let go of its reader and pins too), looked at again after each one the kernel
    /// sent; false if the next does not come within `timeout` seconds, which bounds a hang.
    /// `condition` runs without the count's lock, so it may take `state`'s.
    func waitForLetGo(timeout: Double = 30, until condition: () throws -> Bool) rethrows -> Bool {
        var seen = letGo.withLock { $0.handled }
        // The condition first, then `handling`: a release that changed what it saw has begun
        // before, so it is either still counted there or done.
        func holds() throws -> Bool { try condition() && letGo.withLock { $0.handling == 0 } }
        while try !holds() {
            guard letGo.wait(until: { $0.handled != seen }, timeout: timeout) else { return try holds() }
            seen = letGo.withLock { $0.handled }
        }
        return true
    }

    func getattr(_ ino: UInt64, reply: @escaping @Sendable (Result<Attr, FSErrno>) -> Void) {
        let step: LookupStep = state.withLock { s in
            guard let node = s.table.node(ino) else { return .done(.failure(FSErrno(ENOENT))) }
            if let f = node.file, needsResolve(f) { return .resolve(ino: ino, url: f.url) }
            return .done(.success(attr(node)))
        }
        switch step {
        case let .resolve(ino, url):
            resolve(ino: ino, url: url) { [self] error in
                if let error { return reply(.failure(FSErrno(error.errno))) }
                reply(state.withLock { s in
                    // Gone only if the kernel forgot it meanwhile, so nobody is asking any more.
                    guard let node = s.table.node(ino) else { return .failure(FSErrno(ENOENT)) }
                    return .success(attr(node))
                })
            }
        case let .done(result): reply(result)
        default: reply(.failure(FSErrno(EIO)))
        }
    }

    /// A file needs the cache's word only while its size is unknown. Whether the remote file
    /// changed is asked at open (at most once per `--revalidate-after`), never by `stat`: the
    /// kernel calls getattr around reads, and each call would cost the origin a round trip.
    func needsResolve(_ f: FileState) -> Bool { f.size == nil }

    /// Asks the cache about the file `url` of inode `ino` (which revalidates it with the origin
    /// when stale), and records the answer on the inode if it is still there; metadata only:
    /// stat reads no bytes.
    func resolve(ino: UInt64, url: String, completion: @escaping @Sendable (CacheError?) -> Void) {
        backend.lookUp(url: url) { [self] result in
            switch Self.checkedLength(result) {
            case let .failure(error):
                logger.warning("lookup failed: \(url): \(error)")
                completion(error)
            case let .success(info):
                state.withLock { s in
                    guard let node = s.table.node(ino), node.file != nil else { return }
                    record(info, for: node, &s)
                }
                completion(nil)
            }
        }
    }

    /// An entry whose length no file here may have fails on its own. The fetcher refuses such
    /// claims from origins; this catches what a cache index written before that still holds.
    static func checkedLength(_ result: Result<EntryInfo, CacheError>) -> Result<EntryInfo, CacheError> {
        guard case let .success(info) = result, let n = info.length, !FileLength.isRepresentable(n) else { return result }
        return .failure(.badResponse(url: info.url, message: FileLength.refusal("a length of \(n) bytes in the cache index")))
    }

    /// Under the lock (`s`).
    func record(_ info: EntryInfo, for node: Node, _ s: inout State) {
        guard node.file != nil else { return }
        node.file?.update(from: info)
        s.inodesByKey[info.key, default: []].insert(node.ino)
    }

    func attr(_ node: Node) -> Attr {
        switch node.content {
        case let .file(f): return Attr(ino: node.ino, isDirectory: false, size: f.size ?? 0, mtime: f.mtime ?? mountTime, ttl: ttl(node))
        case let .directory(d): return Attr(ino: node.ino, isDirectory: true, size: 0, mtime: d.mtime, ttl: ttl(node))
        }
    }

    /// Children of a listing are trusted no longer than the listing itself; `--attr-timeout`
    /// may shorten it further.
    func ttl(_ node: Node) -> TimeInterval {
        let trusted = node.origin == .listing ? min(options.revalidateAfter, options.listingTTL) : options.revalidateAfter
        return min(trusted, options.attrTimeout ?? trusted)
    }

    // MARK: Remote changes, statistics, shutdown

    /// The cache saw a new generation: new attributes, and the kernel's pages are stale.
    func remoteChanged(_ info: EntryInfo) {
        let (inos, n): ([UInt64], KernelNotifier?) = state.withLock { s in
            var live: [UInt64] = []
            for ino in s.inodesByKey[info.key] ?? [] {
                guard let node = s.table.node(ino), node.file != nil else {
                    s.inodesByKey[info.key]?.remove(ino)
                    continue
                }
                node.file?.update(from: info)
                live.append(ino)
            }
            return (live, s.notifier)
        }
        if !inos.isEmpty { logger.info("remote file changed: \(info.url) (generation \(info.generation))") }
        for ino in inos { n?.invalidateInode(ino, data: true) }
    }

    func statfs() -> FSStats {
        let usage = backend.usage
        let files = state.withLock { UInt64($0.table.count) }
        let bs: UInt64 = 4096
        let cap = UInt64(max(usage.capacity, usage.bytes, 0))
        let used = UInt64(max(usage.bytes, 0))
        return FSStats(blockSize: bs, blocks: cap / bs, freeBlocks: (cap - min(used, cap)) / bs, files: files)
    }

    /// Closes every reader; later opens fail. Called once the session stopped.
    func shutdown() {
        let (readers, held): ([MountReader], [WholeFile]) = state.withLock { s in
            s.closed = true
            let r = s.openFiles.values.map(\.reader)
            let h = s.passthroughInodes.values.map(\.file)   // the kernel drops its backing files with the connection
            s.openFiles = [:]
            s.openDirs = [:]
            s.passthroughInodes = [:]
            return (r, h)
        }
        for r in readers { r.close() }
        for h in held { h.release() }
    }

    // MARK: Introspection for tests

    func inode(at path: [String]) -> UInt64? {
        state.withLock { s in
            var ino = InodeTable.rootIno
            for name in path {
                guard let child = s.table.child(of: ino, named: name) else { return nil }
                ino = child.ino
            }
            return ino
        }
    }

    var openFileCount: Int { state.withLock { $0.openFiles.count } }
    var inodeCount: Int { state.withLock { $0.table.count } }
    var lookupRequests: Int { state.withLock { $0.lookupRequests } }
}

struct Invalidations {
    var entries: [(parent: UInt64, name: String)] = []
    var inodes: [UInt64] = []
    /// Paths in the mount of files a listing added, removed or changed (not on its first
    /// listing, which adds everything): what `--on-change` hears.
    var changed: [String] = []
}
