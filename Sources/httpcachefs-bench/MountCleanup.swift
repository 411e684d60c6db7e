import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a benchmark leaves mounted while it runs, unmounted if it is interrupted (SIGINT, SIGTERM,
/// SIGHUP): a `defer` does not run when a signal ends the process, and a FUSE mount whose daemon
/// is gone leaves "Transport endpoint is not connected" behind.
enum MountCleanup {
    private static let lock = NSLock()
    private static var mountpoints: [String] = []  // guarded by lock
    private static var directories: [String] = []  // guarded by lock
    private static var sources: [DispatchSourceSignal] = []  // guarded by lock

    /// Unmounts what is registered, then ends the process, on SIGINT, SIGTERM or SIGHUP. Once.
    static func installSignalHandlers() {
        lock.withLock {
            guard sources.isEmpty else { return }
            for sig in [SIGINT, SIGTERM, SIGHUP] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler {
                    FileHandle.standardError.write(Data("interrupted: unmounting\n".utf8))
                    cleanUp()
                    exit(128 + sig)
                }
                source.resume()
                sources.append(source)
            }
        }
    }

    static func register(mountpoint: String) { lock.withLock { mountpoints.append(mountpoint) } }
    static func unregister(mountpoint: String) { lock.withLock { mountpoints.removeAll { $0 == mountpoint } } }

    /// A directory removed after the unmounts when interrupted (the benchmark's temporary files).
    static func register(directory: String) { lock.withLock { directories.append(directory) } }

    /// Lazy unmounts (`fusermount3 -u -z`: a reader still in the mount does not block it), then
    /// removes the registered directories.
    static func cleanUp() {
        let (mounts, dirs) = lock.withLock { (mountpoints, directories) }
        for mountpoint in mounts.reversed() { _ = try? Spawned.run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
        usleep(500_000)  // the daemons flush and exit
        for dir in dirs { try? FileManager.default.removeItem(atPath: dir) }
    }
}
