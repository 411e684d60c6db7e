import CacheCore
import CFuse3
import Foundation
import Glibc
import Logging

/// One libfuse low-level session: mount, request loop, replies, kernel notifications, teardown.
///
/// The loop is ours rather than `fuse_session_loop_mt`: one thread reads /dev/fuse without
/// blocking and, when it has nothing, polls it and a self-pipe, so `stop()` from any thread ends
/// it at once, with no signal tricks and no worker threads blocked in read(). Inside a burst of
/// requests it asks again for a few microseconds before it sleeps (`LoopSpin`). One thread is
/// enough because no operation blocks: every reply that waits on the network is sent later, from
/// an engine thread.
///
/// Replies pass a gate (a read-write lock): teardown closes it before the session is destroyed,
/// so a late engine completion never writes to a freed session or to a reused fd number.
///
/// Graceful stop: `detach()` lazily unmounts the mountpoint (nothing new can open there) while the
/// session keeps serving the files already open; the kernel ends the connection once the last of
/// them is closed, which ends `run()` like an external unmount. `stop()` ends it at once.
///
/// Map of this folder (`Kernel/`): libfuse and the kernel, kept thin. (`FuseMount.swift` draws
/// the module's layers.)
/// - `FuseSession.swift` (this file): the session, its loop, reply gate and notifications;
///   `FuseSession+ReaderClass.swift` who sent a request.
/// - `FuseOperations.swift`: the C op table; unpacks, calls `Core/`, replies. No decisions.
/// - `FuseFileSystem.swift`: the public face the executable starts, reloads and unmounts.
/// - `MountBackend.swift`: what the core needs from the cache; `EngineBackend` adapts CacheEngine.
/// - `MountOptions.swift`: how the mount behaves. `Mountpoint.swift`: checks and unmounting.
/// - `PageCacheFill.swift`: filling the page cache ahead of a sequential reader, pure.
/// - `DataFileReadAhead.swift`: reading the data file from the disk ahead of one, pure.
/// - `PageResidency.swift`: whether a reply's bytes are in the page cache (the loop sends
///   those itself), and which thread is the loop's.
/// - `ReaderClassTable.swift`: a process's `ReaderClass` by name (`--scanner`).
/// - `ReaderClassMemo.swift`: that class remembered per process, known again by a descriptor.
/// - `FuseRequestCounts.swift`: the requests received, by opcode.
/// - `CacheError+Errno.swift`: the one errno mapping.
/// Neighbours: calls `Core/` (`FileSystemCore`) for every operation, builds it with `Tree/`'s spec;
/// `Core/` calls back only through `KernelNotifier` and `BackingFiles`. The executable calls
/// `FuseFileSystem`; CacheCore is reached through `MountBackend`.
///
/// Passthrough: libfuse's I/O goes through our callbacks (`fuse_session_custom_io`), which do
/// what libfuse does, except that the INIT reply asks the kernel for passthrough when it offered
/// it; the file system then registers backing files (ioctls on /dev/fuse) for fully cached files.
///
/// Threads: `run()` is the FUSE loop (one thread), which sends a hit's reply itself when its
/// bytes are in memory (`PageResidency`); replies come from any thread (engine threads, the
/// FUSE disk lane of the engine's pool, which also reads data files ahead of readers); kernel
/// notifications that may wait on the kernel go out on `notifyQueue`.
// @unchecked: the C boundary. `se`, libfuse's session, is set by `mount` before the loop runs
// and freed by `teardown` on the loop thread, after the gate closed: every other thread reaches
// it only inside the gate with `open` true (replies, notifications) or under the file system's
// lock, which teardown takes to detach us first (backing files). The INIT fields are the loop
// thread's; what other threads share is in `LockedValue`s or under the gate.
final class FuseSession: KernelNotifier, BackingFiles, @unchecked Sendable {
    let core: FileSystemCore
    let options: MountOptions
    let logger: Logger
    /// Sends the replies whose bytes the kernel splices from data files (see `FuseOperations`'
    /// read): a lane of the backend's pool for blocking I/O (the engine's), four at once, so a
    /// disk or a NAS is read in parallel (eight readers without passthrough were no faster with
    /// eight threads, and the daemon ran three more: docs/threads.md); a lane of its own, so they
    /// never wait behind the engine's jobs (checks, eviction rounds) nor hold the threads those need.
    let diskReplies: BlockingIOPool
    let diskLane: BlockingIOPool.Lane
    /// Data files read ahead of sequential readers (`DataFileReadAhead`), as jobs of the same
    /// lane, queued or running: at most `readAheadJobs`, so they hold at most two of its four
    /// threads while they wait on the disk (and start none of their own); a reader asks again
    /// at its next read when there was no room.
    private let readAheadsInFlight = LockedValue(0)
    static let readAheadJobs = 2
    /// Where read-ahead sends its bytes: the kernel reads them into the data file's page cache
    /// (with its large folios, as for `cat`) and copies nothing.
    private let devNull: Int32
    /// Bytes of data files read ahead of readers.
    let readAheadBytes = LockedValue<Int64>(0)
    /// The class of each process that opens files here, looked up once per process.
    let readerClasses = ReaderClassMemo()
    /// FUSE requests received, by opcode (tests: the round trips an operation costs).
    let requests = FuseRequestCounts()
    /// Replies spliced from data files, by who sent them (tests; `PageResidency`).
    let repliesSpliced = SplicedReplies()
    /// Called once, on the loop thread, once the kernel has processed our INIT reply (the
    /// kernel applies it while we write it, so after process_buf returns the mount is usable).
    /// Set before `run()`.
    var onReady: (@Sendable () -> Void)?
    private var initialised = false    // loop thread only
    private var readyReported = false  // loop thread only
    /// The INIT request's id while it is processed, if the kernel offered passthrough; read by
    /// every reply's writev, on any thread.
    private let passthroughInit = LockedValue<UInt64>(0)
    /// The INIT reply asked for passthrough (the kernel then enables it; it may still refuse
    /// backing files, e.g. to a daemon without CAP_SYS_ADMIN). Written by the INIT reply.
    private var passthroughNegotiated = false // loop thread only
    /// The request the loop is serving was answered on the loop (`LoopSpin`). Loop thread only:
    /// the reply callbacks set it only there.
    private var repliedOnLoop = false
    /// Backing-file registration failed once: not tried again (said once in the log).
    private let backingRefused = LockedValue(false)

