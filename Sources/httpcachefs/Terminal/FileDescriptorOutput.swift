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
///
/// A path that names something other than a regular file (`/dev/stdout`, `/dev/null`, a FIFO, a
/// socket, or a link to one) is written straight into, as `cp` does: the rename replaced the
/// device node or link itself with a regular file (`cache export URL /dev/full` as root turned
/// `/dev/full` into a 5 MB file and reported success). A directory is refused.
final class AtomicFileWriter: Sendable {
    let path: String
    /// nil: `path` is written directly (it is not a regular file).
    private let temporaryPath: String?
    /// The temporary file while it is written (writes come from the chunked read's queue); -1
    /// once committed or abandoned.
    private let file: LockedValue<Int32>

    init(path: String) throws {
        self.path = path
        var st = stat()
        let direct = stat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFREG
        if direct && (st.st_mode & S_IFMT) == S_IFDIR {
            file = LockedValue(-1)
            temporaryPath = nil
            throw CommandFailure("cannot write \(path): it is a directory")
        }
        let target = direct ? path : path + ".partial-\(getpid())"
        temporaryPath = direct ? nil : target
        let fd = direct ? open(path, O_WRONLY | O_CLOEXEC) : open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        file = LockedValue(fd)
        guard fd >= 0 else {
            throw CommandFailure("cannot \(direct ? "open" : "create") \(target): \(String(cString: strerror(errno)))")
        }
    }

    func write(_ bytes: [UInt8]) throws {
        if case let .failed(code) = file.withLock({ FileDescriptorOutput.writeAll(fd: $0, bytes[...]) }) {
            throw CommandFailure("cannot write \(path): \(String(cString: strerror(code)))")
        }
    }

    func commit() throws {
        let direct = temporaryPath == nil
        let closed: Int32? = file.withLock { fd in
            // A pipe or a device may not sync (EINVAL): only a file's sync failure counts.
            guard fsync(fd) == 0 || (direct && (errno == EINVAL || errno == EROFS)), close(fd) == 0 else { return errno }
            fd = -1
            return nil
        }
        if let closed {
            abandon()
            throw CommandFailure("cannot write \(path): \(String(cString: strerror(closed)))")
        }
        guard let temporaryPath else { return }
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
        if let temporaryPath { unlink(temporaryPath) }
    }

    deinit { if file.withLock({ $0 >= 0 }) { abandon() } }
}
