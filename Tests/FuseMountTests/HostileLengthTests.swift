import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Lengths and offsets no file can have (from an origin, a listing, the kernel): the file they
/// concern fails on its own, nothing traps, the mount keeps serving everything else.
final class HostileLengthTests: XCTestCase {
    let backend = FakeBackend()

    /// nginx JSON autoindex of files (name, size as written).
    static func jsonListing(_ files: [(String, String)]) -> [UInt8] {
        let items = files.map { #"{"name":"\#($0.0)","type":"file","mtime":"Thu, 04 Jan 2024 10:00:00 GMT","size":\#($0.1)}"# }
        return Array("[\(items.joined(separator: ","))]".utf8)
    }

    // MARK: Unit: attribute and offset arithmetic

    func testStatOfAnAbsurdSizeAndDateIsClampedNotATrap() {
        let attr = Attr(ino: 5, isDirectory: false, size: .max, mtime: Date(timeIntervalSince1970: 1e300), ttl: 1)
        let st = FuseOperations.stat(attr, MountOptions())
        XCTAssertEqual(st.st_size, Int(FileLength.limit))
        XCTAssertEqual(st.st_blocks, Int(FileLength.limit / 512))
        XCTAssertEqual(st.st_mtim.tv_sec, 0, "a date time_t cannot hold")
        let negative = FuseOperations.stat(Attr(ino: 5, isDirectory: false, size: -7, mtime: Date(timeIntervalSince1970: 1.5), ttl: 1),
                                           MountOptions())
        XCTAssertEqual(negative.st_size, 0)
        XCTAssertEqual(negative.st_mtim.tv_sec, 1)
        XCTAssertEqual(negative.st_mtim.tv_nsec, 500_000_000)
    }

    func testReadsAtOffsetsNearInt64MaxAreTheEndOfTheFile() throws {
        backend.setFile("http://o/a.bin", testBytes(count: 100))
        let c = CoreCalls(backend: backend, tree: try treeFromList("http://o/a.bin"))
        let ino = try c.lookup("a.bin").get().ino
        let fh = try c.open(ino).get().fh
        for offset in [Int64.max, Int64.max - 1, FileLength.limit, FileLength.limit + 4096] {
            XCTAssertEqual(try c.read(fh, offset: offset, size: 1 << 20), .success([]), "offset \(offset)")
        }
        XCTAssertEqual(try c.read(fh, offset: -1, size: 10), .failure(FSErrno(EINVAL)))
        XCTAssertEqual(try c.read(fh, offset: FileLength.limit - 1, size: .max), .success([]), "past the 100 bytes")
        XCTAssertEqual(try c.read(fh, offset: 90, size: .max), .success(Array(testBytes(count: 100)[90...])))
        XCTAssertEqual(backend.readLog.map(\.offset), [FileLength.limit - 1, 90], "offsets past the limit never reach the cache")
    }

    // MARK: Fake backend: one file fails, the others do not

    func testAFileWhoseCachedLengthIsPastTheLimitFailsAloneWithEIO() throws {
        backend.setFile("http://o/huge.bin", testBytes(count: 10))
        backend.setClaimedLength("http://o/huge.bin", .max)
        backend.setFile("http://o/ok.bin", testBytes(count: 10, seed: 2))
        let mount = try InProcessMount(backend: backend, tree: try treeFromList("http://o/huge.bin\nhttp://o/ok.bin"))
        defer { mount.stop() }
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("huge.bin")) }, EIO)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.readAll(mount.path("huge.bin")) }, EIO)
        XCTAssertEqual(try POSIX.readAll(mount.path("ok.bin")), testBytes(count: 10, seed: 2))
        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["huge.bin", "ok.bin"])
    }

    func testListingSizesNoFileCanHaveCountAsMissingAndAreAskedFor() throws {
        backend.setFile("http://o/pub/", Self.jsonListing([("ok.bin", "5"), ("huge.bin", "9223372036854775807"),
                                                            ("neg.bin", "-1"), ("limit.bin", "\(FileLength.limit)")]))
        backend.setFile("http://o/pub/huge.bin", testBytes(count: 3))
        backend.setFile("http://o/pub/neg.bin", testBytes(count: 4))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://o/pub/")])
        let mount = try InProcessMount(backend: backend, tree: tree)
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["huge.bin", "limit.bin", "neg.bin", "ok.bin"])
        XCTAssertEqual(try POSIX.stat(mount.path("ok.bin")).st_size, 5)
        XCTAssertEqual(try POSIX.stat(mount.path("limit.bin")).st_size, Int(FileLength.limit), "2^62 itself is a size")
        XCTAssertEqual(backend.opens, ["http://o/pub/"])
        XCTAssertEqual(try POSIX.stat(mount.path("huge.bin")).st_size, 3, "the origin's word, not the listing's")
        XCTAssertEqual(try POSIX.stat(mount.path("neg.bin")).st_size, 4)
        XCTAssertEqual(backend.opens, ["http://o/pub/", "http://o/pub/huge.bin", "http://o/pub/neg.bin"])
    }

    // MARK: End to end: a hostile origin through the real cache

    func testAnOriginClaimingInt64MaxBytesFailsThatFileOnlyAndTheMountStaysUp() throws {
        let m = try EngineMount(tree: { o in
            try MountTreeSpec.build(urlList: try URLListParser.parse("""
                huge206.bin = \(o.url("/huge206.bin"))
                huge200.bin = \(o.url("/huge200.bin"))
                past.bin = \(o.url("/past.bin"))
                ok.bin = \(o.url("/ok.bin"))
                """), indexes: [try MountTreeSpec.parseIndex("pub = \(o.url("/pub/"))")])
        }, setup: { o in
            o.setLengthClaim("/huge206.bin", .contentRangeTotal("9223372036854775807"))
            o.setLengthClaim("/huge200.bin", .contentLength("9223372036854775807"))
            o.setLengthClaim("/past.bin", .contentRangeTotal("99999999999999999999999"))
            o.setGeneratedFile("/ok.bin", length: 5000, seed: 3)
            o.setResponse("/pub/", status: 200, headers: [("Content-Type", "application/json")],
                          body: Self.jsonListing([("huge.bin", "9223372036854775807"), ("ok.bin", "5000")]))
            o.setLengthClaim("/pub/huge.bin", .contentRangeTotal("9223372036854775807"))
            o.setGeneratedFile("/pub/ok.bin", length: 5000, seed: 4)
        })
        defer { m.stop() }
        try withinBound(60, "hostile lengths through the mount") {
            for name in ["huge206.bin", "huge200.bin", "past.bin", "pub/huge.bin"] {
                XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(m.path(name)) }, EIO, name)
                XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.readAll(m.path(name)) }, EIO, name)
            }
            XCTAssertEqual(try POSIX.list(m.mount.mountpoint), ["huge200.bin", "huge206.bin", "ok.bin", "past.bin", "pub"])
            XCTAssertEqual(try POSIX.list(m.path("pub")), ["huge.bin", "ok.bin"])
            XCTAssertEqual(try POSIX.stat(m.path("pub/ok.bin")).st_size, 5000)
            XCTAssertTrue(try POSIX.readAll(m.path("pub/ok.bin")) == OriginServer.generatedBytes(seed: 4, offset: 0, count: 5000))
            XCTAssertTrue(try POSIX.readAll(m.path("ok.bin")) == OriginServer.generatedBytes(seed: 3, offset: 0, count: 5000))
        }
        XCTAssertTrue(m.mount.fs.isRunning, "the daemon is still up")
    }
}
