import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An exclusive `flock` on `<cache dir>/lock`, held for the life of the engine, so that two
/// processes never write one cache. The file names the holder, for the error the second one shows.
final class DirectoryLock: Sendable {
    private let fd: Int32
    let path: String

    init(directory: String) throws {
        path = directory + "/lock"
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 { throw CacheError.storage(path: path, message: String(cString: strerror(errno))) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            close(fd)
            throw CacheError.locked(path: directory, holder: holder.isEmpty ? "another process" : holder)
        }
        let me = "process \(getpid()) (\(CommandLine.arguments.prefix(2).joined(separator: " ")))\n"
        ftruncate(fd, 0)
        _ = me.withCString { pwrite(fd, $0, strlen($0), 0) }
    }

    /// Why the lock file at `path` is no longer this one, or nil while it is: the cache
    /// directory was deleted (`rm -rf` while the daemon runs) or replaced. Files open in it are
    /// still read, but nothing new can be kept there, and another daemon may start on the path.
    func displaced() -> String? {
        var mine = stat()
        guard fstat(fd, &mine) == 0 else { return nil }
        if mine.st_nlink == 0 { return "its lock file was deleted" }
        var there = stat()
        guard stat(path, &there) == 0 else { return "its lock file is gone (\(String(cString: strerror(errno))))" }
        if there.st_dev != mine.st_dev || there.st_ino != mine.st_ino { return "another lock file took its place" }
        return nil
    }

    func release() {
        ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
    }
}
