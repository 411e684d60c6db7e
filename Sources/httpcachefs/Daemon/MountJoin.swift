import CacheCore
import Foundation
import FuseMount
import Glibc
import Proxy

/// A `mount` whose cache a running `mount` daemon of this user holds: instead of failing on the
/// cache's lock, the command hands its arguments to that daemon (`POST …/control/mount` with the
/// control key, as `refresh` and `cache rm` do; `MountHost.add` on the other side), which mounts
/// the mountpoint with its own tree and mount options on its one engine, cap and proxy.
///
/// In the background (the default) the command returns once the mountpoint is usable. With
/// `--foreground` (a systemd instance, `Type=notify`) it stays attached: ready once mounted, it
/// ends when its mountpoint goes (`httpcachefs unmount`, `fusermount3 -u`, the daemon stopping),
/// asks the daemon to unmount it on SIGTERM / SIGINT, and to refresh it on SIGHUP, so the unit
/// behaves as one that runs the daemon itself.
struct MountJoin {
    struct Running {
        var pid: pid_t
        /// Its proxy (the control endpoint); nil: it runs with --no-proxy.
        var proxy: ProxyStatus?
    }

    let daemon: Running
    let mountpoint: String
    let cacheDirectory: String

    /// The `mount` daemon of this user that holds `cacheDirectory`'s lock, if one does. Any other
    /// holder (another user's daemon, a `proxy`, a `cat`) is left to the lock's own error.
    static func runningDaemon(cacheDirectory: String) -> Running? {
        guard case let .held(by: pid) = CacheLockHolder.holder(ofCacheDirectory: cacheDirectory), pid != getpid() else { return nil }
        var st = stat()
        guard stat("/proc/\(pid)", &st) == 0, st.st_uid == geteuid(),
              let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        guard arguments.dropFirst().first == "mount" else { return nil }
        let proxy = ProxyStatus.readRuntimeFile(cacheDirectory: cacheDirectory).flatMap { $0.pid == pid ? $0 : nil }
        return Running(pid: pid, proxy: proxy)
    }

    /// The `mount` daemon holding `cacheDirectory` once it serves its first mountpoint (it lists
    /// it in its `mounts` file), for a mount that lost the race for the cache's lock to it; nil
    /// when the holder is none, or no `mount` daemon, or not serving within `timeout`.
    ///
    /// A holder not yet seen on the cache directory's own lock (it took the outer lock in the
    /// runtime directory a moment ago) is waited for up to `unknownHolderGrace`: two mounts
    /// started together race for the locks.
    static func waitUntilServing(cacheDirectory: String, timeout: TimeInterval = 120,
                                 unknownHolderGrace: TimeInterval = 10) -> Running? {
        let start = Date()
        while Date().timeIntervalSince(start) < timeout {
            guard let running = runningDaemon(cacheDirectory: cacheDirectory) else {
                guard Date().timeIntervalSince(start) < unknownHolderGrace else { return nil }
                usleep(100_000)
                continue
            }
            if !DaemonMounts.listed(cacheDirectory: cacheDirectory, pid: running.pid).isEmpty {
                // Its proxy's runtime file is written before its first mountpoint is listed.
                return runningDaemon(cacheDirectory: cacheDirectory)
            }
            usleep(100_000)
        }
        return nil
    }

    /// Asks the daemon to mount `mountpoint` with `arguments` (the command's, after `mount`);
    /// prints the daemon's notes (the mount check's warnings) on stderr. Blocking.
    func add(arguments: [String]) throws {
        guard let proxy = daemon.proxy else {
            throw CommandFailure("cache \(cacheDirectory) is in use by process \(daemon.pid), a mount daemon run with --no-proxy, which takes no more mounts: "
                + "restart it without --no-proxy to mount several directories on one cache, or give this mount its own --cache-dir")
        }
        let query = [("path", mountpoint)] + arguments.map { ("arg", $0) }
        let answer: DaemonControl.Answer
        do {
            answer = try DaemonControl.send("mount", query: query, to: proxy)
        } catch {
            if kill(daemon.pid, 0) != 0 {
                throw CommandFailure("the mount daemon pid \(daemon.pid) holding cache \(cacheDirectory) ended meanwhile: run the mount again (it then starts a daemon of its own)")
            }
            throw error
        }
        var lines = answer.lines
        let last = lines.popLast() ?? "no answer"
        for line in lines { LogSink.standardError.write(line: "httpcachefs: " + (line.hasPrefix("note: ") ? String(line.dropFirst(6)) : line)) }
        switch answer.status {
        case 200:
            LogSink.standardError.write(line: "httpcachefs: " + last)
        case 404 where last.contains("takes no mounts"):
            throw CommandFailure("cache \(cacheDirectory) is in use by pid \(daemon.pid), which takes no mounts (an older version): stop it and mount again, or give this mount its own --cache-dir")
        default:
            throw CommandFailure(last)
        }
    }

    /// `mount --foreground` on a running daemon: tells systemd it is ready, then waits until the
    /// mountpoint is gone (exit 0), or the daemon died under it (an error). Blocking.
    func stayAttached() throws {
        let (mountpoint, daemon) = (self.mountpoint, self.daemon)
        SystemdNotify.send("READY=1\nSTATUS=mounted \(mountpoint) on the mount daemon pid \(daemon.pid)")
        let signals = DaemonSignals(
            queue: "httpcachefs.mount.signals",
            stop: { _ in
                SystemdNotify.send("STOPPING=1")
                guard let proxy = daemon.proxy else { return }
                if let answer = try? DaemonControl.send("unmount", query: [("path", mountpoint)], to: proxy), answer.status != 200 {
                    LogSink.standardError.write(line: "httpcachefs: " + answer.lines.joined(separator: "; "))
                }
            },
            reload: {
                guard let proxy = daemon.proxy,
                      let answer = try? DaemonControl.send("refresh", query: [("mount", mountpoint)], to: proxy) else { return }
                for line in answer.lines { LogSink.standardError.write(line: "httpcachefs: refresh: " + line) }
            },
            ignoresSIGPIPE: true)
        defer { signals.cancel() }
        // /proc/self/mounts reports POLLPRI on every change of the mount table; the timeout only
        // bounds how late a daemon that died (leaving a dead mount behind) is noticed.
        let fd = open("/proc/self/mounts", O_RDONLY | O_CLOEXEC)
        defer { if fd >= 0 { close(fd) } }
        while true {
            guard let entry = Mountpoint.entry(at: mountpoint), entry.fsType == "fuse.httpcachefs" else { return }
            guard kill(daemon.pid, 0) == 0 else {
                throw CommandFailure("the mount daemon pid \(daemon.pid) ended while \(mountpoint) was mounted on it: 'fusermount3 -u \(mountpoint)' clears the dead mount; mount again")
            }
            if fd >= 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                while read(fd, &buffer, buffer.count) > 0 {}   // consume: the next change wakes poll again
                var p = pollfd(fd: fd, events: Int16(POLLPRI), revents: 0)
                _ = poll(&p, 1, 5000)
                _ = lseek(fd, 0, SEEK_SET)
            } else {
                sleep(2)
            }
        }
    }
}
