import CacheCore
import Foundation
import Glibc
import XCTest
@testable import FuseMount
import TestSupport

/// Directory indexes, the by-URL directory, URL-list reloads and remote changes, on real mounts
/// over the in-memory backend.
final class FuseTreeTests: XCTestCase {
    let backend = FakeBackend()

    private func nginxListing(_ rows: [(String, Int64?)]) -> [UInt8] {
        var html = "<html><head><title>Index of /pub/</title></head><body><h1>Index of /pub/</h1><hr><pre><a href=\"../\">../</a>\n"
        for (name, size) in rows {
            let href = name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!
            html += "<a href=\"\(href)\">\(name)</a>                    04-Jan-2024 10:00    \(size.map(String.init) ?? "-")\n"
        }
        return Array((html + "</pre><hr></body></html>\n").utf8)
    }

    func testAnNginxIndexIsListedLazilyWithItsSizesAndNoRequestPerFile() throws {
        backend.setFile("http://o/pub/", nginxListing([("docs/", nil), ("a.bin", 1000), ("b c.bin", 20)]))
        backend.setFile("http://o/pub/docs/", Array(ListingFixtures.apacheTable.utf8))
        backend.setFile("http://o/pub/a.bin", testBytes(count: 1000))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/pub")])
        let mount = try InProcessMount(backend: backend, tree: tree)
        defer { mount.stop() }

        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["a.bin", "b c.bin", "docs"])
        XCTAssertEqual(try POSIX.stat(mount.path("a.bin")).st_size, 1000)
        XCTAssertEqual(try POSIX.stat(mount.path("b c.bin")).st_size, 20)
        XCTAssertEqual(try POSIX.stat(mount.path("a.bin")).st_mtim.tv_sec, 1_704_362_400, "04-Jan-2024 10:00 UTC")
        XCTAssertEqual(try POSIX.stat(mount.path("docs")).st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(backend.opens, ["http://o/pub/"], "listing and stat need nothing but the listing")

        XCTAssertEqual(try POSIX.list(mount.path("docs")), ["My Movie.mp4", "docs", "small.txt"])
        XCTAssertEqual(try POSIX.readAll(mount.path("a.bin")), testBytes(count: 1000))
    }

