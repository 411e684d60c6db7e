import Foundation
import XCTest

/// `preload --recursive --include/--exclude`: the files chosen as a mount of the folder shows them.
extension LibraryPreloadTests {
    func testIncludeAndExcludeChooseTheFilesAsAMountWould() throws {
        let r = try preload(["--recursive", h.origin.url("/lib/"), "--head", "64K", "--include", "*.mp4", "--exclude", "deeper/"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertFalse(fetched("/lib/a.mp4").isEmpty, "included")
        XCTAssertTrue(fetched("/lib/sub/b.mkv").isEmpty, "not included: the rest is left out")
        XCTAssertTrue(fetched("/lib/small.txt").isEmpty, "not included")
        XCTAssertEqual(h.origin.requestCount(path: "/lib/sub/deeper/"), 0, "an excluded folder is not even listed")
        XCTAssertTrue(fetched("/lib/sub/deeper/c.mp4").isEmpty)

        let alone = try preload([h.origin.url("/lib/a.mp4"), "--exclude", "*.txt"])
        XCTAssertEqual(alone.status, 64)
        XCTAssertTrue(alone.stderr.contains("--include and --exclude go with --recursive"), alone.stderr)
    }
}
