import CacheCore
import Foundation
import Glibc
import Logging

/// Open files: open revalidates and binds the handle to the version it found, reads answer with
/// leases, release closes the reader.
///
/// A file whose version is all cached opens with passthrough where the kernel allows it: the
/// kernel reads the cache's data file itself, and the file stays pinned (never evicted) until
/// the inode's last such handle is released.
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
                finishOpen(ino: ino, node: node, file: file, url: url, info: info,
                           reader: backend.makeReader(for: info), reply: reply)
            }
        }
    }

    /// Makes the handle of a revalidated open: with passthrough when the version is all cached
    /// and the kernel can take it, else an ordinary one.
    ///
    /// An inode open with passthrough to an older version cannot take this one (the kernel
    /// refuses both a second backing file and an ordinary open beside it): the name moves to a
    /// new inode, and the open fails with ESTALE, which makes the kernel repeat its lookup and
    /// the open once, on the new inode. The old handles keep their version on the old inode.
    private func finishOpen(ino: UInt64, node: Node, file: FileState, url: String, info: EntryInfo,
                            reader: MountReader, reply: @escaping (Result<OpenReply, FSErrno>) -> Void) {
        enum Outcome {
            case opened(OpenReply, changed: Bool, KernelNotifier?)
            case stale(moved: UInt64?, parent: UInt64, name: String, KernelNotifier?)
            case closed
        }
        // Asked only when it may be used (it pins the file and counts a hit): no backing file
        // for the inode yet, and no ordinary open beside which the kernel would refuse one.
        let wanted = lock.withLock {
            backing != nil && passthroughInodes[ino] == nil && !openFiles.values.contains { $0.ino == ino }
        }
        let whole = wanted ? reader.wholeFile() : nil
        var unused = whole
        let outcome: Outcome = lock.withLock {
            if closed { return .closed }
            let choice = passthroughChoice(ino: ino, generation: info.generation, whole: whole)
            let backingID: Int32?
            switch choice {
            case .busy:
                let moved = table.renumber(ino)
                if let moved, let f = moved.file { record(info, for: moved, f) }
                return .stale(moved: moved?.ino, parent: node.parent, name: node.name, notifier)
            case .none: backingID = nil
            case let .shared(id): backingID = id
            case let .registered(id): backingID = id; unused = nil
            }
            let oldSize = file.size
            record(info, for: node, file)
            let keep = file.lastOpenGeneration == info.generation
            let changed = oldSize != file.size || (file.lastOpenGeneration != nil && !keep)
            file.lastOpenGeneration = info.generation
            let fh = nextHandle
            nextHandle += 1
            openFiles[fh] = OpenFile(ino: ino, url: url, reader: reader, passthrough: backingID != nil)
            return .opened(OpenReply(fh: fh, keepCache: keep, backingID: backingID), changed: changed, notifier)
        }
        unused?.release()
        switch outcome {
        case let .opened(open, changed, n):
            // The open reply carries no attributes: a new size must reach the kernel this way,
            // before the first read clips at the old one.
            if changed { n?.invalidateAttributesNow(ino) }
            reply(.success(open))
        case let .stale(moved, parent, name, n):
            reader.close()
            if let moved {
                logger.info("\(url) changed remotely while open with passthrough: inode \(ino) keeps the old version for its handles, new opens get inode \(moved)")
            }
            n?.invalidateEntry(parent: parent, name: name)
            reply(.failure(FSErrno(ESTALE)))
        case .closed:
            reader.close()
            reply(.failure(FSErrno(EIO)))
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
        // Right here on the FUSE thread: a hit does no I/O (the reply sends from the data file),
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
        var done: WholeFile?
        let file: OpenFile? = lock.withLock {
            guard let f = openFiles.removeValue(forKey: fh) else { return nil }
            // The kernel let go of the backing file when the inode's last such file closed.
            if f.passthrough, let p = passthroughInodes[f.ino],
               !openFiles.values.contains(where: { $0.ino == f.ino && $0.passthrough }) {
                passthroughInodes[f.ino] = nil
                backing?.unregister(p.backingID)
                done = p.file
            }
            return f
        }
        file?.reader.close()
        done?.release()
    }

    enum PassthroughChoice {
        /// An ordinary open, read through the engine.
        case none
        /// Passthrough with the inode's backing file already registered.
        case shared(Int32)
        /// Passthrough with `whole`, registered now (it is kept until the last handle goes).
        case registered(Int32)
        /// The inode is open with passthrough to another version: the kernel would refuse both
        /// an ordinary open and another backing file.
        case busy
    }

    /// How a new handle of `ino` for `generation` opens. Call under the lock (the ioctl that
    /// registers a backing file is quick and calls nothing back).
    func passthroughChoice(ino: UInt64, generation: Int64, whole: WholeFile?) -> PassthroughChoice {
        if let p = passthroughInodes[ino] {
            return p.file.generation == generation ? .shared(p.backingID) : .busy
        }
        // The kernel refuses passthrough while the inode has ordinary opens (its page cache is in use).
        guard let whole, let backing, !openFiles.values.contains(where: { $0.ino == ino }),
              let id = backing.register(whole.fd) else { return .none }
        passthroughInodes[ino] = PassthroughInode(backingID: id, file: whole)
        return .registered(id)
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
