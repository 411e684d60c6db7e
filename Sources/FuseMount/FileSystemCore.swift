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
/// engine thread; nothing here waits on the network. One lock guards all state, is never held
/// while calling the backend, the notifier or a completion, and no operation takes it for longer
/// than a dictionary update (listing parsing happens outside it).
final class FileSystemCore: @unchecked Sendable {
    let backend: MountBackend
    let options: MountOptions
    let logger: Logger
    let now: @Sendable () -> Date
    let mountTime: Date
    /// Listings larger than this are refused (someone pointed --index at a video).
    static let listingLimit = 64 << 20
    /// After a failed refresh, a stale listing is served this long before trying again.
    static let listingRetryDelay: TimeInterval = 30

    let lock = NSLock()
    var table: InodeTable                   // guarded by lock
    var currentSpec: MountTreeSpec          // guarded by lock
    var openFiles: [UInt64: OpenFile] = [:] // guarded by lock
    var openDirs: [UInt64: [DirEntry]] = [:] // guarded by lock
    var nextHandle: UInt64 = 1              // guarded by lock
    var inodesByKey: [CacheKey: Set<UInt64>] = [:] // guarded by lock
    var notifier: KernelNotifier?           // guarded by lock
    var backing: BackingFiles?              // guarded by lock
    /// Inodes open with passthrough: all their opens share one backing file (the kernel refuses
    /// a second one, and any open without passthrough, while one is attached).
    var passthroughInodes: [UInt64: PassthroughInode] = [:] // guarded by lock
    var closed = false                      // guarded by lock
    let deadlineQueue = DispatchQueue(label: "httpcachefs.fuse.read-deadline")
    /// Folders that list by WebDAV PROPFIND (`ListingFetch`).
    let listingKinds = ListingKinds()

    struct OpenFile {
        var ino: UInt64
        var url: String
        var reader: MountReader
        var passthrough = false
    }

    /// An inode's backing file, registered while any of its handles (`OpenFile.passthrough`) is open.
    struct PassthroughInode {
        var backingID: Int32
        var file: WholeFile
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

    func attach(backing: BackingFiles?) {
        lock.withLock { self.backing = backing }
    }

    // MARK: Names and attributes

    func lookup(parent: UInt64, name: String, reply: @escaping (Result<Attr, FSErrno>) -> Void) {
        lookup(parent: parent, name: name, afterListing: false, reply: reply)
    }

    private enum LookupStep {
        case done(Result<Attr, FSErrno>)
        case resolve(Node, FileState)
        case refreshListing
        case missingRefreshing
        case byURL(ByURLLevel)
    }

    func lookup(parent: UInt64, name: String, afterListing: Bool,
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
        case .missingRefreshing:
            refreshInBackground(dirIno: parent)
            reply(.failure(FSErrno(ENOENT)))
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

    /// A file needs the cache's word only while its size is unknown. Whether the remote file
    /// changed is asked at open (at most once per `--revalidate-after`), never by `stat`: the
    /// kernel calls getattr around reads, and each call would cost the origin a round trip.
    func needsResolve(_ f: FileState) -> Bool { f.size == nil }

    /// Asks the cache about a file (which revalidates it with the origin when stale); metadata
    /// only: stat reads no bytes.
    func resolve(_ node: Node, _ file: FileState, completion: @escaping (CacheError?) -> Void) {
        let url = lock.withLock { file.url }
        backend.lookUp(url: url) { [self] result in
            switch Self.checkedLength(result) {
            case let .failure(error):
                logger.warning("lookup failed: \(url): \(error)")
                completion(error)
            case let .success(info):
                lock.withLock { record(info, for: node, file) }
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

    /// Caller holds the lock.
    func record(_ info: EntryInfo, for node: Node, _ file: FileState) {
        file.update(from: info)
        inodesByKey[info.key, default: []].insert(node.ino)
    }

    func attr(_ node: Node) -> Attr {
        switch node.content {
        case let .file(f): return Attr(ino: node.ino, isDirectory: false, size: f.size ?? 0, mtime: f.mtime ?? mountTime, ttl: ttl(node))
        case let .directory(d): return Attr(ino: node.ino, isDirectory: true, size: 0, mtime: d.mtime, ttl: ttl(node))
        }
    }

    /// Children of a listing are trusted no longer than the listing itself.
    func ttl(_ node: Node) -> TimeInterval {
        node.origin == .listing ? min(options.revalidateAfter, options.listingTTL) : options.revalidateAfter
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
                f.update(from: info)
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
        let (readers, held): ([MountReader], [WholeFile]) = lock.withLock {
            closed = true
            let r = openFiles.values.map(\.reader)
            let h = passthroughInodes.values.map(\.file)   // the kernel drops its backing files with the connection
            openFiles = [:]
            openDirs = [:]
            passthroughInodes = [:]
            return (r, h)
        }
        for r in readers { r.close() }
        for h in held { h.release() }
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