    func testASizeMissingFromTheListingIsFetchedOnStat() throws {
        backend.setFile("http://o/pub/", Array(ListingFixtures.apachePre.replacingOccurrences(of: "/pub", with: "/pub").utf8))
        backend.setFile("http://o/pub/My%20Movie.mp4", testBytes(count: 1_234_567))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("media = http://o/pub/")])
        let mount = try InProcessMount(backend: backend, tree: tree)
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.list(mount.path("media")), ["My Movie.mp4", "docs", "small.txt"])
        XCTAssertEqual(backend.openCount, 1)
        XCTAssertEqual(try POSIX.stat(mount.path("media/My Movie.mp4")).st_size, 1_234_567)
        XCTAssertEqual(backend.opens.last, "http://o/pub/My%20Movie.mp4")
    }

    func testAnExpiredListingIsServedThenRefreshedAndFollowsTheServer() throws {
        backend.setFile("http://o/pub/", nginxListing([("old.bin", 1), ("kept.bin", 2)]))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/pub/")])
        let mount = try InProcessMount(backend: backend, tree: tree, options: MountOptions(listingTTL: 0))
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["kept.bin", "old.bin"])
        let keptIno = try POSIX.stat(mount.path("kept.bin")).st_ino
        // The mount reports what a refresh changed once it has applied it (`--on-change`).
        let changed = DispatchSemaphore(value: 0)
        mount.fs.onChange { _ in changed.signal() }
        backend.setFile("http://o/pub/", nginxListing([("kept.bin", 2), ("new.bin", 3)]))
        // Stale-while-revalidate: an `ls` may still show the old listing while the refresh it
        // started runs; once that refresh has landed, the next one shows the server's.
        _ = try POSIX.list(mount.mountpoint)
        XCTAssertEqual(changed.wait(timeout: .now() + 20), .success, "the refresh never reported its changes")
        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["kept.bin", "new.bin"])
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("old.bin")) }, ENOENT)
        XCTAssertEqual(try POSIX.stat(mount.path("kept.bin")).st_ino, keptIno, "an unchanged entry keeps its inode")
    }

    func testAListingWithANameTooLongOrALineBreakListsEverythingElse() throws {
        let long = String(repeating: "n", count: 5000) + ".bin"
        backend.setFile("http://o/pub/", nginxListing([(long, 1), ("a.bin", 2), ("b\r\nc.bin", 3), ("d.bin", 4)]))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/pub/")])
        let mount = try InProcessMount(backend: backend, tree: tree, logLevel: .critical)
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["a.bin", "d.bin"])
        XCTAssertEqual(try POSIX.stat(mount.path("d.bin")).st_size, 4)
    }

    func testAListingThatCannotBeFetchedIsAnError() throws {
        backend.setError("http://o/private/", .forbidden(url: "http://o/private/", status: 403))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("p = http://o/private/")])
        let mount = try InProcessMount(backend: backend, tree: tree, logLevel: .critical)
        defer { mount.stop() }
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.list(mount.path("p")) }, EACCES)
    }

    func testByURLResolvesAnyURLOnLookup() throws {
        backend.setFile("http://o/deep/path/v.bin", testBytes(count: 5000, seed: 7))
        backend.setFile("http://o/q.bin?token=a%20b", testBytes(count: 10, seed: 8))
        let mount = try InProcessMount(backend: backend, tree: MountTreeSpec(byURL: true), logLevel: .critical)
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.readAll(mount.path(".url/http/o/deep/path/v.bin")), testBytes(count: 5000, seed: 7))
        XCTAssertEqual(try POSIX.readAll(mount.path(".url/http/o/q.bin?token=a b")), testBytes(count: 10, seed: 8))
        XCTAssertEqual(try POSIX.stat(mount.path(".url/http/o/deep")).st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path(".url/ftp")) }, ENOENT)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path(".url/http/o/missing.bin?x=1")) }, ENOENT)
        XCTAssertEqual(try POSIX.list(mount.mountpoint), [".url"])
    }

    func testTheByURLDirectoryListsItsSchemes() throws {
        backend.setFile("http://o/v.bin", [1, 2, 3])
        let mount = try InProcessMount(backend: backend, tree: MountTreeSpec(byURL: true), logLevel: .critical)
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.list(mount.path(".url")), ["http", "https"], "ls .url shows where to go on")
        XCTAssertEqual(try POSIX.stat(mount.path(".url/https")).st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(try POSIX.readAll(mount.path(".url/http/o/v.bin")), [1, 2, 3])
        XCTAssertEqual(try POSIX.list(mount.path(".url")), ["http", "https"], "the same after a lookup through it")
        XCTAssertEqual(try POSIX.list(mount.path(".url/https")), [], "hosts are not listed: any host resolves on lookup")
    }

    func testByURLFollowsADirectoryRedirect() throws {
        backend.setFile("http://o/dir", Array("<html></html>".utf8), finalURL: "http://o/dir/")
        backend.setFile("http://o/dir/f.bin", [1, 2, 3])
        let mount = try InProcessMount(backend: backend, tree: MountTreeSpec(byURL: true))
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.stat(mount.path(".url/http/o/dir")).st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(try POSIX.readAll(mount.path(".url/http/o/dir/f.bin")), [1, 2, 3])
    }

    func testReloadRemovesAddsAndKeepsEntriesWithoutRemount() throws {
        for n in ["a", "b", "c"] { backend.setFile("http://o/\(n).bin", Array(n.utf8)) }
        let first = try MountTreeSpec.build(urlList: try URLListParser.parse("http://o/a.bin\nold/b.bin = http://o/b.bin\n"))
        let mount = try InProcessMount(backend: backend, tree: first)
        defer { mount.stop() }
        let aIno = try POSIX.stat(mount.path("a.bin")).st_ino
        XCTAssertEqual(try POSIX.readAll(mount.path("old/b.bin")), Array("b".utf8))
        let fd = try POSIX.open(mount.path("old/b.bin"))
        defer { close(fd) }

        mount.fs.reload(tree: try first.replacingURLList(try URLListParser.parse("http://o/a.bin\nnew/c.bin = http://o/c.bin\n"), path: nil))

        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["a.bin", "new"])
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("old/b.bin")) }, ENOENT)
        XCTAssertEqual(try POSIX.readAll(mount.path("new/c.bin")), Array("c".utf8))
        XCTAssertEqual(try POSIX.stat(mount.path("a.bin")).st_ino, aIno)
        XCTAssertEqual(try POSIX.pread(fd, offset: 0, count: 1), Array("b".utf8), "a file open before the reload stays readable")
    }

    func testThePageCacheIsKeptWhileTheGenerationIsUnchanged() throws {
        backend.setFile("http://o/a.bin", testBytes(count: 256 << 10))
        let mount = try InProcessMount(backend: backend, tree: try MountTreeSpec.build(urlList: try URLListParser.parse("http://o/a.bin")))
        defer { mount.stop() }
        _ = try POSIX.readAll(mount.path("a.bin"))
        let readsAfterFirst = backend.readLog.count
        XCTAssertEqual(try POSIX.readAll(mount.path("a.bin")), testBytes(count: 256 << 10))
        XCTAssertEqual(backend.readLog.count, readsAfterFirst, "the second open reads from the kernel's page cache")
    }

    func testARemoteChangeDropsThePageCacheAndTheNewBytesAreRead() throws {
        let old = testBytes(count: 100_000, seed: 1)
        let new = testBytes(count: 120_000, seed: 2)
        backend.setFile("http://o/a.bin", old)
        let mount = try InProcessMount(backend: backend, tree: try MountTreeSpec.build(urlList: try URLListParser.parse("http://o/a.bin")))
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.readAll(mount.path("a.bin")), old)
        backend.setFile("http://o/a.bin", new)  // the cache reports a new generation
        // Invalidation is sent asynchronously; the next open also sees the new generation.
        XCTAssertEqual(try POSIX.readAll(mount.path("a.bin")), new)
        XCTAssertEqual(try POSIX.stat(mount.path("a.bin")).st_size, 120_000)
    }
}

