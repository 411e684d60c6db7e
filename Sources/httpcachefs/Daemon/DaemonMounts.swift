import CacheCore
import Fetcher
import Foundation
import FuseMount
import Glibc
import Logging
import Proxy

/// The mountpoints one `mount` daemon serves from its one engine, cap and proxy.
///
/// The first comes from the daemon's own command line; more arrive as `mount` control requests
/// (`DaemonMountRequest`) from later `mount` commands on the same cache. Each runs its own FUSE
/// session on its own thread (`FuseFileSystem.start`), and a waiter thread per mountpoint notices
/// its session end, however it ends: `httpcachefs unmount`, `fusermount3 -u` or `umount` from
/// outside, a stop signal. When the last one goes the set closes for good (a `mount` arriving
/// after that is told the daemon is ending) and `untilEmpty` returns: the daemon ends.
///
/// The list is also written to `<cache dir>/mounts` (the pid, then one mountpoint a line), so
/// `status`, `refresh` and discovery name every mountpoint, not only the command line's.
/// Thread-safe: control requests, signal handlers and the tasks awaiting sessions call in at any time.
final class DaemonMounts: Sendable {
    struct Mount: Sendable {
        var path: String
        var fs: FuseFileSystem
        var stop: GracefulStop
        /// The URL list this mountpoint re-reads on refresh (absolute), if it has one.
        var urlList: String?
        /// The arguments of the `mount` that added it (after `mount`, paths absolute); nil for
        /// the daemon's own, which its command line holds.
        var arguments: [String]? = nil
        /// How its origins were named (with the daemon's credentials or without), for those of
        /// its re-read URL list; nil for the daemon's own, named with them.
        var credentials: CredentialScope.Grant? = nil
        /// Whom its s3:// buckets were registered for (`MountCommand.buildTree`): they and their
        /// keys leave the daemon with it (`releaseBuckets`).
        var bucketHolder: String? = nil
    }

    /// `<cache dir>/mounts`: which process serves which mountpoints, and with which arguments
    /// (`url PATH` builds a mountpoint's tree from them). Owner-only: arguments may hold secrets.
    struct RuntimeFile: Codable, Equatable {
        struct Listed: Codable, Equatable {
            var path: String
            var arguments: [String]?
        }
        var pid: Int32
        var mounts: [Listed]
    }

    private struct State {
        var mounts: [Mount] = []
        /// Set when the last mountpoint went: nothing is added any more.
        var closed = false
        /// Who awaits the last mountpoint's going (`untilEmpty`).
        var awaitingEmpty: [CheckedContinuation<Void, Never>] = []
        /// SIGTERM / SIGINT came (`stopAll`): a mountpoint added after it stops at once. The
        /// daemon's signal handlers are in place before its first mountpoint is, so a signal
        /// sent as soon as the mount shows in the mount table is never lost.
        var stopSignal: Int32?
    }

    static let runtimeFileName = "mounts"

    private let state = LockedValue(State())
    let cacheDirectory: String
    let logger: Logger

    init(cacheDirectory: String, logger: Logger) {
        self.cacheDirectory = cacheDirectory
        self.logger = logger
    }

    /// Takes a started mountpoint in. False (and nothing taken) once the daemon is ending: the
    /// caller unmounts it again.
    func add(_ mount: Mount) -> Bool {
        let (taken, stopSignal) = state.withLock { s -> (Bool, Int32?) in
            guard !s.closed else { return (false, nil) }
            s.mounts.append(mount)
            return (true, s.stopSignal)
        }
        guard taken else { return false }
        writeRuntimeFile()
        if let stopSignal { mount.stop.signal(stopSignal) }
        // No thread waits for a session: its end resumes this task (`FuseFileSystem.ended`).
        Task { [self] in
            let loopError = await mount.fs.ended()
            if let loopError { logger.error("FUSE session of \(mount.path) ended on an error: \(loopError)") }
            remove(mount.path)
        }
        return true
    }

