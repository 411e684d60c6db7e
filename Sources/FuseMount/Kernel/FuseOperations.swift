import CacheCore
import CFuse3
import Foundation
import Glibc

/// The libfuse low-level op table: non-capturing C functions that unpack arguments, call
/// FileSystemCore and send its answer. No decisions are made here: errno values come from the
/// core (and from CacheError+Errno through it); write-type operations all answer EROFS.
///
/// Kept in a library file on purpose: closures in main.swift would be main-actor isolated and
/// trap when libfuse calls them from its own thread.
/// A request handed to another thread: libfuse's replies may be sent from any thread, once.
// @unchecked: the C boundary. A `fuse_req_t` is libfuse's, valid until its one reply, which
// libfuse lets any thread send (its replies lock what they share); the reply goes through
// `FuseSession.reply`, whose gate keeps it from a session already torn down.
struct SendableRequest: @unchecked Sendable {
    let req: fuse_req_t
    init(_ req: fuse_req_t) { self.req = req }
}

enum FuseOperations {
    /// Sends a read's bytes from where they are: data files go to the kernel as fd-backed
    /// buffers, bytes that arrived from the network as the pooled chunks they landed in (their
    /// addresses: one `writev` when that is all, else beside the files in one `fuse_bufvec`; a
    /// read that partly waited has both). No copy passes through Swift; the lease keeps the
    /// chunks alive until the reply is written.
    static func reply(_ req: fuse_req_t, with lease: ReadLease) {
        if lease.pieces.count == 1 {
            switch lease.pieces[0] {
            case let .chunk(c):
                _ = fuse_reply_buf(req, c.bytes.baseAddress?.assumingMemoryBound(to: CChar.self), c.count)
                return
            case let .memory(bytes):
                bytes.withUnsafeBytes { _ = fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
                return
            case .file:
                break
            }
        }
        if !lease.readsFromDisk {
            // Memory only (a read that waited, answered from several chunks): one `writev`.
            // Through `fuse_reply_data` libfuse would stage memory buffers in a pipe to splice.
            var memories: [[UInt8]] = []
            var chunks: [UnsafeRawPointer?] = []
            for piece in lease.pieces {
                switch piece {
                case let .chunk(c): chunks.append(c.bytes.baseAddress)
                case let .memory(bytes): memories.append(bytes); chunks.append(nil)
                case .file: break
                }
            }
            withAddresses(of: memories[...]) { addresses in
                var next = addresses.makeIterator()
                var iov = zip(lease.pieces, chunks).map { piece, address in
                    iovec(iov_base: UnsafeMutableRawPointer(mutating: address ?? next.next()!), iov_len: piece.count)
                }
                _ = fuse_reply_iov(req, &iov, Int32(iov.count))
            }
            return
        }
        var fds: [Int32] = [], offsets: [off_t] = [], sizes: [Int] = []
        var memories: [[UInt8]] = []
        var chunks: [UnsafeRawPointer?] = []
        fds.reserveCapacity(lease.pieces.count)
        for piece in lease.pieces {
            switch piece {
            case let .file(fd, offset, _):
                fds.append(fd)
                offsets.append(off_t(offset))
            case let .chunk(c):
                fds.append(-2)
                offsets.append(off_t(chunks.count))   // which of `chunks`
                chunks.append(c.bytes.baseAddress)
            case let .memory(bytes):
                fds.append(-1)
                offsets.append(off_t(memories.count))   // which of `memories`
                memories.append(bytes)
            }
            sizes.append(piece.count)
        }
        withAddresses(of: memories[...]) { addresses in
            let mems = fds.indices.map { i -> UnsafeRawPointer? in
                switch fds[i] {
                case -1: addresses[Int(offsets[i])]
                case -2: chunks[Int(offsets[i])]
                default: nil
                }
            }
            let kinds = fds.map { max($0, -1) }   // the shim: a negative descriptor is memory
            _ = cfuse3_reply_pieces(req, kinds, offsets, mems, sizes, fds.count)
        }
    }

    /// Calls `body` with the base address of each buffer, all valid for the call.
    private static func withAddresses(of buffers: ArraySlice<[UInt8]>, _ addresses: [UnsafeRawPointer?] = [],
                                      _ body: ([UnsafeRawPointer?]) -> Void) {
        guard let first = buffers.first else { return body(addresses) }
        first.withUnsafeBytes { withAddresses(of: buffers.dropFirst(), addresses + [$0.baseAddress], body) }
    }

    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in
            guard let userdata, let conn else { return }
            let s = Unmanaged<FuseSession>.fromOpaque(userdata).takeUnretainedValue()
            s.negotiate(conn)
        }
        ops.lookup = { req, parent, name in
            guard let req, let name else { return }
            let s = FuseOperations.session(req)
            let request = SendableRequest(req)  // answered later, on another thread
            s.core.lookup(parent: parent, name: String(cString: name)) { result in
                let req = request.req
                s.reply {
                    switch result {
                    case let .success(attr):
                        var e = fuse_entry_param()
                        e.ino = attr.ino
                        e.generation = 0
                        e.attr = FuseOperations.stat(attr, s.options)
                        e.attr_timeout = attr.ttl
                        e.entry_timeout = attr.ttl
                        fuse_reply_entry(req, &e)
                    case let .failure(e): fuse_reply_err(req, e.code)
                    }
                }
            }
        }
        ops.forget = { req, ino, n in
            guard let req else { return }
            FuseOperations.session(req).core.forget(ino, count: n)
            fuse_reply_none(req)
        }
        ops.forget_multi = { req, count, forgets in
            guard let req else { return }
            let s = FuseOperations.session(req)
            if let forgets {
                for i in 0..<count { s.core.forget(forgets[i].ino, count: forgets[i].nlookup) }
            }
            fuse_reply_none(req)
        }
        ops.getattr = { req, ino, _ in
            guard let req else { return }
            let s = FuseOperations.session(req)
            let request = SendableRequest(req)  // answered later, on another thread
            s.core.getattr(ino) { result in
                let req = request.req
                s.reply {
                    switch result {
                    case let .success(attr):
                        var st = FuseOperations.stat(attr, s.options)
                        fuse_reply_attr(req, &st, attr.ttl)
                    case let .failure(e): fuse_reply_err(req, e.code)
                    }
                }
            }
        }
        ops.open = { req, ino, fi in
            guard let req, let fi else { return }
            let s = FuseOperations.session(req)
            let request = SendableRequest(req)  // answered later, on another thread
            let readerClass = s.readerClass(of: req)
            s.logger.trace("FUSE open", metadata: ["ino": "\(ino)", "class": "\(readerClass)"])
            s.core.open(ino, flags: fi.pointee.flags, readerClass: readerClass) { result in
                let req = request.req
                s.reply {
                    switch result {
                    case let .success(open):
                        let rc: Int32
                        if let id = open.backingID {
                            rc = cfuse3_reply_open_passthrough(req, open.fh, id)
                        } else {
                            var out = fuse_file_info()  // libfuse's fi lives on its stack: reply with a copy
                            out.fh = open.fh
                            out.keep_cache = open.keepCache ? 1 : 0
                            out.direct_io = open.directIO ? 1 : 0
                            out.noflush = 1   // read-only: a close has nothing to flush (no FLUSH round trip)
                            rc = fuse_reply_open(req, &out)
                        }
                        if rc == -ENOENT {
                            s.core.release(fh: open.fh)  // the opener was interrupted meanwhile
                        }
                    case let .failure(e): fuse_reply_err(req, e.code)
                    }
                }
            }
        }
        ops.read = { req, _, size, off, fi in
            guard let req, let fi else { return }
            let s = FuseOperations.session(req)
            let request = SendableRequest(req)  // answered later, on another thread
            let fh = fi.pointee.fh  // libfuse's fi lives on its stack: not for the completion
            // What the kernel asks, its read-ahead included (`--log-level trace`): how a reader
            // class's reads really arrive.
            s.logger.trace("FUSE read", metadata: ["fh": "\(fh)", "offset": "\(off)", "size": "\(size)"])
            s.core.read(fh: fh, offset: Int64(off), size: size) { result, filesOpen in
                let req = request.req
                switch result {
                case let .success(lease) where lease.readsFromDisk && SpliceSender.choose(
                    onLoop: LoopThread.isCurrent, filesOpen: filesOpen,
                    inMemory: { PageResidency.inMemory(lease.pieces) }, onPool: { BlockingIOPool.onAPoolThread }) == .inPlace:
                    // Sent right here, with no hand-off and no thread of the lane: on the loop,
                    // a hit whose bytes are all in the page cache (the splice copies from
                    // memory) while few files are open; on a thread of the pool for blocking
                    // I/O, a read that waited and was answered by a job.
                    s.reply { FuseOperations.reply(req, with: lease) }
                    lease.release()
                    s.repliesSpliced.sentInPlace.wrappingIncrement(ordering: .relaxed)
                case let .success(lease) where lease.readsFromDisk:
                    s.repliesSpliced.sentByLane.wrappingIncrement(ordering: .relaxed)
                    // The kernel splices these bytes from the data file while the reply is
                    // written, which can wait on the disk: never on the loop thread, and
                    // several at once, so a slow disk is read in parallel, one reader's too.
                    // (Keeping one reader's replies in order, one at a time, spared the
                    // kernel's read-ahead a rescan per splice but made eight warm readers 5%
                    // slower: not done.)
                    s.diskReplies.submit(lane: s.diskLane) {
                        s.reply { FuseOperations.reply(request.req, with: lease) }
                        lease.release()
                    }
                case let .success(lease):
                    s.reply { FuseOperations.reply(req, with: lease) }
                    lease.release()
                case let .failure(e):
                    s.reply { _ = fuse_reply_err(req, e.code) }
                }
            }
        }
        ops.release = { req, _, fi in
            guard let req else { return }
            let s = FuseOperations.session(req)
            if let fi { s.core.release(fh: fi.pointee.fh) }
            s.reply { fuse_reply_err(req, 0) }
        }
        // No `flush`: nothing is ever written here, so a close has nothing to flush. The open
        // replies say so (`noflush`: the kernel sends no FLUSH for them), and a FLUSH that comes
        // anyway is answered ENOSYS by libfuse, after which the kernel sends none at all. A FLUSH
        // is a round trip the closing process waits for: a third of a small file's requests.
        ops.fsync = { req, _, _, _ in
            guard let req else { return }
            FuseOperations.session(req).reply { fuse_reply_err(req, 0) }
        }
        ops.opendir = { req, ino, _ in
            guard let req else { return }
            let s = FuseOperations.session(req)
            let request = SendableRequest(req)  // answered later, on another thread
            s.core.opendir(ino) { result in
                let req = request.req
                s.reply {
                    switch result {
                    case let .success(fh):
                        var out = fuse_file_info()
                        out.fh = fh
                        // The kernel keeps the entries it read (and READDIRPLUS's attributes
                        // with them) until a refresh changes this directory.
                        out.cache_readdir = 1
                        out.keep_cache = s.core.keepsDirectoryCache(fh: fh) ? 1 : 0
                        if fuse_reply_open(req, &out) == -ENOENT { s.core.releasedir(fh: fh) }
                    case let .failure(e): fuse_reply_err(req, e.code)
                    }
                }
            }
        }
        ops.readdir = { req, _, size, off, fi in
            guard let req, let fi else { return }
            let s = FuseOperations.session(req)
            let buf = UnsafeMutablePointer<CChar>.allocate(capacity: max(size, 1))
            defer { buf.deallocate() }
            var used = 0
            let known = s.core.readdir(fh: fi.pointee.fh, offset: Int(off)) { i, entry in
                var st = Glibc.stat()
                st.st_ino = ino_t(entry.ino)
                st.st_mode = entry.isDirectory ? S_IFDIR : S_IFREG
                let need = entry.name.withCString { fuse_add_direntry(req, buf + used, size - used, $0, &st, off_t(i + 1)) }
                if need > size - used { return false }
                used += need
                return true
            }
            guard known else { return s.reply { fuse_reply_err(req, EBADF) } }
            s.reply { fuse_reply_buf(req, buf, used) }
        }
        ops.readdirplus = { req, _, size, off, fi in
            guard let req, let fi else { return }
            let s = FuseOperations.session(req)
            let buf = UnsafeMutablePointer<CChar>.allocate(capacity: max(size, 1))
            defer { buf.deallocate() }
            var used = 0
            let known = s.core.readdirplus(fh: fi.pointee.fh, offset: Int(off)) { index, entry, attr in
                var e = fuse_entry_param()
                if let attr {
                    e.ino = attr.ino
                    e.attr = FuseOperations.stat(attr, s.options)
                    e.attr_timeout = attr.ttl
                    e.entry_timeout = attr.ttl
                } else {
                    // ino 0: a name without attributes, which the kernel looks up if it needs them.
                    e.attr.st_ino = ino_t(entry.ino)
                    e.attr.st_mode = entry.isDirectory ? S_IFDIR : S_IFREG
                }
                let need = entry.name.withCString { fuse_add_direntry_plus(req, buf + used, size - used, $0, &e, off_t(index + 1)) }
                if need > size - used { return false }
                used += need
                return true
            }
            guard known else { return s.reply { fuse_reply_err(req, EBADF) } }
            s.reply { fuse_reply_buf(req, buf, used) }
        }
        ops.releasedir = { req, _, fi in
            guard let req else { return }
            let s = FuseOperations.session(req)
            if let fi { s.core.releasedir(fh: fi.pointee.fh) }
            s.reply { fuse_reply_err(req, 0) }
        }
        ops.fsyncdir = { req, _, _, _ in
            guard let req else { return }
            FuseOperations.session(req).reply { fuse_reply_err(req, 0) }
        }
        ops.statfs = { req, _ in
            guard let req else { return }
            let s = FuseOperations.session(req)
            let stats = s.core.statfs()
            var st = statvfs()
            st.f_bsize = UInt(stats.blockSize)
            st.f_frsize = UInt(stats.blockSize)
            st.f_blocks = fsblkcnt_t(stats.blocks)
            st.f_bfree = fsblkcnt_t(stats.freeBlocks)
            st.f_bavail = fsblkcnt_t(stats.freeBlocks)
            st.f_files = fsfilcnt_t(stats.files)
            st.f_ffree = 0
            st.f_namemax = UInt(PathName.maxComponentBytes)
            s.reply { fuse_reply_statfs(req, &st) }
        }
        ops.readlink = { req, _ in
            guard let req else { return }
            FuseOperations.session(req).reply { fuse_reply_err(req, EINVAL) }  // there are no symlinks
        }
        // Everything that would change the tree or a file: read-only file system.
        ops.setattr = { req, _, _, _, _ in FuseOperations.refuse(req) }
        ops.mknod = { req, _, _, _, _ in FuseOperations.refuse(req) }
        ops.mkdir = { req, _, _, _ in FuseOperations.refuse(req) }
        ops.unlink = { req, _, _ in FuseOperations.refuse(req) }
        ops.rmdir = { req, _, _ in FuseOperations.refuse(req) }
        ops.symlink = { req, _, _, _ in FuseOperations.refuse(req) }
        ops.rename = { req, _, _, _, _, _ in FuseOperations.refuse(req) }
        ops.link = { req, _, _, _ in FuseOperations.refuse(req) }
        ops.write = { req, _, _, _, _, _ in FuseOperations.refuse(req) }
        ops.create = { req, _, _, _, _ in FuseOperations.refuse(req) }
        ops.getxattr = { req, ino, name, size in
            guard let req, let name else { return }
            let s = FuseOperations.session(req)
            let result = s.core.getxattr(ino, name: String(cString: name))
            FuseOperations.replyXattr(req, s, result, size: size)
        }
        ops.listxattr = { req, ino, size in
            guard let req else { return }
            let s = FuseOperations.session(req)
            FuseOperations.replyXattr(req, s, s.core.listxattr(ino), size: size)
        }
        ops.setxattr = { req, ino, name, value, size, _ in
            guard let req, let name else { return }
            let s = FuseOperations.session(req)
            let bytes = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
            let request = SendableRequest(req)  // answered later, on another thread
            s.core.setxattr(ino, name: String(cString: name), value: bytes, caller: FuseOperations.callerUID(req)) { result in
                s.reply { _ = fuse_reply_err(request.req, result.failureCode) }
            }
        }
        ops.removexattr = { req, ino, name in
            guard let req, let name else { return }
            let s = FuseOperations.session(req)
            let request = SendableRequest(req)  // answered later, on another thread
            s.core.removexattr(ino, name: String(cString: name), caller: FuseOperations.callerUID(req)) { result in
                s.reply { _ = fuse_reply_err(request.req, result.failureCode) }
            }
        }
        ops.fallocate = { req, _, _, _, _, _ in FuseOperations.refuse(req) }
        ops.copy_file_range = { req, _, _, _, _, _, _, _, _ in FuseOperations.refuse(req) }
        return ops
    }

    /// An attribute's value, or its length when the caller asked for it (size 0), or ERANGE.
    static func replyXattr(_ req: fuse_req_t, _ s: FuseSession, _ result: Result<[UInt8], FSErrno>, size: Int) {
        switch result {
        case let .failure(e): s.reply { fuse_reply_err(req, e.code) }
        case let .success(value):
            switch CacheAttributes.reply(value, size: size) {
            case let .size(n): s.reply { fuse_reply_xattr(req, n) }
            case let .error(code): s.reply { fuse_reply_err(req, code) }
            case let .bytes(b): s.reply { b.withUnsafeBytes { _ = fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) } }
            }
        }
    }

    /// The requesting process's uid as the mount's user namespace sees it; nil when libfuse has
    /// no context (never for a request from the kernel), which decides as no one's.
    static func callerUID(_ req: fuse_req_t) -> uid_t? {
        fuse_req_ctx(req).map { $0.pointee.uid }
    }

    static func session(_ req: fuse_req_t) -> FuseSession {
        Unmanaged<FuseSession>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
    }

    static func refuse(_ req: fuse_req_t?) {
        guard let req else { return }
        FuseOperations.session(req).reply { fuse_reply_err(req, EROFS) }
    }

    /// Files 0444, directories 0555 (less the umask), owned by the mounting user (or the
    /// configured owner).
    static func stat(_ attr: Attr, _ options: MountOptions) -> Glibc.stat {
        var st = Glibc.stat()
        st.st_ino = ino_t(attr.ino)
        st.st_mode = attr.isDirectory ? (S_IFDIR | options.directoryMode) : (S_IFREG | options.fileMode)
        st.st_nlink = attr.isDirectory ? 2 : 1
        st.st_uid = options.uid
        st.st_gid = options.gid
        // The core only hands out sizes within FileLength.limit; clamped anyway, because this
        // arithmetic trapping would take the whole mount down.
        let size = min(max(attr.size, 0), FileLength.limit)
        st.st_size = Int(size)
        st.st_blocks = Int((size + 511) / 512)
        st.st_blksize = preferredIOSize(size)
        st.st_mtim = timespec(attr.mtime)
        st.st_atim = st.st_mtim
        st.st_ctim = st.st_mtim
        return st
    }

    /// The whole file, rounded up to a power of two, between a page and 1 MiB. A large preferred
    /// I/O size makes cp, cat and players read a film in big chunks; for a small file it only
    /// makes them allocate (and map, and unmap) a buffer of 1 MiB at each open, which was a
    /// tenth of what `cat` of a folder of posters cost (issue 51).
    static func preferredIOSize(_ size: Int64) -> Int {
        let page = 4096, most = 1 << 20
        guard size > Int64(page) else { return page }
        guard size < Int64(most) else { return most }
        return 1 << (Int64.bitWidth - (size - 1).leadingZeroBitCount)
    }

    /// A date as a timespec; dates beyond what time_t holds (a hostile Last-Modified or listing
    /// date) become the epoch rather than a trap.
    static func timespec(_ date: Date) -> Glibc.timespec {
        let t = date.timeIntervalSince1970
        guard t.isFinite, abs(t) < 1e15 else { return Glibc.timespec() }
        let seconds = t.rounded(.down)
        return Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int((t - seconds) * 1e9))
    }
}
