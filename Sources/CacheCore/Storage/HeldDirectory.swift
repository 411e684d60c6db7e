import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The cache directory, held open for the life of the engine: every file the engine opens,
/// creates, renames or deletes while it runs is named relative to this descriptor (`openat`,
/// `mkdirat`, `renameat`, `unlinkat`), never by the directory's path.
///
/// Why: a directory deleted under a running daemon and made again at the same
/// path (by `rm -rf` and a second `httpcachefs`, a restored backup, a sync tool) holds another
/// cache's files under the same names (`data/01/1-1.data` is the first file of every cache). An
/// engine that opened files by path would read that other cache's bytes as its own: one file's
/// bytes served for another's. Through its descriptor, the engine only ever sees the directory it
/// locked: in a deleted one, opens of files that are gone fail (a miss, fetched again) and
/// nothing new can be made (the write fails, the read is still answered from the origin).
///
/// Threads: any; the calls are the system's, retried on EINTR. The path is kept for messages only.
final class HeldDirectory: Sendable {
    /// The directory as the user named it: for messages, and the 5-second check that it is still
    /// there (`DirectoryLock.displaced`).
    let path: String
    let fd: Int32

    init(path: String) throws {
        self.path = path
        var fd: Int32
        repeat { fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        if fd < 0 { throw StorageError(path: path, errno: errno) }
        // The directory held is this user's (checked on the descriptor: a path swapped after
        // `PrivateDirectory.make` looked at it is caught here), so no one else names its files.
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_uid == geteuid() else {
            close(fd)
            throw StorageError(path: path, message: "it belongs to uid \(st.st_uid), not this user (uid \(geteuid())): a cache is opened only by its owner")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// `path/relative`, for messages.
    func display(_ relative: String) -> String { path + "/" + relative }

    /// `openat`: a descriptor, or -1 and errno. Never through a symlink (`O_NOFOLLOW`): no file
    /// of a cache is one.
    func open(_ relative: String, _ flags: Int32, mode: mode_t = 0o600) -> Int32 {
        var result: Int32
        repeat { result = openat(fd, relative, flags | O_CLOEXEC | O_NOFOLLOW, mode) } while result < 0 && errno == EINTR
        return result
    }

    /// `mkdirat`: 0 also when it exists already; -1 and errno otherwise.
    func makeDirectory(_ relative: String, mode: mode_t = 0o700) -> Int32 {
        if mkdirat(fd, relative, mode) == 0 || errno == EEXIST { return 0 }
        return -1
    }

    /// `unlinkat`: 0, or -1 and errno.
    @discardableResult
    func unlink(_ relative: String) -> Int32 { unlinkat(fd, relative, 0) }

    /// `renameat` within the directory: 0, or -1 and errno.
    @discardableResult
    func rename(_ from: String, to: String) -> Int32 { renameat(fd, from, fd, to) }

    /// True when `relative` exists (`faccessat`).
    func exists(_ relative: String) -> Bool { faccessat(fd, relative, F_OK, 0) == 0 }

    /// The names in the folder `relative` ("." and ".." left out), or nil if it cannot be read.
    func names(in relative: String) -> [String]? {
        let dfd = open(relative, O_RDONLY | O_DIRECTORY)
        guard dfd >= 0 else { return nil }
        guard let dir = fdopendir(dfd) else {
            close(dfd)
            return nil
        }
        defer { closedir(dir) }   // closes dfd too
        var names: [String] = []
        while let ent = readdir(dir) {
            let name = withUnsafeBytes(of: ent.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
