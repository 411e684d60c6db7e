import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The cache directory is its user's alone (0700): it holds the bytes of everything fetched,
/// private media among them, and an index of every URL, passwords included.
enum PrivateDirectory {
    /// Creates `path` with mode 0700 (its parents as usual), or takes group and other access away
    /// from an existing one this user owns (a cache made by an older version was 0755). One owned
    /// by someone else is refused.
    static func make(_ path: String, logger: Logger) throws {
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty { try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true) }
        if mkdir(path, 0o700) == 0 { return }
        let code = errno
        var st = stat()
        guard code == EEXIST, stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw StorageError(path: path, errno: code)
        }
        // Another user's cache is never opened for writing, root's commands included: its
        // user controls every name in it (a symlink where `credential.key` or `index.reserve`
        // would be made would have this process write wherever it points).
        guard st.st_uid == geteuid() else {
            throw StorageError(path: path, message: "it belongs to uid \(st.st_uid), not this user (uid \(geteuid())): a cache is opened only by its owner; run the command as that user, or choose another --cache-dir")
        }
        guard st.st_mode & 0o077 != 0 else { return }
        if chmod(path, st.st_mode & 0o700) == 0 {
            logger.notice("made the cache directory private (mode 0700)", metadata: ["directory": "\(path)"])
        }
    }
}
