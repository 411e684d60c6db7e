import CacheCore
import Foundation
import Glibc
import Logging

/// Open files: open revalidates and binds the handle to the version it found, reads answer with
/// leases, release closes the reader.
extension FileSystemCore {
    // MARK: Files

    func open(_ ino: UInt64, flags: Int32, reply: @escaping (Result<OpenReply, FSErrno>) -> Void) {
        if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 { return reply(.failure(FSErrno(EROFS))) }
        let target: Result<(Node, FileState, String), FSErrno> = lock.withLock {
            guard let node = table.node(ino) else { return .failure(FSErrno(ENOENT)) }
            guard let f = node.file else { return .failure(FSErrno(EISDIR)) }
            return .success((node, f, f.url))
        }
        guard case let .success((node, file, url)) = target else {
            if case let .failure(e) = target { reply(.failure(e)) }
            return
        }
        backend.open(url: url) { [self] result in
            switch Self.checkedLength(result) {
            case let .failure(error):
                logger.error("open failed: \(url): \(error)")
                reply(.failure(FSErrno(error.errno)))
            case let .success(info):
                let reader = backend.makeReader(for: info)
                let outcome: (OpenReply, Bool, KernelNotifier?)? = lock.withLock {
                    if closed { return nil }
                    let oldSize = file.size
                    record(info, for: node, file)
                    let keep = file.lastOpenGeneration == info.generation
                    let changed = oldSize != file.size || (file.lastOpenGeneration != nil && !keep)
                    file.lastOpenGeneration = info.generation
                    let fh = nextHandle
                    nextHandle += 1
                    openFiles[fh] = OpenFile(ino: ino, url: url, reader: reader)
                    return (OpenReply(fh: fh, keepCache: keep), changed, notifier)
                }
                guard let (open, changed, n) = outcome else {
                    reader.close()
                    return reply(.failure(FSErrno(EIO)))
                }
                // The open reply carries no attributes: a new size must reach the kernel this way,
                // before the first read clips at the old one.
                if changed { n?.invalidateAttributesNow(ino) }
                reply(.success(open))
            }
        }
    }

    /// Reads through the handle's reader; fails with EIO once `readDeadline` passes.
    func read(fh: UInt64, offset: Int64, size: Int, reply: @escaping (Result<ReadLease, FSErrno>) -> Void) {
        guard let file = lock.withLock({ openFiles[fh] }) else { return reply(.failure(FSErrno(EBADF))) }
        // The kernel passes any offset up to Int64.max (pread at 2^63 - 2). No file here extends
        // past FileLength.limit, so reading there is reading at the end of the file.
        guard offset >= 0 else { return reply(.failure(FSErrno(EINVAL))) }
        guard offset < FileLength.limit else { return reply(.success(ReadLease(bytes: []))) }
        let once = ReplyOnce(reply)
        let range = "bytes \(offset)-\(offset.addingClamped(Int64(size)) - 1)"
        // Right here on the FUSE thread: a hit does no I/O (the reply sends from the slice files),
        // a miss completes later from an engine thread.
        file.reader.lease(offset: offset, length: size) { [logger] result in
            switch result {
            case let .success(lease):
                once.fire(.success(lease))
            case let .failure(error):
                if once.fire(.failure(FSErrno(error.errno))), error != .cancelled {
                    logger.error("read failed: \(file.url) \(range): \(error)")
                }
            }
        }
        // A cache hit has been answered by now; only reads still waiting get a deadline
        // (a backstop behind the engine's own read timeout).
        guard let readDeadline = options.readDeadline, !once.hasFired else { return }
        deadlineQueue.asyncAfter(deadline: .now() + readDeadline) { [logger] in
            if once.fire(.failure(FSErrno(EIO))) {
                logger.error("read timed out after \(readDeadline)s: \(file.url) \(range)")
            }
        }
    }

    func release(fh: UInt64) {
        lock.withLock { openFiles.removeValue(forKey: fh) }?.reader.close()
    }
}

/// A completion that runs at most once (a read's answer races its deadline).
final class ReplyOnce<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var fn: ((T) -> Void)?  // guarded by lock

    init(_ fn: @escaping (T) -> Void) { self.fn = fn }

    var hasFired: Bool { lock.withLock { fn == nil } }

    /// Runs the completion if nobody did yet; true if this call did.
    @discardableResult
    func fire(_ value: T) -> Bool {
        guard let f = lock.withLock({ () -> ((T) -> Void)? in defer { fn = nil }; return fn }) else { return false }
        f(value)
        return true
    }
}
