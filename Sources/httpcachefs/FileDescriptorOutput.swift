import Foundation
import CacheCore

/// Writing bytes to a file descriptor completely: `write(2)` may take fewer bytes than asked
/// (pipes, signals), and a reader that went away (`| head`) shows up as EPIPE, which is a
/// normal way for `cat` to stop, not an error worth a message.
enum FileDescriptorOutput {
    enum Outcome: Equatable {
        case written
        case readerGone
        case failed(errno: Int32)
    }

    static func writeAll(fd: Int32, _ bytes: ArraySlice<UInt8>) -> Outcome {
        bytes.withUnsafeBytes { writeAll(fd: fd, $0) }
    }

    static func writeAll(fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Outcome {
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n > 0 {
                done += n
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && errno == EPIPE {
                return .readerGone
            } else {
                return .failed(errno: n < 0 ? errno : EIO)
            }
        }
        return .written
    }

    /// Makes a closed pipe an EPIPE error instead of a silent death by SIGPIPE, so the cache
    /// is still shut down cleanly (index flushed, lock released).
    static func ignoreSIGPIPE() { signal(SIGPIPE, SIG_IGN) }
}

/// A file written under a temporary name and renamed into place only when complete, so an
/// interrupted `cache export` never leaves a truncated file that looks finished.
final class AtomicFileWriter: Sendable {
    let path: String
    private let temporaryPath: String
    /// The temporary file while it is written (writes come from the chunked read's queue); -1
    /// once committed or abandoned.
    private let file: LockedValue<Int32>

    init(path: String) throws {
        self.path = path
        self.temporaryPath = path + ".partial-\(getpid())"
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        file = LockedValue(fd)
        guard fd >= 0 else {
            throw CommandFailure("cannot create \(temporaryPath): \(String(cString: strerror(errno)))")
        }
    }

    func write(_ bytes: [UInt8]) throws {
        if case let .failed(code) = file.withLock({ FileDescriptorOutput.writeAll(fd: $0, bytes[...]) }) {
            throw CommandFailure("cannot write \(path): \(String(cString: strerror(code)))")
        }
    }

    func commit() throws {
        let closed: Int32? = file.withLock { fd in
            guard fsync(fd) == 0, close(fd) == 0 else { return errno }
            fd = -1
            return nil
        }
        if let closed {
            abandon()
            throw CommandFailure("cannot write \(path): \(String(cString: strerror(closed)))")
        }
        guard rename(temporaryPath, path) == 0 else {
            let message = String(cString: strerror(errno))
            unlink(temporaryPath)
            throw CommandFailure("cannot rename \(temporaryPath) to \(path): \(message)")
        }
    }

    /// Removes the partial file (after a failure).
    func abandon() {
        file.withLock { fd in
            if fd >= 0 { close(fd); fd = -1 }
        }
        unlink(temporaryPath)
    }

    deinit { if file.withLock({ $0 >= 0 }) { abandon() } }
}
