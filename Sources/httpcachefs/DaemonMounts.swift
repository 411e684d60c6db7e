import CacheCore
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
/// after that is told the daemon is ending) and `waitUntilEmpty` returns: the daemon ends.
///
/// The list is also written to `<cache dir>/mounts` (the pid, then one mountpoint a line), so
/// `status`, `refresh` and discovery name every mountpoint, not only the command line's.
/// Thread-safe: control requests, signal handlers and waiter threads call in at any time.
final class DaemonMounts: Sendable {
    struct Mount: Sendable {
        var path: String
        var fs: FuseFileSystem
        var stop: GracefulStop
        /// The URL list this mountpoint re-reads on refresh (absolute), if it has one.
        var urlList: String?
    }

    private struct State {
        var mounts: [Mount] = []
        /// Set when the last mountpoint went: nothing is added any more.
        var closed = false
    }

    static let runtimeFileName = "mounts"

    private let state = LockedValue(State())
    private let empty = DispatchSemaphore(value: 0)
    let cacheDirectory: String
    let logger: Logger

    init(cacheDirectory: String, logger: Logger) {
        self.cacheDirectory = cacheDirectory
        self.logger = logger
    }

    /// Takes a started mountpoint in. False (and nothing taken) once the daemon is ending: the
    /// caller unmounts it again.
    func add(_ mount: Mount) -> Bool {
        let taken = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.mounts.append(mount)
            return true
        }
        guard taken else { return false }
        writeRuntimeFile()
        let waiter = Thread { [self] in
            let loopError = mount.fs.wait()
            if let loopError { logger.error("FUSE session of \(mount.path) ended on an error: \(loopError)") }
            remove(mount.path)
        }
        waiter.name = "httpcachefs-mount-waiter"
        waiter.start()
        return true
    }

    private func remove(_ path: String) {
        let (left, nowEmpty) = state.withLock { s -> (Int, Bool) in
            s.mounts.removeAll { $0.path == path }
            if s.mounts.isEmpty && !s.closed {
                s.closed = true
                return (0, true)
            }
            return (s.mounts.count, false)
        }
        let rest = nowEmpty ? ": it was the last mountpoint, the daemon ends" : "; \(left) mountpoint\(left == 1 ? "" : "s") still served"
        logger.info("unmounted \(path)\(rest)")
        if nowEmpty {
            try? FileManager.default.removeItem(atPath: runtimePath)
            empty.signal()
        } else {
            writeRuntimeFile()
        }
    }

    /// Blocks until the last mountpoint is gone. Not on Swift's cooperative pool.
    func waitUntilEmpty() {
        empty.wait()
        empty.signal()
    }

    var all: [Mount] { state.withLock { $0.mounts } }

    /// The mountpoint at `path` exactly.
    func mount(at path: String) -> Mount? { state.withLock { $0.mounts.first { $0.path == path } } }

    /// SIGTERM / SIGINT to the daemon: every mountpoint stops gracefully (`GracefulStop`).
    /// (Only this tells systemd the service stops: one mountpoint let go is no stop.)
    func stopAll(signal sig: Int32) {
        SystemdNotify.send("STOPPING=1")
        for mount in all { mount.stop.signal(sig) }
    }

    private var runtimePath: String { cacheDirectory + "/" + Self.runtimeFileName }

    private func writeRuntimeFile() {
        let paths = all.map(\.path)
        SystemdNotify.send("STATUS=mounted " + paths.joined(separator: ", "))
        let text = ([String(getpid())] + paths).joined(separator: "\n") + "\n"
        do { try Data(text.utf8).write(to: URL(fileURLWithPath: runtimePath), options: .atomic) } catch {
            logger.warning("cannot write \(runtimePath) ('httpcachefs status' and 'refresh' may not see every mountpoint): \(error)")
        }
    }

    /// The mountpoints `<cache dir>/mounts` lists for the process `pid` (none when the file is
    /// another process's, or missing).
    static func listed(cacheDirectory: String, pid: Int32) -> [String] {
        guard let text = try? String(contentsOfFile: cacheDirectory + "/" + runtimeFileName, encoding: .utf8) else { return [] }
        let lines = text.split(separator: "\n").map(String.init)
        guard lines.first == String(pid) else { return [] }
        return Array(lines.dropFirst())
    }
}
