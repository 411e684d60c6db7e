import ArgumentParser
import Foundation
import FuseMount
import Glibc

/// `httpcachefs unmount MOUNTPOINT`: `fusermount3 -u` (umount as root) for a httpcachefs mount,
/// lazily when files are open there, saying so. The daemon's session of that mountpoint then ends
/// by itself: at once, or, after a lazy unmount, once the last open file is closed (see
/// `GracefulStop`); the daemon ends with its last mountpoint (`DaemonMounts`).
struct UnmountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount a httpcachefs mount (lazily if files are open there, and says so).",
        discussion: """
            A busy mount (files open, or a shell inside it) is detached instead: it disappears \
            from MOUNTPOINT at once, files already open keep reading until they are closed, and \
            the daemon exits then. A daemon serving several mountpoints of one cache keeps \
            running until its last one is unmounted.
            """
    )

    @Argument(help: ArgumentHelp("Where the mount is.", valueName: "mountpoint"))
    var mountpoint: String

    func run() async throws {
        try await runReportingErrors {
            let path = Mountpoint.absolute(mountpoint)
            guard let entry = Mountpoint.entry(at: path) else {
                var st = stat()
                guard stat(path, &st) == 0 else { throw CommandFailure("\(path) does not exist") }
                throw CommandFailure("\(path) is not mounted")
            }
            guard entry.fsType == "fuse.httpcachefs" else {
                throw CommandFailure("\(path) is not a httpcachefs mount: \(entry.source) (\(entry.fsType)) is mounted there; unmount it with umount")
            }
            // Another user's mount: FUSE keeps its files from everyone else (EACCES), and
            // fusermount3 finds no entry of this user's for it; say whose it is, not why
            // fusermount3 failed.
            let notOurs = "\(path) is another user's mount: only its owner or root can unmount it"
            var st = stat()
            if geteuid() != 0, stat(path, &st) != 0, errno == EACCES { throw CommandFailure(notOurs) }
            do {
                try await onBlockingPool { try Mountpoint.unmount(path, lazy: false) }
            } catch MountpointError.unmountFailed(_, let why) where geteuid() != 0 && why.contains("not found in /etc/mtab") {
                throw CommandFailure(notOurs)
            } catch MountpointError.unmountFailed(_, let why) where why.localizedCaseInsensitiveContains("busy") {
                try await onBlockingPool { try Mountpoint.unmount(path, lazy: true) }
                ErrorReporting.printWarning("\(path) is busy (files are open there): detached it lazily; it is gone from \(path) now, "
                    + "open files keep reading until they are closed, then its daemon lets it go (and ends, if it was its last mountpoint)")
            }
        }
    }
}