    private var se: OpaquePointer?     // struct fuse_session *; set in mount, freed in teardown
    private(set) var mountpoint: String?
    /// `stop()` was called: the loop ends before its next request, even in a burst that never
    /// lets it sleep in poll().
    private let stopAsked = LockedValue(false)
    /// A self-pipe: `stop()` writes a byte, poll() in `run()` wakes up.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let gate = ReadWriteLock()
    private var open = false           // guarded by gate
    /// `detach()` took the mount out of the namespace: teardown must not unmount the path again
    /// (another mount may be there by then), only close /dev/fuse.
    private let detached = LockedValue(false)
    /// Kernel notifications that can wait on the kernel: dropping an inode's pages waits on its
    /// reads in flight, and dropping a name takes its directory's lock, which a lookup in
    /// progress holds. Neither may wait on the FUSE loop (which answers those lookups) nor on
    /// the disk pool (which answers those reads), so they get a serial queue of their own, in
    /// the order they were asked; `flush()` waits for it.
    ///
    /// Stores into the page cache (`PageCacheFill`) go out here too, several at once (a disk
    /// is read in parallel); invalidations, and the open replies that must not overtake a store
    /// (`afterQueued`), are barriers: they wait for every store queued before them, and stores
    /// queued after them wait for them.
    private let notifyQueue = DispatchQueue(label: "httpcachefs.fuse.notify", attributes: .concurrent)
    /// Bytes put into the kernel's page cache ahead of readers.
    let storedBytes = LockedValue<Int64>(0)
    /// Store jobs queued or running, by inode (at most `filesFilled` inodes).
    private let storesInFlight = LockedValue<[UInt64: Int]>([:])

