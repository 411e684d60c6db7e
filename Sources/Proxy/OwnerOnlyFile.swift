import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Files only their owner may read (the signing key, the runtime file with the control key),
/// written so that no one else can read them at any moment: created with mode 0600 by `open`,
/// never with the default mode first and narrowed afterwards.
enum OwnerOnlyFile {
    /// Writes `bytes` to a new temporary file next to `path` (mode 0600) and returns its path;
    /// the caller links or renames it into place and removes it.
    static func writeTemporary(_ bytes: [UInt8], near path: String) throws -> String {
        let tmp = path + ".\(getpid()).tmp"
        unlink(tmp)
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw OwnerOnlyFileError(path: tmp, cause: String(cString: strerror(errno))) }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let cause = String(cString: strerror(errno))
                unlink(tmp)
                throw OwnerOnlyFileError(path: tmp, cause: cause)
            }
            done += n
        }
        return tmp
    }

    /// Replaces `path` with `bytes`, atomically (a reader sees the old file or the new one).
    static func replace(_ path: String, with bytes: [UInt8]) throws {
        let tmp = try writeTemporary(bytes, near: path)
        guard rename(tmp, path) == 0 else {
            let cause = String(cString: strerror(errno))
            unlink(tmp)
            throw OwnerOnlyFileError(path: path, cause: cause)
        }
    }
}

struct OwnerOnlyFileError: Error, CustomStringConvertible {
    var path: String
    var cause: String
    var description: String { "cannot write \(path): \(cause)" }
}
