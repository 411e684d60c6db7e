import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The soft limit on open files, raised to the hard limit before a cache opens.
///
/// Every reader keeps a data file open (a lease), every transfer a socket, and the mount and the
/// proxy serve many at once: the soft limit (1024 under systemd, often 256 elsewhere) is a
/// default meant for programs that use select(2), which this one does not (libcurl polls), and
/// the hard limit is what the administrator allows. Best effort: a limit that cannot be raised
/// stays as it was.
enum OpenFileLimit {
    /// Raises the soft limit to the hard one and logs the new limit at debug level.
    static func raiseToHard(logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let before = limit.rlim_cur
        guard before < limit.rlim_max else { return }
        // Linux refuses an infinite limit (RLIM_INFINITY, all ones) for open files: the ceiling is then fs.nr_open.
        var target = limit.rlim_max
        if target == rlim_t.max, let ceiling = systemCeiling() { target = ceiling }
        guard target > before else { return }
        limit.rlim_cur = target
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            logger.debug("raised the open-file limit", metadata: ["from": "\(before)", "to": "\(target)"])
        } else {
            logger.debug("cannot raise the open-file limit", metadata: [
                "limit": "\(before)", "wanted": "\(target)", "error": "\(String(cString: strerror(errno)))"])
        }
    }

    /// `/proc/sys/fs/nr_open`: the most open files one process may be allowed.
    private static func systemCeiling() -> rlim_t? {
        guard let text = try? String(contentsOfFile: "/proc/sys/fs/nr_open", encoding: .utf8) else { return nil }
        return rlim_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