    init(core: FileSystemCore, options: MountOptions, logger: Logger) {
        self.core = core
        self.options = options
        self.logger = logger
        diskReplies = core.backend.blockingIO
        diskLane = diskReplies.lane("fuse-disk", threads: 4)
        devNull = Glibc.open("/dev/null", O_WRONLY | O_CLOEXEC)
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) != 0 { fatalError("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
        if devNull >= 0 { close(devNull) }
    }

    /// Creates the session and mounts it. libfuse's own messages are captured for the error.
    func mount(at path: String) throws {
        precondition(se == nil, "mounted twice")
        FuseLog.install(logger)
        var args = fuse_args(argc: 0, argv: nil, allocated: 0)
        defer { fuse_opt_free_args(&args) }
        fuse_opt_add_arg(&args, "httpcachefs")
        fuse_opt_add_arg(&args, "-o")
        fuse_opt_add_arg(&args, options.libfuseOptions.joined(separator: ","))
        if options.debug { fuse_opt_add_arg(&args, "-d") }
        var ops = FuseOperations.table()
        let me = Unmanaged.passUnretained(self).toOpaque()
        FuseLog.clear()
        guard let session = fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, me) else {
            throw FuseMountError.sessionFailed(options: options.libfuseOptions.joined(separator: ","), detail: FuseLog.lastMessages())
        }
        let (rc, fusermount) = Self.capturingFusermountOutput { fuse_session_mount(session, path) }
        if rc != 0 {
            fuse_session_destroy(session)
            let detail = [FuseLog.lastMessages(), fusermount].filter { !$0.isEmpty }.joined(separator: "; ")
            throw FuseMountError.mountFailed(path: path, detail: detail)
        }
        se = session
        mountpoint = path
        // Our own I/O callbacks: the same reads, writes and splices as libfuse's, plus the INIT
        // reply's passthrough flag, which libfuse 3.14 cannot set, and a note of whether the loop
        // answered the request it serves (`LoopSpin`).
        var io = fuse_custom_io(writev: FuseSession.writeReply, read: cfuse3_read,
                                splice_receive: nil, splice_send: FuseSession.spliceReply)
        let ioRC = fuse_session_custom_io(session, &io, fuse_session_fd(session))
        if ioRC != 0 { logger.warning("libfuse refused custom I/O (\(ioRC)): FUSE passthrough is off, and the loop sleeps between requests") }
        gate.write { open = true }
        core.attach(notifier: self)
    }

    /// libfuse's writev for every reply (the loop thread and engine threads): see `cfuse3_writev_reply`.
    private static let writeReply: @convention(c) (Int32, UnsafeMutablePointer<iovec>?, Int32, UnsafeMutableRawPointer?) -> Int = {
        fd, iov, count, userdata in
        guard let iov, let userdata else { return -1 }
        let s = Unmanaged<FuseSession>.fromOpaque(userdata).takeUnretainedValue()
        // Only the INIT reply, written on the loop thread while `passthroughInit` is set, is patched.
        let unique = s.passthroughInit.withLock { $0 }
        var patched: Int32 = 0
        let n = cfuse3_writev_reply(fd, iov, count, unique, &patched)
        if patched != 0 { s.passthroughNegotiated = true }
        if LoopThread.isCurrent { s.repliedOnLoop = true }
        return n
    }

    /// libfuse's splice into /dev/fuse (a read answered from a data file), noting as `writeReply`
    /// does whether the loop answered.
    private static let spliceReply: @convention(c) (Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32, UnsafeMutableRawPointer?) -> Int = {
        fdin, offin, fdout, offout, len, flags, userdata in
        if let userdata, LoopThread.isCurrent {
            Unmanaged<FuseSession>.fromOpaque(userdata).takeUnretainedValue().repliedOnLoop = true
        }
        return cfuse3_splice_send(fdin, offin, fdout, offout, len, flags, userdata)
    }

