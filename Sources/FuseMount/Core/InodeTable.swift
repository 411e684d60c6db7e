import CacheCore
import Foundation

/// Why a node exists, which decides when it goes away.
enum NodeOrigin: Equatable {
    /// The root and everything built from the tree spec: removed only by a URL-list reload.
    case spec
    /// A child of a listed directory: removed when a newer listing no longer has it.
    case listing
    /// Resolved on demand under the by-URL directory: removed once the kernel forgets it.
    case resolved
}

/// What the mount knows about one remote file.
final class FileState {
    var url: String {
        didSet { if url != oldValue { key = nil } }
    }
    /// The cache key of `url`, once an open worked it out (`FileSystemCore.open`).
    var key: CacheKey?
    /// Exact size, from the listing or the cache; nil until known.
    var size: Int64?
    var mtime: Date?
    /// The cache's view, once the file has been opened or looked up through it.
    var info: EntryInfo?
    /// Generation of the entry at the last open: equal at the next open means the kernel's
    /// page cache still holds this generation's bytes and may be kept.
    var lastOpenGeneration: Int64?
    /// Bytes were put into the kernel's page cache for this file (`PageCacheFill`): its opens
    /// are answered behind the stores queued before them (see `FileSystemCore.finishOpen`).
    var filled = false

    init(url: String, size: Int64? = nil, mtime: Date? = nil) {
        self.url = url
        self.size = size
        self.mtime = mtime
    }

    /// The last `Last-Modified` parsed, and its date: an open of an unchanged version does not
    /// parse the same text again.
    private var parsedLastModified: (text: String, date: Date?)?

    func update(from info: EntryInfo) {
        self.info = info
        if let length = info.length { size = length }
        guard let text = info.lastModified else { return }
        let date: Date?
        if let parsed = parsedLastModified, parsed.text == text {
            date = parsed.date
        } else {
            date = HTTPDate.parse(text)
            parsedLastModified = (text, date)
        }
        if let date { mtime = date }
    }
}

/// Where a by-URL directory sits in `.url/SCHEME/HOST/PATH...`.
enum ByURLLevel: Equatable {
    case schemes
    case hosts(scheme: String)
    /// `base` is the URL of this directory, without a trailing slash.
    case path(base: String)
}

/// A directory backed by a web server's listing.
final class IndexState {
    var url: String
    var listedAt: Date?
    /// Names that came from the listing (static children with the same name win).
    var listed: Set<EntryName> = []
    var fetching = false
    var waiters: [@Sendable (CacheError?) -> Void] = []
    /// What the entries of its current listing cost (`InodeTable.listingBytes`).
    var cost: Int64 = 0
    /// The last listing refused by the memory budget (with no listing before it), and when: looks
    /// within `FileSystemCore.listingRetryDelay` get that answer without fetching and parsing the
    /// page again.
    var refused: (error: CacheError, at: Date)?

    init(url: String) { self.url = url }
}

final class DirectoryState {
    var children: [EntryName: UInt64] = [:]
    var mtime: Date
    var index: IndexState?
    var byURL: ByURLLevel?
    /// Bumped whenever a name is added, removed or renumbered here: the kernel may keep its
    /// copy of this directory's entries (`cache_readdir`) for as long as this stays what it was
    /// when the copy was made (`cachedVersion`, as of the last opendir).
    var version: UInt64 = 0
    var cachedVersion: UInt64?

    init(mtime: Date, index: IndexState? = nil, byURL: ByURLLevel? = nil) {
        self.mtime = mtime
        self.index = index
        self.byURL = byURL
    }
}

enum NodeContent {
    case file(FileState)
    case directory(DirectoryState)
}

final class Node {
    let ino: UInt64
    let parent: UInt64
    let name: String
    let origin: NodeOrigin
    let content: NodeContent
    /// The kernel's lookup count (FUSE nlookup): the node must stay resolvable while > 0.
    var lookups: UInt64 = 0
    /// Still reachable by name from its parent.
    var attached = true

    init(ino: UInt64, parent: UInt64, name: String, origin: NodeOrigin, content: NodeContent) {
        self.ino = ino
        self.parent = parent
        self.name = name
        self.origin = origin
        self.content = content
    }

    var file: FileState? { if case let .file(f) = content { return f } else { return nil } }
    var directory: DirectoryState? { if case let .directory(d) = content { return d } else { return nil } }
}

/// Inode numbers, names and kernel lookup counts.
///
/// Inode numbers are never reused (a UInt64 counter), so FUSE generations can stay 0. A node
/// that disappears from its directory (reload, newer listing) is detached at once, so lookups
/// fail, but stays in the table while the kernel still references it: reads on an open file
/// keep working after its entry was removed. Not thread-safe: it lives in `FileSystemCore.State`,
/// under its lock, and so do its nodes.
struct InodeTable {
    static let rootIno: UInt64 = 1  // FUSE_ROOT_ID
    private(set) var nodes: [UInt64: Node] = [:]
    private var nextIno: UInt64 = 2
    /// What the listings of attached directories cost together (`MountOptions.listingBudget`):
    /// a directory's cost is let go when it is detached.
    private(set) var listingBytes: Int64 = 0

