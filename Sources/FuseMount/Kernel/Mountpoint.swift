import Foundation
import Glibc

/// Mountpoint checks before mounting, and unmounting, with messages that say what to do.
public enum Mountpoint {
    public struct Entry: Equatable, Sendable {
        /// `major:minor`, as in /sys/class/bdi.
        public var device: String
        public var path: String
        public var fsType: String
        public var source: String
    }

    /// Current mounts, from /proc/self/mountinfo.
    public static func mounts() -> [Entry] {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { parseMountinfoLine(String($0)) }
    }

    /// `36 35 0:52 / /mnt/x rw,nosuid - fuse.httpcachefs httpcachefs rw,...`
    static func parseMountinfoLine(_ line: String) -> Entry? {
        let f = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard f.count >= 10, let dash = f.firstIndex(of: "-"), dash + 2 < f.count else { return nil }
        return Entry(device: f[2], path: unescape(f[4]), fsType: f[dash + 1], source: unescape(f[dash + 2]))
    }

    /// mountinfo writes space, tab, newline and backslash as `\ooo`.
    static func unescape(_ s: String) -> String {
        guard s.contains("\\") else { return s }
        var out = [UInt8]()
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == 92, i + 3 < b.count, let v = UInt8(String(decoding: b[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                out.append(v)
                i += 4
            } else {
                out.append(b[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The mount at exactly `path` (the last one, if stacked), or nil.
    public static func entry(at path: String) -> Entry? {
        let p = absolute(path)
        return mounts().last { $0.path == p }
    }

    public static func isMounted(_ path: String) -> Bool { entry(at: path) != nil }

    static func deviceNumber(of path: String) -> String? { entry(at: path)?.device }

    /// Absolute and normalised, without touching the file system (a stale mountpoint cannot
    /// be resolved with realpath).
    public static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var parts: [Substring] = []
        for c in full.split(separator: "/") {
            if c == "." { continue }
            if c == ".." { _ = parts.popLast(); continue }
            parts.append(c)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// A mountpoint ready to take a mount.
    public struct Prepared: Equatable, Sendable {
        public var path: String
        /// Set when the remains of a crashed daemon had to be unmounted first (tell the user).
        public var cleanedStaleMount: String?
    }

    /// Checks that `path` can take a new mount, cleaning up the remains of a crashed daemon
    /// ("Transport endpoint is not connected"). Returns the absolute path.
    public static func prepare(_ path: String) throws -> Prepared {
        let p = absolute(path)
        var note: String?
        guard access("/dev/fuse", F_OK) == 0 else { throw MountpointError.noFuseDevice }
        var device = Glibc.stat()
        if access("/dev/fuse", R_OK | W_OK) != 0, stat("/dev/fuse", &device) == 0 {
            throw MountpointError.fuseDeviceDenied(mode: device.st_mode & 0o777)
        }
        var st = Glibc.stat()
        // stat() may be answered from the kernel's attribute cache even when the daemon is
        // gone; statvfs() always asks the daemon, so it tells a dead FUSE mount from a live one.
        var sfs = statvfs()
        let deadFuse = (entry(at: p)?.fsType.hasPrefix("fuse") ?? false) && statvfs(p, &sfs) != 0
            && (errno == ENOTCONN || errno == ECONNABORTED)
        if deadFuse || stat(p, &st) != 0 {
            let err = deadFuse ? ENOTCONN : errno
            guard err == ENOTCONN || err == ECONNABORTED else {
                if err == ENOENT { throw MountpointError.missing(p) }
                throw MountpointError.unusable(p, String(cString: strerror(err)))
            }
            try unmount(p, lazy: true)
            note = "\(p) held a stale mount of a daemon that is gone (\(String(cString: strerror(err)))); unmounted it"
            guard stat(p, &st) == 0 else {
                throw MountpointError.staleNotCleaned(p, String(cString: strerror(errno)))
            }
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw MountpointError.notADirectory(p) }
        if let existing = entry(at: p) {
            throw MountpointError.busy(p, fsType: existing.fsType, source: existing.source)
        }
        return Prepared(path: p, cleanedStaleMount: note)
    }

    /// Unmounts `path`: umount2 as root, else fusermount3 (setuid). Lazy detaches at once even
    /// while files are open, which is what a dead daemon's mount needs.
    public static func unmount(_ path: String, lazy: Bool) throws {
        if geteuid() == 0 {
            if umount2(path, lazy ? Int32(MNT_DETACH) : 0) == 0 { return }
            let err = errno
            if err == EINVAL && !isMounted(path) { return }  // not mounted (any more)
            throw MountpointError.unmountFailed(path, String(cString: strerror(err)))
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/fusermount3")
        if !FileManager.default.isExecutableFile(atPath: "/bin/fusermount3") {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/fusermount3")
        }
        p.arguments = lazy ? ["-u", "-z", path] : ["-u", path]
        let errPipe = Pipe()
        p.standardError = errPipe
        do { try p.run() } catch {
            throw MountpointError.unmountFailed(path, "cannot run fusermount3: \(error)")
        }
        p.waitUntilExit()
        if p.terminationStatus != 0 {
            let msg = String(decoding: errPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw MountpointError.unmountFailed(path, msg.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}

public enum MountpointError: Error, Equatable, CustomStringConvertible {
    case noFuseDevice
    /// /dev/fuse is there but this user may not open it (a container's 0600 node).
    case fuseDeviceDenied(mode: mode_t)
    case missing(String)
    case notADirectory(String)
    case unusable(String, String)
    case busy(String, fsType: String, source: String)
    case staleNotCleaned(String, String)
    case unmountFailed(String, String)

    public var description: String {
        switch self {
        case .noFuseDevice:
            return "no /dev/fuse: load the fuse module (modprobe fuse), or give the container the device (--device /dev/fuse --cap-add SYS_ADMIN)"
        case let .fuseDeviceDenied(mode):
            return "/dev/fuse (mode 0\(String(mode, radix: 8))) cannot be opened by this user: as root, chmod 0666 /dev/fuse (Debian's mode; udev's 50-udev-default.rules sets it), or in a container pass the device with --device /dev/fuse"
        case let .missing(p): return "mountpoint \(p) does not exist (mkdir -p \(p))"
        case let .notADirectory(p): return "mountpoint \(p) is not a directory"
        case let .unusable(p, why): return "mountpoint \(p) is unusable: \(why)"
        case let .busy(p, fsType, source):
            let unmount = fsType.contains("httpcachefs") || source.contains("httpcachefs") ? "httpcachefs unmount \(p)" : "fusermount3 -u \(p)"
            return "mountpoint \(p) is busy: \(source) (\(fsType)) is already mounted there; unmount it first (\(unmount))"
        case let .staleNotCleaned(p, why):
            return "mountpoint \(p) holds a stale mount that could not be cleaned (\(why)); try: fusermount3 -u -z \(p)"
        case let .unmountFailed(p, why): return "cannot unmount \(p): \(why)"
        }
    }
}