    /// Runs `body` with stderr going to a pipe, and returns the `fusermount3: ...` lines written
    /// meanwhile. libfuse mounts through fusermount3 for users other than root, and fusermount3
    /// says why it refused (`option allow_other only allowed if 'user_allow_other' is set...`)
    /// only on stderr, which for a daemon is its log file. Everything captured is passed on to
    /// the real stderr too. The read end never blocks: an `auto_unmount` fusermount3 stays
    /// running with the pipe as its stderr.
    static func capturingFusermountOutput<T>(_ body: () -> T) -> (T, String) {
        var fds: [Int32] = [-1, -1]
        fflush(nil)  // every stream: what stdio holds for stderr goes to the real one
        guard pipe(&fds) == 0 else { return (body(), "") }
        let saved = dup(2)
        guard saved >= 0, dup2(fds[1], 2) >= 0 else {
            [fds[0], fds[1], saved].filter { $0 >= 0 }.forEach { close($0) }
            return (body(), "")
        }
        close(fds[1])
        let result = body()
        fflush(nil)
        dup2(saved, 2)
        close(saved)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        var captured: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while captured.count < 1 << 16 {
            let n = read(fds[0], &buffer, buffer.count)
            if n <= 0 { break }
            captured += buffer[0..<n]
        }
        close(fds[0])
        _ = captured.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        let lines = String(decoding: captured, as: UTF8.self).split(whereSeparator: \.isNewline)
            .filter { $0.hasPrefix("fusermount") }.map(String.init)
        return (result, lines.joined(separator: "; "))
    }

    /// Serves requests until `stop()`, an external unmount or a dead connection; then unmounts
    /// and frees the session. Returns an error text if the loop ended on an error.
    @discardableResult
    func run() -> String? {
        guard let se else { return "not mounted" }
        let fd = fuse_session_fd(se)
        // Read first, poll only when there is nothing: a busy loop saves a poll() per request,
        // and spinning (`LoopSpin`) asks /dev/fuse again without sleeping.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var buf = fuse_buf()
        var failure: String?
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        var spin = LoopSpin(window: options.loopSpin, cpus: ProcessInfo.processInfo.activeProcessorCount)
        LoopThread.mark(true)
        defer { LoopThread.mark(false) }
        loop: while true {
            if stopAsked.withLock({ $0 }) { break }
            var res = fuse_session_receive_buf(se, &buf)
            if res == -EAGAIN, let until = spin.awakeUntil(now: Self.now()) {
                repeat { res = fuse_session_receive_buf(se, &buf) } while res == -EAGAIN && Self.now() < until
            }
            if res == -EAGAIN {
                fds[0].revents = 0
                fds[1].revents = 0
                if poll(&fds, 2, -1) < 0 && errno != EINTR {
                    failure = "poll: \(String(cString: strerror(errno)))"
                    break
                }
                if fds[1].revents != 0 { break }
                continue
            }
            switch res {
            case -EINTR: continue
            case ..<0:
                failure = "reading /dev/fuse: \(String(cString: strerror(-res)))"
                break loop
            case 0:
                break loop  // unmounted (fusermount3 -u, umount) or connection aborted
            default:
                spin.arrived(at: Self.now())
                if let header = buf.mem { requests.received(header, length: Int(res)) }
                if !initialised, options.passthrough {
                    let unique = cfuse3_init_offering_passthrough(buf.mem, Int(res))
                    passthroughInit.withLock { $0 = unique }
                }
                repliedOnLoop = false
                fuse_session_process_buf(se, &buf)
                spin.served(inline: repliedOnLoop)
                if initialised && !readyReported {
                    passthroughInit.withLock { $0 = 0 }
                    readyReported = true
                    if passthroughNegotiated {
                        core.attach(backing: self)
                        logger.debug("FUSE passthrough negotiated: fully cached files are read by the kernel directly")
                    }
                    onReady?()
                }
            }
            if fuse_session_exited(se) != 0 { break }
        }
        free(buf.mem)
        teardown()
        return failure
    }

