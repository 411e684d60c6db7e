import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Which process holds a cache directory's lock (`<dir>/lock`, an exclusive `flock`), read
/// from `/proc/locks`, so a client can tell the live owner of a cache from a stale file.
///
/// The lock file also names its holder, but a daemon killed with SIGKILL leaves that text
/// behind while the kernel drops the lock with the process: only the kernel's table is current.
enum CacheLockHolder {
    enum Answer: Equatable {
        /// The pid holding the lock.
        case held(by: pid_t)
        /// Nobody holds it (or there is no lock file yet).
        case free
        /// `/proc/locks` cannot be read here (not Linux, or hidden): the caller must not assume.
        case unknown
    }

    static func holder(ofCacheDirectory directory: String) -> Answer {
        var st = stat()
        guard stat(directory + "/lock", &st) == 0 else { return .free }
        guard let table = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return .unknown }
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff)
        let minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
        return holder(in: table, major: major, minor: minor, inode: UInt64(st.st_ino))
    }

    /// Parses `/proc/locks` lines such as `1: FLOCK  ADVISORY  WRITE 4242 fe:00:16220736 0 EOF`
    /// (device major and minor in hex, the inode in decimal). Waiters (`1: -> FLOCK ...`) hold nothing.
    static func holder(in table: String, major: UInt64, minor: UInt64, inode: UInt64) -> Answer {
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK" else { continue }
            let id = fields[5].split(separator: ":")
            guard id.count == 3, UInt64(id[0], radix: 16) == major, UInt64(id[1], radix: 16) == minor,
                  UInt64(id[2]) == inode, let pid = pid_t(fields[4]) else { continue }
            return .held(by: pid)
        }
        return .free
    }
}
