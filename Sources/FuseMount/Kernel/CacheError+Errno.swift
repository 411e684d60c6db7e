import CacheCore
import Glibc

extension CacheError {
    /// The errno a file system call reports for this error. The only place FuseMount maps cache
    /// errors; the FUSE glue logs the error (with URL and range) and replies with this.
    public var errno: Int32 {
        switch self {
        case .notFound: return ENOENT
        // A name that cannot be a URL (by-URL lookups) simply does not exist.
        case .invalidURL: return ENOENT
        case .forbidden, .refusedAddress: return EACCES
        case .httpStatus, .unreachable, .timeout, .badResponse, .rangeNotSatisfiable, .storage, .remoteChanged: return EIO
        // A read that needs the origin fails at once; the log and status page say until when.
        case .budgetSpent: return EIO
        // Tells the user why reads fail better than EIO would.
        case .diskFull: return ENOSPC
        case .locked: return EBUSY
        case .cancelled: return EINTR
        }
    }
}
