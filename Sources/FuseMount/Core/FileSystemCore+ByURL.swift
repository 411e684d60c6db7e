import CacheCore
import Foundation
import Glibc
import Logging

/// The by-URL tree (`.url/SCHEME/HOST/PATH`): names resolved against the origin on lookup.
extension FileSystemCore {
    // MARK: By-URL directory

    func resolveByURL(parent: UInt64, level: ByURLLevel, name: String,
                      reply: @escaping @Sendable (Result<Attr, FSErrno>) -> Void) {
        switch level {
        case .schemes:
            guard ByURLPath.schemes.contains(name) else { return reply(.failure(FSErrno(ENOENT))) }
            reply(addResolved(parent: parent, name: name, content: .directory(byURL: .hosts(scheme: name), mtime: mountTime)))
        case let .hosts(scheme):
            guard ByURLPath.validHost(name) else { return reply(.failure(FSErrno(ENOENT))) }
            reply(addResolved(parent: parent, name: name, content: .directory(byURL: .path(base: "\(scheme)://\(name)"), mtime: mountTime)))
        case let .path(base):
            let url = ByURLPath.childURL(base: base, name: name)
            backend.open(url: url) { [self] result in
                switch Self.checkedLength(result) {
                case let .success(info):
                    if Self.isDirectoryRedirect(requested: url, final: info.finalURL) {
                        return reply(addResolved(parent: parent, name: name, content: .directory(byURL: .path(base: url), mtime: now())))
                    }
                    reply(addResolved(parent: parent, name: name, content: .file(url: url), info: info))
                case .failure(.notFound) where !name.contains("?"):
                    // Servers answer 404 for path prefixes (S3, CDNs): a name that is not a file
                    // may still lead to one, so it is a directory.
                    reply(addResolved(parent: parent, name: name, content: .directory(byURL: .path(base: url), mtime: now())))
                case let .failure(error):
                    logger.warning("by-URL lookup failed: \(url): \(error)")
                    reply(.failure(FSErrno(error.errno)))
                }
            }
        }
    }

    /// `ls MOUNTPOINT/.url` shows where to go on: `http` and `https` exist before any lookup.
    /// Under the lock (`s`). They are resolved nodes like the ones a lookup makes, so the same
    /// lookup counting and pruning applies; the next listing adds them again if pruned.
    func addSchemeDirectories(under node: Node, _ s: inout State) {
        for scheme in ByURLPath.schemes.sorted() where s.table.child(of: node.ino, named: scheme) == nil {
            s.table.add(parent: node.ino, name: scheme, origin: .resolved,
                      content: .directory(DirectoryState(mtime: mountTime, byURL: .hosts(scheme: scheme))))
        }
    }

    /// What a by-URL name resolved to; its node is made under the lock, where nodes live.
    enum Resolved {
        case directory(byURL: ByURLLevel, mtime: Date)
        case file(url: String)
    }

    func addResolved(parent: UInt64, name: String, content: Resolved, info: EntryInfo? = nil) -> Result<Attr, FSErrno> {
        state.withLock { s in
            if let existing = s.table.child(of: parent, named: name) {
                s.table.lookedUp(existing.ino)
                return .success(attr(existing))
            }
            guard let p = s.table.node(parent), p.attached, p.directory != nil else { return .failure(FSErrno(ENOENT)) }
            let made: NodeContent
            switch content {
            case let .directory(level, mtime): made = .directory(DirectoryState(mtime: mtime, byURL: level))
            case let .file(url): made = .file(FileState(url: url))
            }
            let node = s.table.add(parent: parent, name: name, origin: .resolved, content: made)
            if let info { record(info, for: node, &s) }
            s.table.lookedUp(node.ino)
            return .success(attr(node))
        }
    }

    /// `http://h/dir` redirected to `http://h/dir/`: a directory, whatever the body says.
    static func isDirectoryRedirect(requested: String, final: String) -> Bool {
        let path = { (s: String) in URLComponents(string: s)?.path ?? "" }
        return path(final).hasSuffix("/") && !path(requested).hasSuffix("/")
    }
}
