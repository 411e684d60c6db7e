import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits for the mount table to change as the kernel tells it: poll(2) on /proc/self/mountinfo
/// reports POLLPRI each time a mount is added or removed in this namespace (proc(5)). A test
/// waiting for a mount to appear or go sleeps until then, and looks again only after a change.
public enum MountTableEvents {
    /// True once `condition` (a look at the mount table) holds, false if it still does not after
    /// `timeout`, which bounds a hang and is never a measurement.
    public static func wait(timeout: TimeInterval = 30, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        // Opened before the first look: a change between the look and the poll is still reported.
        let fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return eventually(timeout: timeout, condition) }
        defer { close(fd) }
        while !condition() {
            guard FileDescriptorWait.poll(fd, events: Int16(POLLPRI), until: deadline) else { return condition() }
        }
        return true
    }
}
