import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits for what another process writes to a folder as the kernel tells it: inotify(7) on the
/// folder reports each file created, written, renamed or removed in it, and the test looks again
/// only then (a daemon's log line, the runtime file a proxy writes when it is ready).
public enum FileEvents {
    /// True once `condition` holds, looking again after each change in `directory`, false if it
    /// still does not after `timeout`, which bounds a hang and is never a measurement. A folder
    /// that does not exist yet (a cache folder the daemon makes) is watched from its parent
    /// until it appears.
    /// - Parameter process: also stop waiting once it ends (a server that failed to start): the
    ///   answer is then what `condition` says.
    @discardableResult
    public static func wait(in directory: String, orExitOf process: pid_t? = nil, timeout: TimeInterval = 30,
                            until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var exit: Int32 = -1
        if let process {
            switch ProcessExit.descriptor(process) {
            case .ended: return condition()
            case let .open(fd): exit = fd
            case .unavailable: break
            }
        }
        defer { if exit >= 0 { close(exit) } }
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return eventually(timeout: timeout, condition) }
        defer { close(fd) }
        let mask = UInt32(IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB)
        let parent = (directory as NSString).deletingLastPathComponent
        var watching = inotify_add_watch(fd, directory, mask) >= 0
        if !watching && inotify_add_watch(fd, parent.isEmpty ? "/" : parent, mask) < 0 {
            return eventually(timeout: timeout, condition)  // neither folder yet: nothing to watch
        }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        // Watches first, then the look: a change in between is still reported.
        while !condition() {
            guard let ready = FileDescriptorWait.poll([fd, exit], events: Int16(POLLIN), until: deadline),
                  !ready.contains(exit) else { return condition() }
            while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
            if !watching { watching = inotify_add_watch(fd, directory, mask) >= 0 }
        }
        return true
    }
}
