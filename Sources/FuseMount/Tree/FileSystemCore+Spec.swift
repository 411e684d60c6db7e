import CacheCore
import Foundation
import Glibc
import Logging

/// The tree of names from the mount spec: built at start, applied anew on reload (SIGHUP).
extension FileSystemCore {
    // MARK: Tree spec (start and reload)

    /// Replaces the spec-built part of the tree with `newSpec`, keeping every node whose path
    /// and URL did not change (so open files and kernel caches survive a reload).
    func reload(spec newSpec: MountTreeSpec) {
        let (invalidations, n, old) = state.withLock { s in
            let old = s.currentSpec
            return (apply(spec: newSpec, &s), s.notifier, old)
        }
        for (parent, name) in invalidations { n?.invalidateEntry(parent: parent, name: name) }
        n?.flush()  // when reload returns, removed names are gone from the kernel's cache too
        report(changes: Self.changedPaths(from: old, to: newSpec))
    }

    /// Files and listed folders a reload added, removed or pointed elsewhere (`--on-change`).
    static func changedPaths(from old: MountTreeSpec, to new: MountTreeSpec) -> [String] {
        func entries(_ spec: MountTreeSpec) -> [String: String] {
            var out: [String: String] = [:]
            for f in spec.files { out[f.path.joined(separator: "/")] = f.url }
            for i in spec.indexes where !i.path.isEmpty { out[i.path.joined(separator: "/")] = i.url }
            return out
        }
        let before = entries(old), after = entries(new)
        return Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
    }

    /// Under the lock (`s`).
    func apply(spec newSpec: MountTreeSpec, _ s: inout State) -> [(parent: UInt64, name: String)] {
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
        let root = s.table.root.directory!
        if root.index?.url != rootIndex {
            if root.index != nil {
                for (_, ino) in s.table.listedChildren(of: root) { invalidations += s.table.detach(ino) }
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
            guard let dir = s.table.node(dirIno)?.directory else { return }
            for (name, ino) in dir.children.sorted(by: { $0.key < $1.key }) {
                guard let child = s.table.node(ino), child.origin == .spec else { continue }
                let childPath = path + [name.string]
                if let want = wanted[childPath], want == have(child) {
                    if child.directory != nil { prune(ino, childPath) }
                } else {
                    invalidations += s.table.detach(ino)
                }
            }
        }
        prune(InodeTable.rootIno, [])
        // Add what is missing, parents first.
        for (path, want) in wanted.sorted(by: { $0.key.count < $1.key.count || ($0.key.count == $1.key.count && $0.key.lexicographicallyPrecedes($1.key)) }) {
            var parent: UInt64? = InodeTable.rootIno
            for name in path.dropLast() { parent = parent.flatMap { s.table.child(of: $0, named: name)?.ino } }
            guard let parent, s.table.node(parent)?.directory != nil, let name = path.last else { continue }
            if let existing = s.table.child(of: parent, named: name), existing.origin == .spec { continue }
            let content: NodeContent
            switch want {
            case let .file(url): content = .file(FileState(url: url))
            case let .index(url): content = .directory(DirectoryState(mtime: mountTime, index: IndexState(url: url)))
            case .directory: content = .directory(DirectoryState(mtime: mountTime))
            case .byURL: content = .directory(DirectoryState(mtime: mountTime, byURL: .schemes))
            }
            let hadListed = s.table.child(of: parent, named: name) != nil
            s.table.add(parent: parent, name: name, origin: .spec, content: content)
            if hadListed { invalidations.append((parent, name)) }
        }
        s.currentSpec = newSpec
        return invalidations
    }
}
