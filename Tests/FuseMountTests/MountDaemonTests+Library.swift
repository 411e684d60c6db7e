import CacheCore
import CFuse3
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// The library options through the real daemon: `--on-change` hears a refresh's changes,
/// `--scanner` and `--xattr-pins` are taken.
extension LibraryRefreshTests {
    func testOnChangeGetsTheChangedPathsAfterRefreshAndXattrPinsWork() throws {
        let heard = h.directory.appending("heard")
        let r = try h.mount(["--index", h.origin.url("/lib/"), "--index-ttl", "1h", "--proxy-port", "0",
                             "--on-change", "cat >> '\(heard)'", "--scanner", "my-probe", "--xattr-pins"], proxy: true)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.txt", "sub"])
        XCTAssertEqual(try POSIX.list(h.path("sub")), ["s1.txt"])

        list("/lib/", ["a.txt", "b.txt", "sub/"])
        list("/lib/sub/", ["s22.txt"])   // a page of another length: nginx sends no validators
        let out = try refresh([h.mountpoint])
        XCTAssertEqual(out.status, 0, out.stderr)
        // The command runs on its own after the refresh answered: the harness waits for its file.
        let expected = Set(["b.txt", "sub/s1.txt", "sub/s22.txt"].map { h.path($0) })
        h.waitForFiles(in: (heard as NSString).deletingLastPathComponent, "the on-change command wrote its paths") {
            Set(((try? String(contentsOfFile: heard, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)) == expected
        }

        let pin = Array("1".utf8)
        XCTAssertEqual(setxattr(h.path("a.txt"), "user.httpcachefs.pin", pin, pin.count, 0), 0, String(cString: strerror(errno)))
        var value = [UInt8](repeating: 0, count: 8)
        let n = getxattr(h.path("a.txt"), "user.httpcachefs.pinned", &value, value.count)
        XCTAssertEqual(n, 1)
        XCTAssertEqual(value.first, UInt8(ascii: "1"))
    }
}