final class InodeTableTests: XCTestCase {
    func file() -> NodeContent { .file(FileState(url: "http://h/x")) }
    func dir() -> NodeContent { .directory(DirectoryState(mtime: Date())) }

    func testDetachedNodesStayWhileTheKernelHoldsThem() {
        var t = InodeTable(rootMtime: Date())
        let a = t.add(parent: 1, name: "a", origin: .spec, content: file())
        t.lookedUp(a.ino)
        XCTAssertEqual(t.detach(a.ino).map(\.name), ["a"])
        XCTAssertNil(t.child(of: 1, named: "a"))
        XCTAssertNotNil(t.node(a.ino), "still referenced by the kernel")
        t.forget(a.ino, count: 1)
        XCTAssertNil(t.node(a.ino))
    }

    func testARenumberedFileKeepsItsOldInodeForTheKernelAndItsNameGetsANewOne() {
        var t = InodeTable(rootMtime: Date())
        let d = t.add(parent: 1, name: "d", origin: .listing, content: dir())
        let a = t.add(parent: d.ino, name: "a", origin: .listing, content: file())
        t.lookedUp(a.ino)
        let b = t.renumber(a.ino)
        XCTAssertNotNil(b)
        XCTAssertNotEqual(b?.ino, a.ino)
        XCTAssertTrue(t.child(of: d.ino, named: "a") === b, "the name leads to the new inode")
        XCTAssertEqual(b?.file?.url, a.file?.url)
        b?.file?.size = 99
        XCTAssertNotEqual(a.file?.size, 99, "each inode keeps its own attributes")
        XCTAssertTrue(t.node(a.ino) === a, "the kernel may still use the old one")
        XCTAssertNil(t.renumber(a.ino), "a detached inode is not renumbered again")
        XCTAssertNil(t.renumber(d.ino), "only files are renumbered")
        t.forget(a.ino, count: 1)
        XCTAssertNil(t.node(a.ino))
        XCTAssertTrue(t.child(of: d.ino, named: "a") === b)
    }