    /// Nanoseconds on the monotonic clock (`LoopSpin`'s, `ReaderClassMemo`'s).
    static func now() -> UInt64 {
        var t = Glibc.timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) &* 1_000_000_000 &+ UInt64(t.tv_nsec)
    }

    /// Ends `run()` soon. Safe from any thread, any number of times.
    func stop() {
        stopAsked.withLock { $0 = true }
        var one: UInt8 = 1
        _ = write(wakeWrite, &one, 1)
    }

    /// Takes the mount out of the namespace (a lazy unmount: `umount2(MNT_DETACH)` as root, else
    /// `fusermount3 -u -z`): new opens by path fail, open files keep working through this session,
    /// and `run()` ends once the kernel lets go of the last of them. Safe from any thread.
    func detach() throws {
        guard let path = mountpoint else { return }
        try detached.withLock { detached in
            guard !detached else { return }
            try Mountpoint.unmount(path, lazy: true)
            detached = true
        }
    }

    private func teardown() {
        core.attach(backing: nil)
        gate.write { open = false }
        // The replies still queued on the pool see the closed gate and only release their leases.
        core.attach(notifier: nil)
        core.shutdown()
        notifyQueue.sync(flags: .barrier) {}  // let queued notifications see the closed gate
        if let se {
            // Closing /dev/fuse (in destroy) aborts the connection: reads still waiting in the
            // kernel fail with ENOTCONN rather than returning anything short.
            if !detached.withLock({ $0 }) {
                fuse_session_unmount(se)  // lazy unmount; closes /dev/fuse
            }
            fuse_session_destroy(se)
        }
        se = nil
    }

    // MARK: Replies (any thread)

    /// Runs `body` with the live session, or not at all once teardown began.
    func reply(_ body: () -> Void) {
        gate.read { if open { body() } }
    }

    // MARK: BackingFiles

    // Called under the file system's lock, which teardown takes to detach us before /dev/fuse
    // closes: the descriptor is valid for every call.
    func register(_ fd: Int32) -> Int32? {
        guard let se, !backingRefused.withLock({ $0 }) else { return nil }
        let id = cfuse3_backing_open(fuse_session_fd(se), fd)
        if id > 0 { return id }
        let first = backingRefused.withLock { refused in defer { refused = true }; return !refused }
        if first {
            let why = String(cString: strerror(-id)) + (-id == EPERM ? "; it needs CAP_SYS_ADMIN" : "")
            logger.notice("FUSE passthrough is off: the kernel refused a backing file (\(why)). Cached files are read through the daemon.")
        }
        return nil
    }

    func unregister(_ id: Int32) {
        guard let se else { return }
        let rc = cfuse3_backing_close(fuse_session_fd(se), id)
        if rc != 0 { logger.debug("backing close \(id): \(rc)") }
    }

    // MARK: KernelNotifier

    func invalidateInode(_ ino: UInt64, data: Bool) {
        notifyQueue.async(flags: .barrier) { [self] in
            gate.read {
                guard open, let se else { return }
                let rc = fuse_lowlevel_notify_inval_inode(se, ino, data ? 0 : -1, 0)
                if rc != 0 && rc != -ENOENT { logger.debug("inval_inode \(ino): \(rc)") }
            }
        }
    }

    func invalidateEntry(parent: UInt64, name: String) {
        notifyQueue.async(flags: .barrier) { [self] in
            gate.read {
                guard open, let se else { return }
                let rc = name.withCString { fuse_lowlevel_notify_inval_entry(se, parent, $0, strlen($0)) }
                if rc != 0 && rc != -ENOENT { logger.debug("inval_entry \(parent)/\(name): \(rc)") }
            }
        }
    }

    func invalidateAttributesNow(_ ino: UInt64) {
        gate.read {
            guard open, let se else { return }
            _ = fuse_lowlevel_notify_inval_inode(se, ino, -1, 0)
        }
    }

    func flush() {
        notifyQueue.sync(flags: .barrier) {}
    }

    /// At most this many files filled at once, each with as many store jobs as its reader
    /// asks for. Filling helps a reader or two; eight readers at once keep the disk pool busy
    /// with the kernel's own read-ahead, and filling theirs too was slower on two cores (0.82x
    /// of eight plain reads against 0.89x). A global cap on jobs instead cost the one reader
    /// most of its gain.
    static let filesFilled = 2

    /// On `notifyQueue`: storing waits for pages the kernel has locked for reads in flight, so
    /// it must not run where those reads are answered (the FUSE loop, the disk pool): tried on
    /// the disk pool, its threads all waited on pages whose replies were queued behind
    /// them. Ordered against invalidations and open replies (barriers), which the version
    /// check needs (`FileSystemCore.finishOpen`).
    func store(_ ino: UInt64, if current: @escaping @Sendable () -> Bool,
               pieces make: () -> [(offset: Int64, lease: ReadLease)]) -> Bool {
        guard storesInFlight.withLock({ jobs in
            guard jobs[ino] != nil || jobs.count < Self.filesFilled else { return false }
            jobs[ino, default: 0] += 1
            return true
        }) else { return false }
        let ended: @Sendable () -> Void = { [storesInFlight] in
            storesInFlight.withLock { jobs in
                let left = (jobs[ino] ?? 1) - 1
                jobs[ino] = left > 0 ? left : nil
            }
        }
        let pieces = make()
        guard !pieces.isEmpty else {
            ended()   // nothing cached there: no job
            return true
        }
        notifyQueue.async { [self] in
            defer {
                for p in pieces { p.lease.release() }
                ended()
            }
            for (offset, lease) in pieces {
                guard current(), store(ino, at: offset, lease) else { return }
            }
        }
        return true
    }

    /// One lease's file pieces into the page cache; false once the kernel refused one.
    private func store(_ ino: UInt64, at offset: Int64, _ lease: ReadLease) -> Bool {
        gate.read {
            guard open, let se else { return false }
            var at = offset
            for piece in lease.pieces {
                guard case let .file(fd, position, count) = piece else { return false }
                let rc = cfuse3_notify_store_fd(se, ino, off_t(at), fd, off_t(position), count)
                if rc != 0 {
                    if rc != -ENOENT { logger.debug("store \(count) bytes at \(at) of inode \(ino): \(rc)") }
                    return false
                }
                at += Int64(count)
                storedBytes.withLock { $0 += Int64(count) }
            }
            return true
        }
    }

    func afterQueued(_ body: @escaping @Sendable () -> Void) {
        notifyQueue.async(flags: .barrier, execute: body)
    }

    func readAhead(_ make: () -> ReadLease?) -> Bool {
        guard devNull >= 0, readAheadsInFlight.withLock({ jobs in
            guard jobs < Self.readAheadJobs else { return false }
            jobs += 1
            return true
        }) else { return false }
        guard let lease = make() else {
            readAheadsInFlight.withLock { $0 -= 1 }
            return true   // not all cached: nothing to read
        }
        diskReplies.submit(lane: diskLane) { [self] in
            defer {
                lease.release()
                readAheadsInFlight.withLock { $0 -= 1 }
            }
            // The lease keeps the descriptors open; sendfile to /dev/null reads the pages into
            // the data file's page cache and only counts them. Errors end it: the reply's
            // splice reads (and reports) what is missing.
            for piece in lease.pieces {
                guard case let .file(fd, offset, count) = piece else { continue }
                var at = off_t(offset)
                var left = count
                while left > 0 {
                    let n = sendfile(devNull, fd, &at, left)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return }
                    left -= n
                }
                readAheadBytes.withLock { $0 += Int64(count) }
            }
        }
        return true
    }

    // MARK: INIT

    func negotiate(_ conn: UnsafeMutablePointer<fuse_conn_info>) {
        initialised = true
        conn.pointee.max_read = UInt32(options.effectiveMaxRead)  // must equal the max_read mount option
        conn.pointee.want |= UInt32(FUSE_CAP_ASYNC_READ) & conn.pointee.capable
        // Cached bytes go to the kernel straight from their data files (fd-backed replies), or, for fully cached files opened with passthrough, are read by the kernel itself.
        conn.pointee.want |= UInt32(FUSE_CAP_SPLICE_WRITE) & conn.pointee.capable
        conn.pointee.want &= ~UInt32(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_MOVE)
        // Every READDIR a READDIRPLUS, with each name's attributes: `ls -l` of a folder of
        // 200,000 names reads them all with its getdents, not with a LOOKUP each. (Not "auto",
        // which stops after the first buffer unless lookups came in between: `ls` reads the
        // whole folder before its first stat.)
        conn.pointee.want |= UInt32(FUSE_CAP_READDIRPLUS) & conn.pointee.capable
        conn.pointee.want &= ~UInt32(FUSE_CAP_READDIRPLUS_AUTO)
        // Readahead of several readers and files in flight at once, all answered asynchronously.
        conn.pointee.max_background = 64
        conn.pointee.congestion_threshold = 48
        logger.debug("FUSE INIT: protocol \(conn.pointee.proto_major).\(conn.pointee.proto_minor), max_write \(conn.pointee.max_write), max_readahead \(conn.pointee.max_readahead)")
    }
}

