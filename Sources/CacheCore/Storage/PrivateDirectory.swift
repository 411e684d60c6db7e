import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The cache directory is its user's alone (0700): it holds the bytes of everything fetched,
/// private media among them, and an index of every URL, passwords included.
enum PrivateDirectory {
    /// Creates `path` with mode 0700 (its parents as usual), or takes group and other access away
    /// from an existing one this user owns (a cache made by an older version was 0755; one owned
    /// by someone else is left as it is).
    static func make(_ path: String, logger: Logger) throws {
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty { try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true) }
        if mkdir(path, 0o700) == 0 { return }
        let code = errno
        var st = stat()
        guard code == EEXIST, stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw StorageError(path: path, errno: code)
        }
        guard st.st_uid == geteuid(), st.st_mode & 0o077 != 0 else { return }
        if chmod(path, st.st_mode & 0o700) == 0 {
            logger.notice("made the cache directory private (mode 0700)", metadata: ["directory": "\(path)"])
        }
    }
}
