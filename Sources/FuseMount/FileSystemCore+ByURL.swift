import CacheCore
import Foundation
import Glibc
import Logging

/// The by-URL tree (`.url/SCHEME/HOST/PATH`): names resolved against the origin on lookup.
extension FileSystemCore {
    // MARK: By-URL directory

    func resolveByURL(parent: UInt64, level: ByURLLevel, name: String,
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
                switch Self.checkedLength(result) {
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

    /// `ls MOUNTPOINT/.url` shows where to go on: `http` and `https` exist before any lookup.
    /// Caller holds `lock`. They are resolved nodes like the ones a lookup makes, so the same
    /// lookup counting and pruning applies; the next listing adds them again if pruned.
    func addSchemeDirectories(under node: Node) {
        for scheme in ByURLPath.schemes.sorted() where table.child(of: node.ino, named: scheme) == nil {
            table.add(parent: node.ino, name: scheme, origin: .resolved,
                      content: .directory(DirectoryState(mtime: mountTime, byURL: .hosts(scheme: scheme))))
        }
    }

    func addResolved(parent: UInt64, name: String, content: NodeContent, info: EntryInfo? = nil) -> Result<Attr, FSErrno> {
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
}