public enum FuseMountError: Error, CustomStringConvertible {
    case sessionFailed(options: String, detail: String)
    case mountFailed(path: String, detail: String)
    case notReady(path: String)

    public var description: String {
        switch self {
        case let .sessionFailed(options, detail):
            let unknown = Self.unknownOptions(in: detail)
            if !unknown.isEmpty {
                let list = unknown.map { "'\($0)'" }.joined(separator: ", ")
                return "unknown mount option\(unknown.count == 1 ? "" : "s") \(list) (given with -o): libfuse and the "
                    + "kernel know options such as allow_other, allow_root, default_permissions, max_read=N"
            }
            return "libfuse refused the options '\(options)'" + (detail.isEmpty ? "" : ": \(detail)")
        case let .mountFailed(path, detail):
            return "cannot mount \(path)" + (detail.isEmpty ? "" : ": \(detail)")
        case let .notReady(path):
            return "the kernel never initialised the mount at \(path)"
        }
    }

    /// The options in libfuse's ``fuse: unknown option(s): `-o bogus_opt -o other'`` complaint.
    static func unknownOptions(in detail: String) -> [String] {
        guard let start = detail.range(of: "unknown option(s): `") else { return [] }
        let rest = detail[start.upperBound...]
        let words = rest[..<(rest.firstIndex(of: "'") ?? rest.endIndex)].split(separator: " ").map(String.init)
        return words.filter { $0 != "-o" }.flatMap { $0.split(separator: ",").map(String.init) }
    }
}

