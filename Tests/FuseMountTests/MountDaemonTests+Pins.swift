import CacheCore
import CFuse3
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Issue 46, item 6, through the real daemon run by root for a media server's user (`-o uid=`,
/// README's set-up): that user is shown as the files' owner, yet cannot pin or unpin them, not
/// even from a user namespace of its own, where the kernel's check passes.
extension LibraryRefreshTests {
    func testTheUserOfOUidCannotPinRootsFilesFromAUserNamespace() throws {
        for tool in ["/usr/bin/setpriv", "/usr/bin/unshare", "/usr/bin/perl"] where access(tool, X_OK) != 0 {
            throw XCTSkip("no \(tool) to act as another user")
        }
        chmod(h.directory.path, 0o755)   // the other user reaches the mountpoint
        let media = PinPermissionTests.user
        let r = try h.mount(["--index", h.origin.url("/lib/"), "--xattr-pins", "-o", "uid=\(media.uid),gid=\(media.gid),allow_other"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let file = h.path("a.txt")
        XCTAssertEqual(try POSIX.stat(file).st_uid, media.uid)
        XCTAssertEqual(try POSIX.stat(file).st_mode & 0o777, 0o444, "not the owner's files: no write bit")
        let pins = PinPermissionTests.self
        XCTAssertEqual(try pins.pin(file, true, as: media, namespace: true), EPERM, h.log)
        XCTAssertEqual(try pins.pin(file, true, as: media), EACCES)
        XCTAssertEqual(try pins.pin(file, true, as: nil), 0, "root pins")
        XCTAssertEqual(try pins.pin(file, false, as: media, namespace: true), EPERM, "nor unpins")
        var value = [UInt8](repeating: 0, count: 8)
        XCTAssertEqual(getxattr(file, "user.httpcachefs.pinned", &value, value.count), 1)
        XCTAssertEqual(value.first, UInt8(ascii: "1"), "still pinned")
        h.waitForLog("pin refused: uid \(media.uid) is neither the mount's owner (uid 0) nor root")
    }
}
