import CacheCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a benchmark leaves mounted while it runs, unmounted if it is interrupted (SIGINT, SIGTERM,
/// SIGHUP): a `defer` does not run when a signal ends the process, and a FUSE mount whose daemon
/// is gone leaves "Transport endpoint is not connected" behind.
enum MountCleanup {
    private struct Registry {
        var mountpoints: [String] = []
        var directories: [String] = []
        var daemons: [pid_t] = []
        var sources: [DispatchSourceSignal] = []
    }
    private static let registry = LockedValue(Registry())

    /// Unmounts what is registered, then ends the process, on SIGINT, SIGTERM or SIGHUP. Once.
    static func installSignalHandlers() {
        registry.withLock { r in
            guard r.sources.isEmpty else { return }
            for sig in [SIGINT, SIGTERM, SIGHUP] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler {
                    FileHandle.standardError.write(Data("interrupted: unmounting\n".utf8))
                    cleanUp()
                    exit(128 + sig)
                }
                source.resume()
                r.sources.append(source)
            }
        }
    }

    static func register(mountpoint: String) { registry.withLock { $0.mountpoints.append(mountpoint) } }
    static func unregister(mountpoint: String) { registry.withLock { $0.mountpoints.removeAll { $0 == mountpoint } } }

    /// A mount's daemon (not a child of this process), ended if it outlives its lazy unmount.
    static func register(daemon: pid_t) { registry.withLock { $0.daemons.append(daemon) } }
    static func unregister(daemon: pid_t) { registry.withLock { $0.daemons.removeAll { $0 == daemon } } }

    /// A directory removed after the unmounts when interrupted (the benchmark's temporary files).
    static func register(directory: String) { registry.withLock { $0.directories.append(directory) } }

    /// Ends this process's children (players, rclone: a player would keep a lazily unmounted
    /// mount alive), unmounts lazily (`fusermount3 -u -z`), ends registered daemons still there
    /// after a second, then removes the registered directories.
    static func cleanUp() {
        let (mounts, dirs, pids) = registry.withLock { ($0.mountpoints, $0.directories, $0.daemons) }
        for child in children() { kill(child, SIGTERM) }
        for mountpoint in mounts.reversed() { _ = try? Spawned.run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
        for _ in 0..<20 where pids.contains(where: { kill($0, 0) == 0 }) { usleep(50_000) }  // the daemons flush and exit
        for pid in pids where kill(pid, 0) == 0 { kill(pid, SIGTERM) }
        usleep(200_000)
        for dir in dirs { try? FileManager.default.removeItem(atPath: dir) }
    }

    /// Processes whose parent is this one (from /proc/PID/stat: the field after the command).
    private static func children() -> [pid_t] {
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { name -> pid_t? in
            guard let pid = pid_t(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == me ? pid : nil
        }
    }
}
