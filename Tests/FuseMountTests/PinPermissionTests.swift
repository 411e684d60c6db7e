@testable import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Issue 46, item 6: who may pin is the daemon's decision, by the request's uid: the mount's
/// owner (the user running the daemon) and root; nobody else, in any user namespace.
final class PinPermissionTests: XCTestCase {
    func testTheOwnerAndRootPinAndNobodyElse() {
        let cases: [(request: uid_t, owner: uid_t, expected: PinPermission, why: String)] = [
            (0, 0, .allowed, "root on its own mount"),
            (1000, 0, .refused, "the -o uid= user of root's mount (the media server's)"),
            (1000, 1000, .allowed, "a user on their own mount"),
            (0, 1000, .allowed, "root on a user's mount"),
            (1001, 1000, .refused, "another user"),
            (65534, 1000, .refused, "nobody (what an unmapped uid reads as)"),
        ]
        for c in cases {
            XCTAssertEqual(PinPermission.decide(requestUID: c.request, mountOwner: c.owner), c.expected, c.why)
        }
    }

    /// The kernel asks for write permission before it asks the daemon: with `--xattr-pins`,
    /// files shown as the owner's have their owner's write bit; others' never.
    func testWithXattrPinsTheOwnersFilesAreWritableForTheKernel() {
        let cases: [(pins: Bool, uid: UInt32, owner: UInt32, umask: mode_t, mode: mode_t)] = [
            (false, 1000, 1000, 0, 0o444),
            (true, 1000, 1000, 0, 0o644),
            (true, 1000, 1000, 0o027, 0o640),
            (true, 1000, 0, 0, 0o444),   // -o uid=1000 on root's mount: 1000 is not the owner
            (true, 0, 0, 0, 0o644),
        ]
        for c in cases {
            var o = MountOptions(uid: c.uid)
            o.xattrPins = c.pins
            o.owner = c.owner
            o.umask = c.umask
            XCTAssertEqual(o.fileMode, c.mode, "\(c)")
        }
    }
}

/// The same on a real mount, with `setfattr` run as other users (`setpriv`) and from a user
/// namespace of their own (`unshare -r`).
extension PinPermissionTests {
    static let user: (uid: uid_t, gid: gid_t) = (4242, 4242)
    static let other: (uid: uid_t, gid: gid_t) = (4243, 4243)

    func mount(uid: uid_t, gid: gid_t, owner: uid_t) throws -> EngineMount {
        for tool in ["/usr/bin/setpriv", "/usr/bin/unshare", "/usr/bin/perl"] where access(tool, X_OK) != 0 {
            throw XCTSkip("no \(tool) to act as another user")
        }
        var options = MountOptions(readDeadline: nil, fuseOptions: ["allow_other"], uid: uid, gid: gid)
        options.xattrPins = true
        options.owner = owner
        return try EngineMount(tree: { o in try treeFromList("film.mkv = \(o.url("/v/film.mkv"))") }, options: options,
                               setup: { $0.setGeneratedFile("/v/film.mkv", length: 16 << 20, seed: 3) })
    }

    /// `setfattr -n user.httpcachefs.pin -v 1 FILE` (or `-x`) as `who`, in a user namespace of
    /// its own if asked: 0 or the errno.
    static func pin(_ path: String, _ set: Bool, as who: (uid: uid_t, gid: gid_t)?, namespace: Bool = false) throws -> Int32 {
        let script = """
            require "syscall.ph"; my ($op, $path, $name, $value) = (@ARGV, "user.httpcachefs.pin", "1");
            my $r = $op eq "set" ? syscall(&SYS_setxattr, $path, $name, $value, 1, 0) : syscall(&SYS_removexattr, $path, $name);
            exit($r == 0 ? 0 : $! + 0);
            """
        var argv = ["/usr/bin/perl", "-e", script, set ? "set" : "remove", path]
        if namespace { argv = ["/usr/bin/unshare", "-r"] + argv }
        if let who { argv = ["/usr/bin/setpriv", "--reuid=\(who.uid)", "--regid=\(who.gid)", "--clear-groups"] + argv }
        let pid = try Subprocess.spawn(argv[0], Array(argv.dropFirst()))
        return try XCTUnwrap(Subprocess.wait(pid, timeout: 30), "\(argv) ended")
    }

    func testTheUserShownAsOwnerOfRootsMountCannotPinEvenFromAUserNamespace() throws {
        let m = try mount(uid: Self.user.uid, gid: Self.user.gid, owner: 0)
        defer { m.stop() }
        let file = m.path("film.mkv"), url = m.origin.url("/v/film.mkv")
        // The namespace gives the files' user CAP_DAC_OVERRIDE over them: the kernel lets it
        // through, and the daemon refuses.
        XCTAssertEqual(try Self.pin(file, true, as: Self.user, namespace: true), EPERM)
        XCTAssertEqual(m.engine.pinnedRanges(url: url), [])
        XCTAssertEqual(try Self.pin(file, true, as: Self.user), EACCES, "without one, the kernel refuses (0444)")
        XCTAssertEqual(try Self.pin(file, true, as: nil), 0, "root pins")
        XCTAssertFalse(m.engine.pinnedRanges(url: url).isEmpty)
        XCTAssertEqual(try Self.pin(file, false, as: Self.user, namespace: true), EPERM, "nor unpins")
        XCTAssertFalse(m.engine.pinnedRanges(url: url).isEmpty)
        XCTAssertEqual(try Self.pin(file, false, as: nil), 0, "root unpins")
        XCTAssertEqual(m.engine.pinnedRanges(url: url), [])
        XCTAssertEqual(m.mount.fs.core.warmUps.wait(timeout: .now() + 60), .success, "the warm-up ended")
    }

    func testTheOwnerPinsItsOwnMountsFilesAndOthersCannot() throws {
        let m = try mount(uid: Self.user.uid, gid: Self.user.gid, owner: Self.user.uid)
        defer { m.stop() }
        let file = m.path("film.mkv"), url = m.origin.url("/v/film.mkv")
        XCTAssertEqual(try Self.pin(file, true, as: Self.user), 0, "the owner pins (before: Permission denied)")
        XCTAssertFalse(m.engine.pinnedRanges(url: url).isEmpty)
        XCTAssertEqual(try Self.pin(file, false, as: Self.other), EACCES, "another user: the kernel refuses")
        XCTAssertEqual(try Self.pin(file, false, as: Self.other, namespace: true), EACCES, "its namespace does not own the files")
        XCTAssertFalse(m.engine.pinnedRanges(url: url).isEmpty)
        XCTAssertEqual(try Self.pin(file, false, as: Self.user), 0, "the owner unpins")
        XCTAssertEqual(m.engine.pinnedRanges(url: url), [])
        XCTAssertEqual(m.mount.fs.core.warmUps.wait(timeout: .now() + 60), .success, "the warm-up ended")
    }
}
