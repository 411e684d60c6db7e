import Foundation
import Glibc
import TestSupport
import XCTest

/// Issue 46, item 6, with a daemon of a normal user: its owner pins and unpins its own mount's
/// files with `setfattr` (before: Permission denied, files 0444 and no CAP_DAC_OVERRIDE).
extension UnprivilegedUserTests {
    /// `setfattr -n user.httpcachefs.pin -v 1` (set), `setfattr -x` (remove) or `getfattr -n
    /// user.httpcachefs.pinned --only-values` (get) as the user, through perl's syscall (the
    /// attr tools are not installed everywhere): prints the value; exits with the errno.
    func xattr(_ op: String, _ path: String) throws -> UnprivilegedUser.Outcome {
        let script = """
            require "syscall.ph"; my ($op, $path) = @ARGV; my $buf = "\\0" x 16; my $one = "1";
            my ($pin, $pinned) = ("user.httpcachefs.pin", "user.httpcachefs.pinned");   # syscall writes to its strings
            my $r = $op eq "set" ? syscall(&SYS_setxattr, $path, $pin, $one, 1, 0)
                : $op eq "remove" ? syscall(&SYS_removexattr, $path, $pin)
                : syscall(&SYS_getxattr, $path, $pinned, $buf, 16);
            exit($! + 0) if $r < 0; print substr($buf, 0, $r) if $op eq "get"; exit 0;
            """
        return try user.run("/usr/bin/perl", ["-e", script, op, path])
    }

    func testTheOwnerOfAMountPinsItsFilesWithSetfattr() throws {
        guard access("/usr/bin/perl", X_OK) == 0 else { throw XCTSkip("no perl to call setxattr") }
        let mount = try user.httpcachefs(["mount", mountpoint, "--index", origin.url("/lib/"), "--no-proxy", "--xattr-pins"])
        XCTAssertEqual(mount.status, 0, "mount as \(UnprivilegedUser.name): \(mount.stderr)")
        guard mount.status == 0 else { return }
        let file = mountpoint + "/movie.bin"
        let mode = try user.run("/usr/bin/stat", ["-c", "%a", file])
        XCTAssertEqual(mode.text, "644\n", "the owner's write bit, for the kernel's check")
        XCTAssertEqual(try xattr("get", file).text, "0")
        let set = try xattr("set", file)
        XCTAssertEqual(set.status, 0, "the owner pins: errno \(set.status) \(set.stderr)")
        XCTAssertEqual(try xattr("get", file).text, "1")
        // Writes are still refused: the write bit is only for the kernel's check.
        let write = try user.run("/bin/sh", ["-c", "echo x > '\(file)'"])
        XCTAssertNotEqual(write.status, 0)
        XCTAssertTrue(write.stderr.contains("Read-only file system"), write.stderr)
        XCTAssertEqual(try xattr("remove", file).status, 0, "the owner unpins")
        XCTAssertEqual(try xattr("get", file).text, "0")
        XCTAssertEqual(try user.httpcachefs(["unmount", mountpoint]).status, 0)
    }
}