    func testInodeNumbersAreNeverReused() {
        var t = InodeTable(rootMtime: Date())
        let a = t.add(parent: 1, name: "a", origin: .spec, content: file())
        _ = t.detach(a.ino)
        let b = t.add(parent: 1, name: "a", origin: .spec, content: file())
        XCTAssertNotEqual(a.ino, b.ino)
    }

    func testDetachingADirectoryDetachesItsSubtree() {
        var t = InodeTable(rootMtime: Date())
        let d = t.add(parent: 1, name: "d", origin: .spec, content: dir())
        let f = t.add(parent: d.ino, name: "f", origin: .spec, content: file())
        XCTAssertEqual(Set(t.detach(d.ino).map(\.name)), ["d", "f"])
        XCTAssertNil(t.node(f.ino))
        XCTAssertEqual(t.count, 1)
    }

    func testResolvedNodesGoOnceForgottenAndTheirEmptyParentsToo() {
        var t = InodeTable(rootMtime: Date())
        let host = t.add(parent: 1, name: "h", origin: .resolved, content: dir())
        t.lookedUp(host.ino)
        let f = t.add(parent: host.ino, name: "f", origin: .resolved, content: file())
        t.lookedUp(f.ino)
        t.forget(host.ino, count: 1)
        XCTAssertNotNil(t.child(of: 1, named: "h"), "a child is still referenced")
        t.forget(f.ino, count: 1)
        XCTAssertNil(t.child(of: 1, named: "h"))
        XCTAssertEqual(t.count, 1)
    }

    func testSpecNodesSurviveForget() {
        var t = InodeTable(rootMtime: Date())
        let a = t.add(parent: 1, name: "a", origin: .spec, content: file())
        t.lookedUp(a.ino)
        t.forget(a.ino, count: 1)
        XCTAssertNotNil(t.child(of: 1, named: "a"))
        t.forget(1, count: 100)
        XCTAssertNotNil(t.node(1), "the root is never forgotten")
    }
}

final class ByURLPathTests: XCTestCase {
    func testNamesBecomeURLsKeepingEscapes() {
        XCTAssertEqual(ByURLPath.childURL(base: "https://h", name: "My Movie.mp4"), "https://h/My%20Movie.mp4")
        XCTAssertEqual(ByURLPath.childURL(base: "https://h", name: "My%20Movie.mp4"), "https://h/My%20Movie.mp4")
        XCTAssertEqual(ByURLPath.childURL(base: "https://h/a", name: "v.mp4?sig=1/2&x=%zz"), "https://h/a/v.mp4?sig=1/2&x=%25zz")
        XCTAssertEqual(ByURLPath.childURL(base: "https://h", name: "100%"), "https://h/100%25")
        XCTAssertEqual(ByURLPath.childURL(base: "https://h", name: "é.mp4"), "https://h/%C3%A9.mp4")
    }

    func testHosts() {
        XCTAssertTrue(ByURLPath.validHost("example.com"))
        XCTAssertTrue(ByURLPath.validHost("127.0.0.1:8080"))
        XCTAssertFalse(ByURLPath.validHost("user@host"))
        XCTAssertFalse(ByURLPath.validHost("a b"))
        XCTAssertFalse(ByURLPath.validHost(""))
    }
}