    /// `idx`'s listing now costs `cost`.
    mutating func setListingCost(_ idx: IndexState, _ cost: Int64) {
        listingBytes += cost - idx.cost
        idx.cost = cost
    }

    init(rootMtime: Date) {
        let root = Node(ino: Self.rootIno, parent: Self.rootIno, name: "", origin: .spec,
                        content: .directory(DirectoryState(mtime: rootMtime)))
        root.lookups = 1  // the kernel never looks the root up, nor forgets it
        nodes[Self.rootIno] = root
    }

    var count: Int { nodes.count }
    var root: Node { nodes[Self.rootIno]! }

    func node(_ ino: UInt64) -> Node? { nodes[ino] }

    func child(of parent: UInt64, named name: String) -> Node? {
        guard let ino = nodes[parent]?.directory?.children[EntryName(name)] else { return nil }
        return nodes[ino]
    }

    /// Adds a child; an existing child of that name is detached first.
    @discardableResult
    mutating func add(parent: UInt64, name: String, origin: NodeOrigin, content: NodeContent) -> Node {
        guard let dir = nodes[parent]?.directory else { preconditionFailure("add under a non-directory") }
        if let old = dir.children[EntryName(name)] { _ = detach(old) }
        let node = Node(ino: nextIno, parent: parent, name: name, origin: origin, content: content)
        nextIno += 1
        nodes[node.ino] = node
        dir.children[EntryName(name)] = node.ino
        dir.version &+= 1
        return node
    }

    /// Makes a node (and everything below it) unreachable by name; drops the ones the kernel no
    /// longer references. Returns the (parent, name) pairs whose kernel dentries must go.
    mutating func detach(_ ino: UInt64) -> [(parent: UInt64, name: String)] {
        guard let node = nodes[ino], node.attached, ino != Self.rootIno else { return [] }
        var removed: [(UInt64, String)] = [(node.parent, node.name)]
        if let parent = nodes[node.parent]?.directory, parent.children[EntryName(node.name)] == ino {
            parent.children[EntryName(node.name)] = nil
            parent.index?.listed.remove(EntryName(node.name))
            parent.version &+= 1
        }
        node.attached = false
        if let idx = node.directory?.index { setListingCost(idx, 0) }
        if let dir = node.directory {
            for (_, child) in dir.children { removed += detach(child) }
        }
        dropIfUnreferenced(node)
        return removed
    }

    /// Moves a file's name to a new inode number; the old number stays valid, detached, for the
    /// kernel's references and the handles open on it. Nil when `ino` is not an attached file.
    ///
    /// Why: the kernel binds an inode open with passthrough to one backing file, and refuses an
    /// open of that inode on anything else while such a handle is open. A new version of the file
    /// then opens on a new inode, which the kernel finds once its lookup is repeated.
    mutating func renumber(_ ino: UInt64) -> Node? {
        guard let old = nodes[ino], old.attached, case let .file(f) = old.content,
              let dir = nodes[old.parent]?.directory, dir.children[EntryName(old.name)] == ino else { return nil }
        let file = FileState(url: f.url, size: f.size, mtime: f.mtime)
        file.info = f.info
        let node = Node(ino: nextIno, parent: old.parent, name: old.name, origin: old.origin, content: .file(file))
        nextIno += 1
        nodes[node.ino] = node
        dir.children[EntryName(old.name)] = node.ino
        dir.version &+= 1
        old.attached = false
        dropIfUnreferenced(old)
        return node
    }

    /// The kernel got this node in a lookup reply.
    mutating func lookedUp(_ ino: UInt64) {
        nodes[ino]?.lookups += 1
    }

    /// FUSE forget: the kernel dropped `count` references.
    mutating func forget(_ ino: UInt64, count: UInt64) {
        guard ino != Self.rootIno, let node = nodes[ino] else { return }
        node.lookups -= min(count, node.lookups)
        guard node.lookups == 0 else { return }
        if node.origin == .resolved {
            pruneResolved(node)
        } else {
            dropIfUnreferenced(node)
        }
    }

    /// Resolved nodes can be resolved again on demand: once unreferenced and empty they go, and
    /// so do their resolved parents that become unreferenced and empty in turn.
    private mutating func pruneResolved(_ start: Node) {
        var node: Node? = start
        while let n = node, n.origin == .resolved, n.attached, n.lookups == 0,
              n.directory?.children.isEmpty ?? true {
            _ = detach(n.ino)
            node = nodes[n.parent]
        }
        if !start.attached { dropIfUnreferenced(start) }
    }

    private mutating func dropIfUnreferenced(_ node: Node) {
        if !node.attached && node.lookups == 0 { nodes[node.ino] = nil }
    }
}
