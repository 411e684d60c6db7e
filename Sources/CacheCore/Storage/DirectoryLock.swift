import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One owner per cache directory: two exclusive `flock`s held for the life of the engine, so that
/// two processes never use one cache. The files name the holder, for the error the second shows
/// ("cache directory … is in use by process N (…)").
///
/// - `lock` inside the directory (opened through the held descriptor): what older versions took,
///   and what `status` and the CLI find.
/// - An owner lock outside it, keyed by the directory's canonical path, in the user's runtime
///   directory (`$XDG_RUNTIME_DIR/httpcachefs`, `/run/httpcachefs` for root, else
///   `/tmp/httpcachefs-UID`, each 0700 and this user's). Why: `rm -rf` of the
///   directory under a running daemon deletes the inner lock with it, and a second process on
///   the same path would then find no lock, number its data files from 1 as the first does, and
///   the first would read them as its own. The outer lock outlives the directory, so the second process is
///   refused. A file rather than an abstract socket: the runtime directory is this user's alone
///   (another user cannot squat the name and keep the daemon from starting), and the file names
///   its holder. Where no such directory can be made, only the inner lock is taken (said once
///   in the log); the engine's held descriptor still keeps it off another process's files.
final class DirectoryLock: Sendable {
    private let fd: Int32
    private let owner: OwnerLock?
    /// `<cache dir>/lock`, for the check that it is still there.
    let path: String

    /// Takes both locks, the outer one first. Throws `CacheError.locked` naming the holder.
    init(directory: HeldDirectory, ownersDirectory: String? = DirectoryLock.ownersDirectory(), note: (String) -> Void = { _ in }) throws {
        path = directory.display("lock")
        let me = "process \(getpid()) (\(CommandLine.arguments.prefix(2).joined(separator: " ")))\n"
        if let ownersDirectory, let canonical = realpath(directory.path, nil) {
            let key = String(cString: canonical)
            free(canonical)
            owner = try OwnerLock(directory: directory.path, canonical: key, in: ownersDirectory, me: me, note: note)
        } else {
            note("no runtime directory for the cache's owner lock; only the lock inside the cache directory is taken")
            owner = nil
        }
        let fd = directory.open("lock", O_RDWR | O_CREAT, mode: 0o600)
        if fd < 0 {
            owner?.release()
            throw CacheError.storage(path: path, message: String(cString: strerror(errno)))
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = Self.holder(fd)
            close(fd)
            owner?.release()
            throw CacheError.locked(path: directory.path, holder: holder)
        }
        self.fd = fd
        ftruncate(fd, 0)
        _ = me.withCString { pwrite(fd, $0, strlen($0), 0) }
    }

    /// Who holds the lock of `fd`, as its file says.
    fileprivate static func holder(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        let text = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : ""
        return text.isEmpty ? "another process" : String(text.split(separator: "\n").first ?? "")
    }

    /// Where owner locks live: the user's runtime directory, made 0700 if need be; nil where
    /// none is this user's alone.
    static func ownersDirectory() -> String? {
        let base: String
        if let run = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], run.hasPrefix("/") {
            base = run + "/httpcachefs"
        } else if geteuid() == 0 {
            base = "/run/httpcachefs"
        } else {
            base = "/tmp/httpcachefs-\(geteuid())"
        }
        _ = mkdir(base, 0o700)
        var st = stat()
        guard lstat(base, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == geteuid(), st.st_mode & 0o077 == 0 else {
            return nil
        }
        return base
    }

    /// Why the lock file at `path` is no longer this one, or nil while it is: the cache
    /// directory was deleted (`rm -rf` while the daemon runs) or replaced. Files open in it are
    /// still read, but nothing new can be kept there (the engine works through its held
    /// descriptor), and the owner lock keeps another process off the path.
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
        owner?.release()
    }
}

/// The lock outside the cache directory: `<owners>/<hash of the canonical path>.lock`.
private final class OwnerLock: Sendable {
    private let fd: Int32
    private let path: String

    init(directory: String, canonical: String, in owners: String, me: String, note: (String) -> Void) throws {
        var hash = XXH64()
        Array(canonical.utf8).withUnsafeBytes { hash.update($0) }
        path = owners + "/cache-" + String(hash.value, radix: 16) + ".lock"
        // A holder removes its file as it lets go (so runtime directories do not fill up with
        // them); a lock taken on a file that was just removed is taken again on the new one.
        for _ in 0..<8 {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else {
                note("cannot open the cache's owner lock \(path): \(String(cString: strerror(errno))); only the lock inside the cache directory is taken")
                self.fd = -1
                return
            }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let holder = DirectoryLock.holder(fd)
                close(fd)
                throw CacheError.locked(path: directory, holder: holder)
            }
            var mine = stat(), there = stat()
            if fstat(fd, &mine) == 0, stat(path, &there) == 0, mine.st_dev == there.st_dev, mine.st_ino == there.st_ino {
                self.fd = fd
                ftruncate(fd, 0)
                let text = me + canonical + "\n"
                _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
                return
            }
            close(fd)
        }
        throw CacheError.locked(path: directory, holder: "another process (its owner lock \(path) keeps changing)")
    }

    func release() {
        guard fd >= 0 else { return }
        unlink(path)
        ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
    }
}