    private func remove(_ path: String) {
        let (left, nowEmpty, awaiting, holder) = state.withLock { s -> (Int, Bool, [CheckedContinuation<Void, Never>], String?) in
            let holder = s.mounts.first { $0.path == path }?.bucketHolder
            s.mounts.removeAll { $0.path == path }
            if s.mounts.isEmpty && !s.closed {
                s.closed = true
                defer { s.awaitingEmpty = [] }
                return (0, true, s.awaitingEmpty, holder)
            }
            return (s.mounts.count, false, [], holder)
        }
        if let holder {
            let gone = Self.releaseBuckets(of: holder)
            if !gone.isEmpty { logger.info("S3: the keys of \(gone.joined(separator: ", ")) left the daemon with \(path)") }
        }
        let rest = nowEmpty ? ": it was the last mountpoint, the daemon ends" : "; \(left) mountpoint\(left == 1 ? "" : "s") still served"
        logger.info("unmounted \(path)\(rest)")
        if nowEmpty {
            try? FileManager.default.removeItem(atPath: runtimePath)
            awaiting.forEach { $0.resume() }
        } else {
            writeRuntimeFile()
        }
    }

    /// Returns once the last mountpoint is gone, holding no thread meanwhile.
    func untilEmpty() async {
        await withCheckedContinuation { continuation in
            let gone = state.withLock { s -> Bool in
                if s.closed { return true }
                s.awaitingEmpty.append(continuation)
                return false
            }
            if gone { continuation.resume() }
        }
    }

    var all: [Mount] { state.withLock { $0.mounts } }

    /// The buckets only the mount at `holder` named leave the process (`S3Buckets.release`), and
    /// their roots are listed as S3 no more: a later mount may name them with other keys.
    @discardableResult
    static func releaseBuckets(of holder: String) -> [String] {
        let gone = S3Buckets.process.release(holder: holder)
        for root in gone { S3Listing.unregister(root: root) }
        return gone
    }

    /// The mountpoint at `path` exactly.
    func mount(at path: String) -> Mount? { state.withLock { $0.mounts.first { $0.path == path } } }

    /// SIGTERM / SIGINT to the daemon: every mountpoint stops gracefully (`GracefulStop`).
    /// (Only this tells systemd the service stops: one mountpoint let go is no stop.)
    func stopAll(signal sig: Int32) {
        SystemdNotify.send("STOPPING=1")
        let mounts = state.withLock { s in
            s.stopSignal = sig
            return s.mounts
        }
        for mount in mounts { mount.stop.signal(sig) }
    }

    private var runtimePath: String { cacheDirectory + "/" + Self.runtimeFileName }

    private func writeRuntimeFile() {
        let mounts = all
        SystemdNotify.send("STATUS=mounted " + mounts.map(\.path).joined(separator: ", "))
        let file = RuntimeFile(pid: getpid(), mounts: mounts.map { RuntimeFile.Listed(path: $0.path, arguments: $0.arguments) })
        do { try Self.writeOwnerOnly(runtimePath, Array(try JSONEncoder().encode(file))) } catch {
            logger.warning("cannot write \(runtimePath) ('httpcachefs status', 'url' and 'refresh' may not see every mountpoint): \(error)")
        }
    }

    /// Written whole under a temporary name (mode 0600 from its creation), then renamed over.
    private static func writeOwnerOnly(_ path: String, _ bytes: [UInt8]) throws {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CommandFailure("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(temporary)
            throw CommandFailure("cannot write \(path): \(why)")
        }
    }

    /// The mountpoints `<cache dir>/mounts` lists for the process `pid` (none when the file is
    /// another process's, or missing).
    static func listed(cacheDirectory: String, pid: Int32, owner: uid_t = geteuid()) -> [RuntimeFile.Listed] {
        guard case let .success(bytes) = OwnedFile.read(cacheDirectory + "/" + runtimeFileName, owner: owner),
              let file = try? JSONDecoder().decode(RuntimeFile.self, from: Data(bytes)), file.pid == pid else { return [] }
        return file.mounts
    }
}
