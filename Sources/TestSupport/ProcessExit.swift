import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits for a process to end as the kernel tells it: a pidfd (pidfd_open(2)) turns readable
/// when its process exits, so a test sleeps in poll(2) until then instead of looking again and
/// again. Unlike waitpid it works for a process that is not our child (a daemon that forked
/// away from the `mount` command the test ran).
public enum ProcessExit {
    /// True once `pid` has ended (a zombie has: only its parent has not reaped it yet), false if
    /// it still runs after `timeout`, which bounds a hang and is never a measurement. A child
    /// is not reaped here: `Subprocess`-style callers reap it with waitpid afterwards.
    public static func wait(_ pid: pid_t, timeout: TimeInterval) -> Bool {
        switch descriptor(pid) {
        case .ended: return true
        case .unavailable:
            // No pidfd_open in this libc (glibc < 2.36): the one fallback that looks again.
            return eventually(timeout: timeout) { kill(pid, 0) != 0 || isZombie(pid) }
        case let .open(fd):
            defer { close(fd) }
            return FileDescriptorWait.poll(fd, events: Int16(POLLIN), timeout: timeout)
        }
    }

    public enum Descriptor {
        /// A pidfd, readable once the process ends; the caller closes it.
        case open(Int32)
        /// Gone already (and reaped).
        case ended
        /// No pidfd_open here.
        case unavailable
    }

    /// A pidfd for `pid` (pidfd_open(2)), to poll with other descriptors.
    public static func descriptor(_ pid: pid_t) -> Descriptor {
        guard let open = pidfdOpen else { return .unavailable }
        let fd = open(pid, 0)
        if fd >= 0 { return .open(fd) }
        return errno == ESRCH ? .ended : .unavailable
    }

    /// Whether `pid` has ended but is not reaped (state Z in /proc/PID/stat).
    public static func isZombie(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        return stat.contains(") Z ")
    }

    private typealias PidfdOpen = @convention(c) (pid_t, UInt32) -> Int32
    /// glibc 2.36 exports pidfd_open but Swift's Glibc module has no header for it: looked up
    /// by name, called through its C type.
    private static let pidfdOpen: PidfdOpen? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_open")
        .map { unsafeBitCast($0, to: PidfdOpen.self) }
}

/// poll(2) on one descriptor with a deadline, resumed after EINTR.
public enum FileDescriptorWait {
    /// True once `fd` reports one of `events` (or an error or hangup), false at the deadline.
    public static func poll(_ fd: Int32, events: Int16, timeout: TimeInterval) -> Bool {
        poll(fd, events: events, until: Date().addingTimeInterval(timeout))
    }

    public static func poll(_ fd: Int32, events: Int16, until deadline: Date) -> Bool {
        poll([fd], events: events, until: deadline) != nil
    }

    /// The descriptors among `fds` (negative ones are skipped) that report one of `events` (or
    /// an error or hangup), nil at the deadline.
    public static func poll(_ fds: [Int32], events: Int16, until deadline: Date) -> [Int32]? {
        var entries = fds.map { pollfd(fd: $0, events: events, revents: 0) }
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            let r = Glibc.poll(&entries, nfds_t(entries.count), Int32(min(left * 1000, Double(Int32.max)).rounded(.up)))
            if r > 0 { return entries.filter { $0.fd >= 0 && $0.revents != 0 }.map(\.fd) }
            if r < 0 && errno != EINTR { return nil }
        }
    }
}
