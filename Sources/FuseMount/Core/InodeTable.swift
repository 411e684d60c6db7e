import CacheCore
import Foundation

// The mount's tree: nodes by inode number, names by directory, kernel lookup counts.
//
// Owns every name the mount shows and what it knows of each (`Node`, a file's `FileState`
// inside it, a directory's `DirectoryState` and listing's `IndexState`). Lives in
// `FileSystemCore.State`: whichever thread holds that lock (FUSE loop, engine completions, the
// scheduler) runs it, and it blocks on nothing.
//
// Memory: a folder of a million listed names is a million nodes, so what one costs is the
// design's figure: one heap block of 112 bytes (`Node` with the file's state as a value inside
// it: its URL a listing's shared `URLPrefix` and its own end, most often its name's very String;
// size and mtime as plain words; what only an opened file needs in an `OpenedFile` made on first
// use), and a slot in `InodeTable.nodes` (8 bytes, `NodeSlots`) and in its folder's `children`.
// The names a listing brought are those children whose node came from the listing
// (`listedChildren`), not a set of their own. `FileSystemCore.entryCost` counts this for the
// listing budget.

/// Why a node exists, which decides when it goes away.
enum NodeOrigin: Equatable {
    /// The root and everything built from the tree spec: removed only by a URL-list reload.
    case spec
    /// A child of a listed directory: removed when a newer listing no longer has it.
    case listing
    /// Resolved on demand under the by-URL directory: removed once the kernel forgets it.
    case resolved
}

/// A file URL's start shared by the files of one listing (`http://host/folder/`): each of
/// them keeps only its own last part (`FileState.urlTail`), most often its name's very String.
final class URLPrefix: Sendable {
    let string: String
    init(_ string: String) { self.string = string }
    /// Files given whole (tree spec, `.url/`): their tail is the whole URL.
    static let none = URLPrefix("")
}

/// What the mount knows about one remote file. A value held inside its `Node`, so a listed file
/// costs no object of its own: what only an opened or looked-up file needs (its cache key and
/// entry) sits in `OpenedFile`, made on first use. One `FileState` belongs to one node: its
/// `OpenedFile` is a reference, and a copy that outlives the edit it was made for would share it
/// (`Node.file` hands out copies only for reading and writing back).
struct FileState {
    /// The URL as the listing's shared start and this file's own end (see `URLPrefix`).
    private let urlPrefix: URLPrefix
    private let urlTail: String
    /// Exact size; `Int64.min`: not known yet (a plain Int64, not an optional's 9 bytes).
    private var sizeBits: Int64
    /// `mtime` as seconds since the reference date; NaN: none.
    private var mtimeBits: Double
    private var opened: OpenedFile?

    /// Splits `url` after its last `/`; `prefix` is reused when it is that start (every file of
    /// one listing then shares it), and `name` when the end is spelled as the name (no second
    /// String for it).
    init(url: String, size: Int64? = nil, mtime: Date? = nil, prefix: URLPrefix? = nil, name: String? = nil) {
        if let prefix, !prefix.string.isEmpty, url.utf8.count > prefix.string.utf8.count,
           url.utf8.starts(with: prefix.string.utf8),
           !url.utf8.dropFirst(prefix.string.utf8.count).contains(UInt8(ascii: "/")) {
            urlPrefix = prefix
            let tail = Substring(url).utf8.dropFirst(prefix.string.utf8.count)
            urlTail = name.flatMap { $0.utf8.elementsEqual(tail) ? $0 : nil } ?? String(Substring(tail))
        } else {
            urlPrefix = .none
            urlTail = url
        }
        sizeBits = size ?? .min
        mtimeBits = mtime?.timeIntervalSinceReferenceDate ?? .nan
    }

    /// `prefix` when it is the start of `url` the files of its folder share (up to its last
    /// `/`), else that start made anew: a listing's files then share one.
    static func sharedPrefix(of url: String, reusing prefix: URLPrefix?) -> URLPrefix? {
        guard let slash = url.utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        let start = url.utf8[...slash]
        if let prefix, prefix.string.utf8.elementsEqual(start) { return prefix }
        return URLPrefix(String(Substring(start)))
    }

    var url: String { urlPrefix.string.isEmpty ? urlTail : urlPrefix.string + urlTail }

    /// `url == other`, without making `url`.
    func hasURL(_ other: String) -> Bool {
        let p = urlPrefix.string.utf8
        return other.utf8.count == p.count + urlTail.utf8.count && other.utf8.starts(with: p)
            && other.utf8.dropFirst(p.count).elementsEqual(urlTail.utf8)
    }

    /// Exact size, from the listing or the cache; nil until known.
    var size: Int64? {
        get { sizeBits == .min ? nil : sizeBits }
        set { sizeBits = newValue ?? .min }
    }

    var mtime: Date? {
        get { mtimeBits.isNaN ? nil : Date(timeIntervalSinceReferenceDate: mtimeBits) }
        set { mtimeBits = newValue?.timeIntervalSinceReferenceDate ?? .nan }
    }

    private mutating func openedState() -> OpenedFile {
        if let opened { return opened }
        let made = OpenedFile()
        opened = made
        return made
    }

