import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// The tree at local speed, on a real mount: READDIRPLUS hands the kernel each name's
/// attributes with the listing (no LOOKUP per name for `ls -l`), the kernel keeps them and the
/// directory's entries for the listing's lifetime, and a refresh that changes a size or a name
/// takes the kernel's copy back, so a kept answer is never stale after it.
final class ListingAttributesTests: XCTestCase {
    private func list(_ o: OriginServer, _ files: [(name: String, size: Int)]) {
        let rows = files.map { "<a href=\"\($0.name)\">\($0.name)</a>                 01-Jan-2024 00:00    \($0.size)\n" }.joined()
        let html = "<html><head><title>Index of /lib/</title></head><body><h1>Index of /lib/</h1><hr><pre><a href=\"../\">../</a>\n\(rows)</pre><hr></body></html>\n"
        // With no validators, as nginx sends its autoindex: a refresh reads it anew.
        o.setResponse("/lib/", status: 200, headers: [("Content-Type", "text/html")], body: Array(html.utf8))
        for f in files { o.setFile("/lib/" + f.name, data: [UInt8](repeating: 65, count: f.size)) }
    }

    private func mount(_ files: [(name: String, size: Int)]) throws -> EngineMount {
        try EngineMount(tree: { o in try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(o.url("/lib/"))]) },
                        setup: { self.list($0, files) })
    }

    private func refresh(_ m: EngineMount) {
        let done = DispatchSemaphore(value: 0)
        let result = LockedValue<ListingRefresh?>(nil)
        m.mount.fs.core.refreshListings(under: []) { r in result.withLock { $0 = r }; done.signal() }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success, "refresh")
        let r = result.withLock { $0 }
        XCTAssertEqual(r?.failures, [], "the refresh read the listing again")
        XCTAssertEqual(r?.listings, 1)
    }

    private func size(_ path: String) throws -> Int {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw POSIX.Failure(errno: errno) }
        return st.st_size
    }

    func testLsDashLGetsEveryNamesAttributesWithTheListingAndLooksNothingUp() throws {
        let files = (0..<300).map { (name: String(format: "film-%03d.mkv", $0), size: 1000 + $0) }
        let m = try mount(files)
        defer { m.stop() }
        let names = try POSIX.list(m.mount.mountpoint)
        XCTAssertEqual(names, files.map(\.name))
        for f in files { XCTAssertEqual(try size(m.path(f.name)), f.size, f.name) }
        XCTAssertEqual(m.mount.fs.core.lookupRequests, 0, "the names came with their attributes (READDIRPLUS)")
    }

    func testLsDashLItselfAsksTheDaemonNothingPerName() throws {
        let files = (0..<200).map { (name: String(format: "film-%03d.mkv", $0), size: 1000 + $0) }
        let m = try mount(files)
        defer { m.stop() }
        let ls = try ExternalTool.run(ExternalTool.find("ls")!, ["-l", m.mount.mountpoint], timeout: 60)
        XCTAssertEqual(ls.status, 0, ls.stderr)
        XCTAssertEqual(ls.stdout.split(separator: "\n").filter { $0.hasSuffix(".mkv") }.count, files.count)
        XCTAssertEqual(m.mount.fs.core.lookupRequests, 0, "no LOOKUP per name")
        // ls asks for each file's security label; ENOTSUP makes it stop asking on this mount.
        XCTAssertLessThanOrEqual(m.mount.fs.core.xattrRequests.withLock { $0 }, 2, "no GETXATTR per name")
    }

    func testStatAfterARefreshShowsTheNewSize() throws {
        let m = try mount([("a.mkv", 100), ("b.mkv", 200)])
        defer { m.stop() }
        XCTAssertEqual(try POSIX.list(m.mount.mountpoint), ["a.mkv", "b.mkv"])
        XCTAssertEqual(try size(m.path("a.mkv")), 100)
        // A page of the same length: nothing but its bytes says it changed.
        list(m.origin, [("a.mkv", 900), ("b.mkv", 200)])
        // The kernel holds a.mkv's attributes for the listing's lifetime; only the refresh's
        // word takes them back.
        XCTAssertEqual(try size(m.path("a.mkv")), 100, "kept, as the listing said")
        refresh(m)
        m.mount.fs.session.flush()
        XCTAssertEqual(try size(m.path("a.mkv")), 900)
        XCTAssertEqual(try size(m.path("b.mkv")), 200)
    }

    func testAFolderIsListedFromTheKernelUntilARefreshChangesIt() throws {
        let m = try mount([("a.mkv", 100), ("b.mkv", 200)])
        defer { m.stop() }
        XCTAssertEqual(try POSIX.list(m.mount.mountpoint), ["a.mkv", "b.mkv"])
        XCTAssertEqual(try POSIX.list(m.mount.mountpoint), ["a.mkv", "b.mkv"])
        list(m.origin, [("b.mkv", 200), ("c.mkv", 3000)])
        refresh(m)
        m.mount.fs.session.flush()
        XCTAssertEqual(try POSIX.list(m.mount.mountpoint), ["b.mkv", "c.mkv"], "a refresh that changed the folder drops the kernel's copy")
        XCTAssertEqual(try size(m.path("c.mkv")), 3000)
        var st = stat()
        XCTAssertEqual(lstat(m.path("a.mkv"), &st), -1, "the removed name is gone from the kernel too")
        XCTAssertEqual(errno, ENOENT)
    }

    func testTheKernelKeepsADirectorysEntriesOnlyWhileNothingChanged() throws {
        let m = try mount([("a.mkv", 100)])
        defer { m.stop() }
        let core = m.mount.fs.core
        func opendir() throws -> UInt64 {
            let done = DispatchSemaphore(value: 0)
            let answer = LockedValue<Result<UInt64, FSErrno>?>(nil)
            core.opendir(InodeTable.rootIno) { r in answer.withLock { $0 = r }; done.signal() }
            XCTAssertEqual(done.wait(timeout: .now() + 20), .success, "opendir")
            return try XCTUnwrap(answer.withLock { $0 }).get()
        }
        let first = try opendir()
        XCTAssertFalse(core.keepsDirectoryCache(fh: first), "nothing kept yet")
        core.releasedir(fh: first)
        let second = try opendir()
        XCTAssertTrue(core.keepsDirectoryCache(fh: second), "the same entries: kept")
        core.releasedir(fh: second)
        list(m.origin, [("a.mkv", 100), ("b.mkv", 1)])
        refresh(m)
        let third = try opendir()
        XCTAssertFalse(core.keepsDirectoryCache(fh: third), "a name was added: read anew")
        core.releasedir(fh: third)
    }
}