/// pthread read-write lock: many concurrent replies, one exclusive teardown.
// @unchecked: a lock primitive over a C `pthread_rwlock_t` (as `LockedValue` is over a mutex):
// the pointer is set once and only handed to pthread calls, which are thread-safe.
final class ReadWriteLock: @unchecked Sendable {
    private let rw: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        rw = .allocate(capacity: 1)
        pthread_rwlock_init(rw, nil)
    }

    deinit {
        pthread_rwlock_destroy(rw)
        rw.deallocate()
    }

    func read<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(rw)
        defer { pthread_rwlock_unlock(rw) }
        return try body()
    }

    func write<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(rw)
        defer { pthread_rwlock_unlock(rw) }
        return try body()
    }
}

/// Routes libfuse's log lines to our logger, keeping the last few for error messages.
///
/// libfuse builds some messages from several calls (``unknown option(s): ` `` then each option,
/// then `'` and a newline): fragments are joined until one ends a line, so a message arrives whole.
enum FuseLog {
    private struct State {
        var logger: Logger?
        var recent: [String] = []
        /// A line in the making.
        var pending = ""
    }

    /// libfuse logs from any thread, and has one log function per process.
    private static let state = LockedValue(State())

    static func install(_ logger: Logger) {
        state.withLock { $0.logger = logger }
        fuse_set_log_func { level, fmt, ap in
            guard let fmt, let ap else { return }
            var buf = [CChar](repeating: 0, count: 1024)
            _ = vsnprintf(&buf, buf.count, fmt, ap)
            FuseLog.receive(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self), error: level.rawValue <= FUSE_LOG_ERR.rawValue)
        }
    }

    /// One fragment as libfuse printed it: recorded once it completes a line.
    static func receive(_ fragment: String, error: Bool) {
        let line: String? = state.withLock { s in
            s.pending += fragment
            guard s.pending.hasSuffix("\n") else { return nil }
            defer { s.pending = "" }
            return s.pending.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let line, !line.isEmpty { record(line, error: error) }
    }

    static func record(_ line: String, error: Bool) {
        let logger: Logger? = state.withLock { s in
            s.recent.append(line)
            if s.recent.count > 8 { s.recent.removeFirst(s.recent.count - 8) }
            return s.logger
        }
        if error { logger?.error("libfuse: \(line)") } else { logger?.debug("libfuse: \(line)") }
    }

    static func clear() {
        state.withLock { s in
            s.recent = []
            s.pending = ""
        }
    }

    /// The recent lines, and a line libfuse left unfinished.
    static func lastMessages() -> String {
        state.withLock { s in
            let unfinished = s.pending.trimmingCharacters(in: .whitespacesAndNewlines)
            return (s.recent + (unfinished.isEmpty ? [] : [unfinished])).joined(separator: "; ")
        }
    }
}
