import CacheCore
import Foundation
import XCTest
@testable import FuseMount

/// A folder opened file after file has its next files loaded ahead; any other order asks for
/// nothing.
final class FolderScanAheadTests: XCTestCase {
    func testTheThirdOpenInARowLoadsTheNextWindowAndHalfWayTheOneAfter() {
        var plan = FolderScanAhead()
        XCTAssertNil(plan.opened(100, in: 1))
        XCTAssertNil(plan.opened(101, in: 1), "one step is no scan yet")
        XCTAssertEqual(plan.opened(102, in: 1), 103...166)
        for ino in UInt64(103)...133 { XCTAssertNil(plan.opened(ino, in: 1), "inode \(ino): loaded already") }
        XCTAssertEqual(plan.opened(134, in: 1), 167...198, "half-way: the window after, nothing twice")
    }

    func testAnotherOrderAsksForNothing() {
        var plan = FolderScanAhead()
        for ino: UInt64 in [10, 12, 11, 20, 19, 18, 40, 42, 44] { XCTAssertNil(plan.opened(ino, in: 1), "inode \(ino)") }
    }

    func testTheSameFileAgainKeepsTheScanAndAJumpStartsOver() {
        var plan = FolderScanAhead()
        _ = plan.opened(1, in: 7)
        _ = plan.opened(2, in: 7)
        XCTAssertNil(plan.opened(2, in: 7), "the same file again")
        XCTAssertEqual(plan.opened(3, in: 7), 4...67)
        XCTAssertNil(plan.opened(500, in: 7))
        XCTAssertNil(plan.opened(501, in: 7))
        XCTAssertEqual(plan.opened(502, in: 7), 503...566)
    }

    func testFoldersAreFollowedApartAndFewAtATime() {
        var plan = FolderScanAhead()
        for ino: UInt64 in [1, 1001, 2, 1002] { _ = plan.opened(ino, in: ino < 1000 ? 1 : 2) }
        XCTAssertEqual(plan.opened(3, in: 1), 4...67)
        XCTAssertEqual(plan.opened(1003, in: 2), 1004...1067)
        // More folders than it follows: it starts over, and a scan is found again as at first.
        for folder in UInt64(10)..<UInt64(10 + FolderScanAhead.maxFolders) { _ = plan.opened(folder * 100, in: folder) }
        XCTAssertNil(plan.opened(4, in: 1))
        XCTAssertNil(plan.opened(5, in: 1))
        XCTAssertEqual(plan.opened(6, in: 1), 7...70)
    }

    /// Through the mount: `cat` of a listed folder's files in order asks the backend to load the
    /// next files' entries, by their keys, and opening them in another order asks for nothing.
    func testAMountAsksItsBackendForTheNextFilesOfAFolderOpenedInOrder() throws {
        let backend = FakeBackend()
        backend.keysByURL = true
        let names = (0..<100).map { String(format: "%03d.jpg", $0) }
        let urls = names.map { "http://origin.test/posters/\($0)" }
        for u in urls { backend.setFile(u, Array(u.utf8)) }
        let tree = MountTreeSpec(files: urls.enumerated().map { MountTreeSpec.File(path: ["posters", names[$0.offset]], url: $0.element, source: .argument($0.element)) })
        let calls = CoreCalls(backend: backend, tree: tree)
        guard case let .success(folder) = try calls.lookup("posters") else { return XCTFail("no folder") }
        var inos: [UInt64] = []
        for n in 0..<100 {
            guard case let .success(attr) = try calls.lookup(names[n], in: folder.ino) else { return XCTFail("no file \(n)") }
            inos.append(attr.ino)
        }
        XCTAssertEqual(inos, inos.sorted(), "a folder's files are numbered in name order, as `cat *` opens them")
        for ino in inos.prefix(5).reversed() { if case let .success(o) = try calls.open(ino) { calls.core.release(fh: o.fh) } }
        XCTAssertEqual(backend.loadedAhead, [], "backwards is no scan")
        for ino in inos.prefix(3) { if case let .success(o) = try calls.open(ino) { calls.core.release(fh: o.fh) } }
        XCTAssertEqual(backend.loadedAhead, [Array(urls[3..<67])], "the next 64 files, by key")
    }
}
