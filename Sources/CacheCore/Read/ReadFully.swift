import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a read of a whole range from a file came to, short of the range.
public enum ReadFullyFailure: Error, Equatable {
    /// The file ended first (it is shorter than the caller knew).
    case endOfFile
    /// `pread` failed with this errno.
    case failed(errno: Int32)
}

/// Fills `buffer` from `fd` at `offset` with `pread`, retrying on EINTR and after short reads:
/// every byte, or an error saying why not. The one read loop of data files and served files.
public func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(ReadFullyFailure) {
    var done = 0
    while done < buffer.count {
        let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
        if n < 0 {
            if errno == EINTR { continue }
            throw .failed(errno: errno)
        }
        if n == 0 { throw .endOfFile }
        done += n
    }
}

extension StorageError {
    /// A data file that could not give the bytes its index promised.
    init(path: String, _ failure: ReadFullyFailure) {
        switch failure {
        case .endOfFile: self.init(path: path, message: "data file is shorter than its index says")
        case let .failed(e): self.init(path: path, errno: e)
        }
    }
}
