import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reading a small file of a cache directory that may not be this process's own: `status` as
/// root reads every user's runtime files (`proxy.json`, `mounts.json`), and any command reads the
/// ones of the cache it is pointed at.
///
/// A file another user controls can be a symlink to something of root's, a FIFO that never
/// answers, or gigabytes: so it is opened without following a symlink, without blocking, and
/// taken only if it is a regular file of the expected owner, within a size bound. Nothing here
/// ever creates or writes.
public enum OwnedFile {
    /// Why a file was not taken.
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        case missing
        case symlink
        case notRegular
        case wrongOwner(uid: uid_t, expected: uid_t)
        case tooLarge(bytes: Int64, limit: Int)
        case unreadable(errno: Int32)

        public var description: String {
            switch self {
            case .missing: return "no such file"
            case .symlink: return "a symbolic link (not followed)"
            case .notRegular: return "not a regular file"
            case let .wrongOwner(uid, expected): return "owned by uid \(uid), not uid \(expected)"
            case let .tooLarge(bytes, limit): return "\(bytes) bytes, more than \(limit)"
            case let .unreadable(code): return String(cString: strerror(code))
            }
        }
    }

    /// Whether a file of these properties may be read as one owned by `owner` (pure: the table
    /// test's subject). `mode` is `st_mode`; `size` `st_size`.
    public static func check(mode: mode_t, uid: uid_t, size: Int64, owner: uid_t, maxBytes: Int) -> Refusal? {
        if mode & S_IFMT == S_IFLNK { return .symlink }
        if mode & S_IFMT != S_IFREG { return .notRegular }
        if uid != owner { return .wrongOwner(uid: uid, expected: owner) }
        if size > Int64(maxBytes) { return .tooLarge(bytes: size, limit: maxBytes) }
        return nil
    }

    /// The bytes of `path` if it is a regular file (not a symlink) owned by `owner`, at most
    /// `maxBytes` long. Read-only, non-blocking open (a FIFO is refused, not waited on).
    public static func read(_ path: String, owner: uid_t = geteuid(), maxBytes: Int = 1 << 20) -> Result<[UInt8], Refusal> {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else {
            switch errno {
            case ENOENT, ENOTDIR: return .failure(.missing)
            case ELOOP: return .failure(.symlink)
            case let code: return .failure(.unreadable(errno: code))
            }
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(.unreadable(errno: errno)) }
        if let refusal = check(mode: st.st_mode, uid: st.st_uid, size: Int64(st.st_size), owner: owner, maxBytes: maxBytes) {
            return .failure(refusal)
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while bytes.count <= maxBytes {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return .failure(.unreadable(errno: errno)) }
            if n == 0 { break }
            bytes += buffer[0..<n]
        }
        // It grew after fstat: still bounded.
        guard bytes.count <= maxBytes else { return .failure(.tooLarge(bytes: Int64(bytes.count), limit: maxBytes)) }
        return .success(bytes)
    }

    /// Who owns `directory` (following a symlink to it: a cache directory may be one), or nil if
    /// it is not a directory.
    public static func directoryOwner(_ directory: String) -> uid_t? {
        var st = stat()
        guard stat(directory, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { return nil }
        return st.st_uid
    }
}
