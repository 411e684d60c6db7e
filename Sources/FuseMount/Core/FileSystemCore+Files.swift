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

    /// - Parameter readerClass: who opens (by its process, `ReaderClassTable`): only a player's
    ///   open takes the file's first bytes along; a scanner's and a background reader's (a
    ///   thumbnailer) read with direct I/O, so their own reads, not the kernel's read-ahead,
    ///   are what they earn read-ahead by (`EarnedReadAhead`).
    func open(_ ino: UInt64, flags: Int32, readerClass: ReaderClass = .player,
              reply: @escaping @Sendable (Result<OpenReply, FSErrno>) -> Void) {
        if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 { return reply(.failure(FSErrno(EROFS))) }
        var ahead: [(url: String, key: CacheKey?)] = []
        let target: Result<(url: String, key: CacheKey?), FSErrno> = state.withLock { s in
            guard let node = s.table.node(ino) else { return .failure(FSErrno(ENOENT)) }
            guard let f = node.file else { return .failure(FSErrno(EISDIR)) }
            // A folder opened file after file: its next files' entries are loaded ahead.
            if let range = s.scanAhead.opened(ino, in: node.parent) {
                for n in range {
                    guard let next = s.table.node(n), next.parent == node.parent, next.attached, let file = next.file else { continue }
                    ahead.append((file.url, file.key))
                }
            }
            return .success((f.url, f.key))
        }
        let url: String
        var key: CacheKey?
        switch target {
        case let .success(t): (url, key) = t
        case let .failure(e): return reply(.failure(e))
        }
        if !ahead.isEmpty { backend.loadAhead(keys: ahead.compactMap { $0.key ?? backend.cacheKey(for: $0.url) }) }
        // The key is the URL respelled (`KeyRules`): worked out at the inode's first open, kept
        // with it, not made again at every open.
        if key == nil, let made = backend.cacheKey(for: url) {
            key = made
            state.withLock { s in
                if let node = s.table.node(ino), node.file?.hasURL(url) == true { node.file?.key = made }
            }
        }
        let opened: @Sendable (Result<EntryInfo, CacheError>) -> Void = { [self] result in
            switch Self.checkedLength(result) {
            case let .failure(error):
                logger.error("open failed: \(url): \(error)")
                reply(.failure(FSErrno(error.errno)))
            case let .success(info):
                finishOpen(ino: ino, url: url, info: info, readerClass: readerClass, reply: reply)
            }
        }
        // A probe reads a few dozen KiB, `head -c 1` one byte: the first 256 KiB an open brings
        // along would be most of what they cost. Only a player's open takes them (it reads on);
        // every other asks for one byte (`lookUp`) and its reads for the rest.
        // A fresh entry is answered right here (on the FUSE loop), without a hand-off to the
        // engine's pool: making its handle takes a lock and no I/O (`finishOpen` hands a
        // passthrough open, which opens the data file, to the pool).
        backend.openFile(url: url, key: key, takeFirstBytes: readerClass.readsAheadFromOpen(door: .fuse),
                         answerFreshInline: true, completion: opened)
    }

    /// Makes the handle of a revalidated open: with passthrough when the version is all cached
    /// and the kernel can take it, else an ordinary one.
    ///
    /// An inode open with passthrough to an older version cannot take this one (the kernel
    /// refuses both a second backing file and an ordinary open beside it): the name moves to a
    /// new inode, and the open fails with ESTALE, which makes the kernel repeat its lookup and
    /// the open once, on the new inode. The old handles keep their version on the old inode.
    private func finishOpen(ino: UInt64, url: String, info: EntryInfo, readerClass: ReaderClass,
                            reply: @escaping @Sendable (Result<OpenReply, FSErrno>) -> Void) {
        let directIO = readerClass == .scanner || readerClass == .background
        enum Outcome {
            /// `behindStores`: the page cache of this file was filled; the reply waits for the
            /// stores queued before it.
            case opened(OpenReply, changed: Bool, behindStores: Bool, KernelNotifier?)
            case stale(moved: UInt64?, parent: UInt64, name: String, KernelNotifier?)
            case closed
            /// The inode went meanwhile (the kernel forgot it: nobody waits for this open).
            case gone
        }
        // Asked only when it may be used (it pins the file and counts a hit): a file larger than
        // one read (`opensOrdinarily`), no backing file for the inode yet, and no ordinary open
        // beside which the kernel would refuse one.
        let wanted = !opensOrdinarily(length: info.length) && state.withLock { s in
            s.backing != nil && s.passthroughInodes[ino] == nil && !s.openFiles.values.contains { $0.ino == ino }
        }
        if wanted && LoopThread.isCurrent {
            // The whole file is the data file opened: I/O, never on the loop.
            return backend.blockingIO.submit { [self] in finishOpen(ino: ino, url: url, info: info, readerClass: readerClass, reply: reply) }
        }
        let reader = backend.makeReader(for: info, readerClass: readerClass)
        let whole = wanted ? reader.wholeFile() : nil
        let (outcome, registered): (Outcome, Bool) = state.withLock { s in
            if s.closed { return (.closed, false) }
            guard let node = s.table.node(ino), let oldSize = node.file.map(\.size) else { return (.gone, false) }
            let choice = passthroughChoice(ino: ino, generation: info.generation, whole: whole, &s)
            let backingID: Int32?
            switch choice {
            case .busy:
                let moved = s.table.renumber(ino)
                if let moved { record(info, for: moved, &s) }
                return (.stale(moved: moved?.ino, parent: node.parent, name: node.name, s.notifier), false)
            case .none: backingID = nil
            case let .shared(id): backingID = id
            case let .registered(id): backingID = id
            }
            record(info, for: node, &s)
            let lastGeneration = node.file?.lastOpenGeneration
            let keep = lastGeneration == info.generation
            let changed = oldSize != node.file?.size || (lastGeneration != nil && !keep)
            node.file?.lastOpenGeneration = info.generation
            let fh = s.nextHandle
            s.nextHandle += 1
            let direct = directIO && backingID == nil   // passthrough reads no byte through us
            let fills = backingID == nil && !direct && options.pageCacheFill > 0 && info.length != nil
            // A file the kernel reads with one request has nothing to read ahead of.
            let readsAhead = backingID == nil && options.dataFileReadAhead > 0 && info.length != nil
                && !opensOrdinarily(length: info.length)
            s.openFiles[fh] = OpenFile(ino: ino, url: url, reader: reader, passthrough: backingID != nil,
                                       generation: info.generation, size: info.length,
                                       fill: fills ? LockedValue(PageCacheFill(window: options.pageCacheFill)) : nil,
                                       readAhead: readsAhead ? LockedValue(DataFileReadAhead(window: options.dataFileReadAhead)) : nil)
            let reply = OpenReply(fh: fh, keepCache: keep, backingID: backingID, directIO: direct)
            let opened = Outcome.opened(reply, changed: changed, behindStores: node.file?.filled ?? false, s.notifier)
            if case .registered = choice { return (opened, true) }
            return (opened, false)
        }
        // The whole file is kept only when it was registered as the inode's backing file.
        if !registered { whole?.release() }
        switch outcome {
        case let .opened(open, changed, behindStores, n):
            // The open reply carries no attributes: a new size must reach the kernel this way,
            // before the first read clips at the old one.
            if changed { n?.invalidateAttributesNow(ino) }
            if behindStores, let n {
                // A store of another version may be on its way into the page cache: it checked
                // that its version was current before this open made another one current. The
                // reply goes out after it, and the kernel drops it when this open does not keep
                // the cache; a store queued later finds its version no longer current.
                n.afterQueued { reply(.success(open)) }
            } else {
                reply(.success(open))
            }
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
        case .gone:
            reader.close()
            reply(.failure(FSErrno(ENOENT)))
        }
    }

    /// A file the kernel reads whole with one request (up to `max_read`) opens without
    /// passthrough even where it could have it: a passthrough open costs the daemon a backing
    /// file at every open (the data file opened on the pool, a registration, its release), an
    /// ordinary one a READ at its first open only, after which the kernel keeps the pages of an
    /// unchanged version (`keep_cache`). For a folder of posters and subtitles read again and
    /// again, the open is the cost (issue 51: 53 against 34-45 µs of daemon CPU per 4 KiB file).
    func opensOrdinarily(length: Int64?) -> Bool {
        guard let length else { return false }
        return length <= Int64(maxRead)
    }

    /// Reads through the handle's reader; fails with EIO once `readDeadline` passes. The reply
    /// also gets how many files were open when the read came (`SpliceSender` sends a hit on the
    /// loop only while few are), counted under the one look-up of the handle.
    func read(fh: UInt64, offset: Int64, size: Int, reply: @escaping @Sendable (Result<ReadLease, FSErrno>, _ filesOpen: Int) -> Void) {
        guard let (file, filesOpen) = state.withLock({ s in s.openFiles[fh].map { ($0, s.openFiles.count) } }) else {
            return reply(.failure(FSErrno(EBADF)), 0)
        }
        let reply: @Sendable (Result<ReadLease, FSErrno>) -> Void = { reply($0, filesOpen) }
        // The kernel passes any offset up to Int64.max (pread at 2^63 - 2). No file here extends
        // past FileLength.limit, so reading there is reading at the end of the file.
        guard offset >= 0 else { return reply(.failure(FSErrno(EINVAL))) }
        guard offset < FileLength.limit else { return reply(.success(ReadLease(bytes: []))) }
        let once = ReplyOnce(reply)
        // Right here on the FUSE thread: a hit does no I/O (the reply sends from the data file),
        // a miss completes later from an engine thread.
        file.reader.lease(offset: offset, length: size) { [self, logger] result in
            switch result {
            case let .success(lease):
                let hit = lease.originBytes == 0
                let count = lease.count
                let fromDisk = lease.readsFromDisk
                once.fire(.success(lease))
                if let ahead = file.readAhead, hit, fromDisk {
                    readDataFileAhead(file, ahead, after: offset..<(offset + Int64(count)))
                }
                if let fill = file.fill, count > 0 {
                    fillPageCache(file, fill, after: offset..<(offset + Int64(count)), hit: hit)
                }
            case let .failure(error):
                if once.fire(.failure(FSErrno(error.errno))), error != .cancelled {
                    logger.error("read failed: \(file.url) \(Self.describe(offset, size)): \(error)")
                }
            }
        }
        // A cache hit has been answered by now; only reads still waiting get a deadline
        // (a backstop behind the engine's own read timeout).
        guard let readDeadline = options.readDeadline, !once.hasFired else { return }
        deadlines.after(.seconds(readDeadline)) { [logger] in
            if once.fire(.failure(FSErrno(EIO))) {
                logger.error("read timed out after \(readDeadline)s: \(file.url) \(Self.describe(offset, size))")
            }
        }
    }

    /// Puts cached bytes ahead of a sequential reader into the kernel's page cache, as its
    /// `PageCacheFill` says, in stores of at most `storeSize` bytes, up to the first byte not
    /// cached. On the thread that answered the read (the FUSE loop for a hit): it takes leases
    /// under the shard lock and queues the stores, nothing more.
    private func fillPageCache(_ file: OpenFile, _ fill: LockedValue<PageCacheFill>, after range: Range<Int64>, hit: Bool) {
        guard let size = file.size else { return }
        let stretches = fill.withLock { $0.read(range, hit: hit, size: size) }
        guard !stretches.isEmpty else { return }
        let (n, first): (KernelNotifier?, Bool) = state.withLock { s in
            guard let node = s.table.node(file.ino), let f = node.file, f.lastOpenGeneration == file.generation else { return (nil, false) }
            defer { node.file?.filled = true }
            return (s.notifier, !f.filled)
        }
        guard let n else { return }
        if first { logger.debug("filling the page cache ahead of the reader: \(file.url)") }
        let ino = file.ino, generation = file.generation
        let current: @Sendable () -> Bool = { [weak self] in
            self?.state.withLock { $0.table.node(ino)?.file?.lastOpenGeneration == generation } ?? false
        }
        // One job per part of a stretch (before and after its tripwire): a few stores in
        // flight per reader, each job's in order.
        for stretch in stretches {
            var uncached = false
            _ = n.store(ino, if: current) {
                var pieces: [(offset: Int64, lease: ReadLease)] = []
                var at = stretch.lowerBound
                while at < stretch.upperBound {
                    let count = Int(min(Int64(Self.storeSize), stretch.upperBound - at))
                    guard let lease = file.reader.cachedLease(offset: at, length: count) else {
                        uncached = true
                        break
                    }
                    pieces.append((at, lease))
                    at += Int64(count)
                }
                return pieces
            }
            if uncached { return }   // not cached from there on
        }
    }

    /// Read-ahead of data files stops while more files than this are open: eight readers at
    /// once keep both cores busy with the kernel's copies and its own read-ahead of each data
    /// file, and reading ahead for them too made them slower (0.84x and 0.80x of eight plain
    /// reads against 0.90x and 0.86x, alternated runs), as filling their page cache did
    /// (`FuseSession.filesFilled`).
    static let filesReadAhead = 2

    /// A read's bytes for a message (spelled out only then: not on every read).
    static func describe(_ offset: Int64, _ size: Int) -> String {
        "bytes \(offset)-\(offset.addingClamped(Int64(size)) - 1)"
    }

    /// Reads the data file ahead of a sequential reader, as its `DataFileReadAhead` says, for
    /// a version all on disk (a partly cached file is left to the kernel's read-ahead: its holes
    /// would read as zeros into memory). On the thread that answered the read (the FUSE loop
    /// for a hit): one lock of the handle's own per read; the notifier's count, a lease and a
    /// job once per `step` bytes. Only while at most `filesReadAhead` files are open.
    private func readDataFileAhead(_ file: OpenFile, _ ahead: LockedValue<DataFileReadAhead>, after range: Range<Int64>) {
        guard let size = file.size, let next = ahead.withLock({ $0.read(range, size: size) }) else { return }
        guard let n = state.withLock({ $0.openFiles.count <= Self.filesReadAhead ? $0.notifier : nil }) else {
            ahead.withLock { $0.refused(next) }   // asked again at the next read, once fewer files are open
            return
        }
        let queued = n.readAhead { file.reader.cachedLease(offset: next.lowerBound, length: Int(next.count)) }
        if !queued { ahead.withLock { $0.refused(next) } }
    }

    /// One store's bytes: libfuse splices them through a pipe, which a daemon run by a user can
    /// grow to 1 MiB at most (`/proc/sys/fs/pipe-max-size`).
    static let storeSize = 512 << 10

    func release(fh: UInt64) {
        beginLetGo()
        var done: WholeFile?
        let file: OpenFile? = state.withLock { s in
            guard let f = s.openFiles.removeValue(forKey: fh) else { return nil }
            // The kernel let go of the backing file when the inode's last such file closed.
            if f.passthrough, let p = s.passthroughInodes[f.ino],
               !s.openFiles.values.contains(where: { $0.ino == f.ino && $0.passthrough }) {
                s.passthroughInodes[f.ino] = nil
                s.backing?.unregister(p.backingID)
                done = p.file
            }
            return f
        }
        file?.reader.close()
        done?.release()
        endLetGo()
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

    /// How a new handle of `ino` for `generation` opens. Under the lock (`s`; the ioctl that
    /// registers a backing file is quick and calls nothing back).
    func passthroughChoice(ino: UInt64, generation: Int64, whole: WholeFile?, _ s: inout State) -> PassthroughChoice {
        if let p = s.passthroughInodes[ino] {
            return p.file.generation == generation ? .shared(p.backingID) : .busy
        }
        // The kernel refuses passthrough while the inode has ordinary opens (its page cache is in use).
        guard let whole, let backing = s.backing, !s.openFiles.values.contains(where: { $0.ino == ino }),
              let id = backing.register(whole.fd) else { return .none }
        s.passthroughInodes[ino] = PassthroughInode(backingID: id, file: whole)
        return .registered(id)
    }
}

/// A completion that runs at most once (a read's answer races its deadline).
final class ReplyOnce<T: Sendable>: Sendable {
    private let fn: LockedValue<(@Sendable (T) -> Void)?>

    init(_ fn: @escaping @Sendable (T) -> Void) { self.fn = LockedValue(fn) }

    var hasFired: Bool { fn.withLock { $0 == nil } }

    /// Runs the completion if nobody did yet; true if this call did.
    @discardableResult
    func fire(_ value: T) -> Bool {
        guard let f = fn.withLock({ f in defer { f = nil }; return f }) else { return false }
        f(value)
        return true
    }
}