    /// The cache key of `url`, once an open worked it out (`FileSystemCore.open`).
    var key: CacheKey? {
        get { opened?.key }
        set { if newValue != nil || opened != nil { openedState().key = newValue } }
    }
    /// The cache's view, once the file has been opened or looked up through it.
    var info: EntryInfo? {
        get { opened?.info }
        set { if newValue != nil || opened != nil { openedState().info = newValue } }
    }
    /// Generation of the entry at the last open: equal at the next open means the kernel's
    /// page cache still holds this generation's bytes and may be kept.
    var lastOpenGeneration: Int64? {
        get { opened?.lastOpenGeneration }
        set { if newValue != nil || opened != nil { openedState().lastOpenGeneration = newValue } }
    }
    /// Bytes were put into the kernel's page cache for this file (`PageCacheFill`): its opens
    /// are answered behind the stores queued before them (see `FileSystemCore.finishOpen`).
    var filled: Bool {
        get { opened?.filled ?? false }
        set { if newValue || opened != nil { openedState().filled = newValue } }
    }

    /// This file for another node (`InodeTable.renumber`): its URL, size, mtime and the cache's
    /// entry; nothing of this node's opens.
    func forNewNode() -> FileState {
        var copy = self
        copy.opened = nil
        copy.info = info
        return copy
    }

    mutating func update(from info: EntryInfo) {
        let o = openedState()
        o.info = info
        if let length = info.length { size = length }
        guard let text = info.lastModified else { return }
        let date: Date?
        if let parsed = o.parsedLastModified, parsed.text == text {
            date = parsed.date
        } else {
            date = HTTPDate.parse(text)
            o.parsedLastModified = (text, date)
        }
        if let date { mtime = date }
    }
}

/// What a file the cache was asked about keeps (see `FileState`): made at its first lookup or
/// open, so a million listed files that were only listed carry none.
final class OpenedFile {
    var key: CacheKey?
    var info: EntryInfo?
    var lastOpenGeneration: Int64?
    var filled = false
    /// The last `Last-Modified` parsed, and its date: an open of an unchanged version does not
    /// parse the same text again.
    var parsedLastModified: (text: String, date: Date?)?
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

/// One name of the tree (or a number the kernel still holds after its name went). Fields in
/// this order so the object is 103 bytes, one 112-byte heap block: a listed file is this object
/// and its two slots (`InodeTable.nodes`, `DirectoryState.children`), nothing more.
final class Node {
    let ino: UInt64
    let parent: UInt64
    let name: String
    private(set) var content: NodeContent
    /// The kernel's lookup count (FUSE nlookup): the node must stay resolvable while > 0. Four
    /// bytes, which keeps the node in a 112-byte heap block; a count past `UInt32.max` keeps the
    /// rest in `InodeTable.lookupOverflow` (`InodeTable.lookups(of:)` is the whole count).
    var lookups: UInt32 = 0
    let origin: NodeOrigin
    /// Still reachable by name from its parent.
    var attached = true
    /// A directory (else a file): fixed at birth, and readable without the lock (`DirSnapshot`).
    let isDirectory: Bool

    init(ino: UInt64, parent: UInt64, name: String, origin: NodeOrigin, content: NodeContent) {
        self.ino = ino
        self.parent = parent
        self.name = name
        self.origin = origin
        self.content = content
        if case .directory = content { isDirectory = true } else { isDirectory = false }
    }

    /// The file's state; set to change it (a directory ignores the set). `node.file?.size = n`
    /// edits in place through this.
    var file: FileState? {
        get { if case let .file(f) = content { return f } else { return nil } }
        set {
            guard let newValue, case .file = content else { return }
            content = .file(newValue)
        }
    }
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
    private(set) var nodes = NodeSlots()
    /// Kernel lookups past the `UInt32.max` a node counts itself, by inode: the count stays
    /// exact however large (a node holds a part here only while its own count is full).
    private var lookupOverflow: [UInt64: UInt64] = [:]
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

    /// The children of `dir` its listing brought (a name the tree spec gives wins over a listed
    /// one, and is not among them).
    func listedChildren(of dir: DirectoryState) -> [(name: EntryName, ino: UInt64)] {
        dir.children.compactMap { name, ino in nodes[ino]?.origin == .listing ? (name, ino) : nil }
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
        let node = Node(ino: nextIno, parent: old.parent, name: old.name, origin: old.origin, content: .file(f.forNewNode()))
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
        guard let node = nodes[ino] else { return }
        if node.lookups == .max { lookupOverflow[ino, default: 0] += 1 } else { node.lookups += 1 }
    }

    /// The kernel's whole lookup count of `ino` (nil: no such node).
    func lookups(of ino: UInt64) -> UInt64? {
        nodes[ino].map { UInt64($0.lookups) + (lookupOverflow[ino] ?? 0) }
    }

    /// FUSE forget: the kernel dropped `count` references.
    mutating func forget(_ ino: UInt64, count: UInt64) {
        guard ino != Self.rootIno, let node = nodes[ino], var total = lookups(of: ino) else { return }
        total -= min(count, total)
        node.lookups = UInt32(clamping: total)
        let rest = total - UInt64(node.lookups)
        lookupOverflow[ino] = rest == 0 ? nil : rest
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
