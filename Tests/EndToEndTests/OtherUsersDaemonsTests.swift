import Foundation
import Glibc
import TestSupport
import XCTest

/// Issue 50, item 4: daemons of other users are named the same way by every command. Root's
/// `status` lists another user's daemon, so root's `url PATH` inside its mount says whose mount
/// it is (as `url --cache-dir` of another user's cache does), not "not in a mount"; a user
/// without a daemon is told that others run some, not that none is running.
extension UnprivilegedUserTests {
    func testRootsURLOfAPathInAnotherUsersMountSaysWhose() throws {
        let mount = try user.httpcachefs(["mount", mountpoint, "--index", origin.url("/lib/"), "--proxy-port", "0"])
        XCTAssertEqual(mount.status, 0, mount.stderr)
        guard mount.status == 0 else { return }
        let binary = try BinaryUnderTest.locate()
        let status = try UnprivilegedUser.exec(binary, ["status"], timeout: 90)
        XCTAssertTrue(status.text.contains(mountpoint), "root's status lists the user's mount: \(status.text)")

        let url = try UnprivilegedUser.exec(binary, ["url", mountpoint + "/extra.txt"])
        XCTAssertEqual(url.status, 1, url.text)
        XCTAssertEqual(url.stderr.split(separator: "\n").count, 1, url.stderr)
        XCTAssertTrue(url.stderr.contains("is in an httpcachefs mount of uid \(user.uid)'s, not yours (uid 0)"), url.stderr)
        XCTAssertTrue(url.stderr.contains("run 'httpcachefs url' as that user"), url.stderr)
        XCTAssertFalse(url.stderr.contains("neither an http(s) URL nor a path"), url.stderr)
        XCTAssertEqual(try user.httpcachefs(["unmount", mountpoint]).status, 0)
    }

    func testAUserWithoutADaemonIsToldOthersRunSome() throws {
        guard let (rootsMount, rootsCache) = try mountAsRoot() else { return }
        defer { unmountAsRoot(rootsMount) }

        let status = try user.httpcachefs(["status"])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.text.hasPrefix("no httpcachefs daemon of yours is running; "), status.text)
        XCTAssertTrue(status.text.contains(" of other users "), status.text)
        XCTAssertFalse(status.text.contains(rootsCache), "a user learns how many, not which: \(status.text)")
    }

    /// A user who tries to unmount root's mount is told whose it is, in one line, and the mount
    /// stays (not fusermount3's "entry not found in /etc/mtab").
    func testAUserUnmountingRootsMountIsToldItIsAnotherUsers() throws {
        guard let (rootsMount, _) = try mountAsRoot() else { return }
        defer { unmountAsRoot(rootsMount) }

        let r = try user.httpcachefs(["unmount", rootsMount])
        XCTAssertEqual(r.status, 1, r.text)
        XCTAssertEqual(r.stderr, "httpcachefs: error: \(rootsMount) is another user's mount: only its owner or root can unmount it\n")
        XCTAssertTrue(try String(contentsOfFile: "/proc/mounts", encoding: .utf8).contains(" \(rootsMount) "), "root's mount stays")
    }

    /// Root mounts a file of the origin on a cache of its own: the mountpoint and the cache, nil
    /// (with the failure recorded) if the mount failed.
    func mountAsRoot() throws -> (mountpoint: String, cache: String)? {
        let rootsMount = user.root + "/roots-mnt", rootsCache = user.root + "/roots-cache"
        try FileManager.default.createDirectory(atPath: rootsMount, withIntermediateDirectories: true)
        let mount = try UnprivilegedUser.exec(try BinaryUnderTest.locate(), ["mount", rootsMount, origin.url("/lib/extra.txt"),
                                              "--proxy-port", "0", "--cache-dir", rootsCache, "--log-file", user.root + "/roots.log"])
        XCTAssertEqual(mount.status, 0, mount.stderr)
        return mount.status == 0 ? (rootsMount, rootsCache) : nil
    }

    func unmountAsRoot(_ mountpoint: String) {
        _ = try? UnprivilegedUser.exec(try BinaryUnderTest.locate(), ["unmount", mountpoint])
    }
}
