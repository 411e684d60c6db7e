@testable import CacheCore
import CFuse3
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Cache state where files live, on a real mount: `user.httpcachefs.*` read as `getfattr`
/// reads them, a pin set and removed as `setfattr` does, and every other name answered with the
/// errno the tools expect.
final class CacheAttributesMountTests: XCTestCase {
    let size: Int64 = 16 << 20
    let seed: UInt64 = 7

    func mount() throws -> EngineMount {
        // `--xattr-pins`: the kernel refuses xattr changes on a read-only mount before asking us.
        var options = MountOptions(readDeadline: nil)
        options.xattrPins = true
        return try EngineMount(tree: { o in try treeFromList("films/film.mkv = \(o.url("/v/film.mkv"))") },
                        options: options,
                        setup: { [size, seed] in $0.setGeneratedFile("/v/film.mkv", length: size, seed: seed, contentType: "video/x-matroska") })
    }

    /// `getfattr -n NAME --only-values FILE`: the value, or the errno.
    func get(_ path: String, _ name: String) -> Result<String, POSIX.Failure> {
        while true {
            let n = getxattr(path, name, nil, 0)
            guard n >= 0 else { return .failure(POSIX.Failure(errno: errno)) }
            var buf = [UInt8](repeating: 0, count: max(n, 1))
            let got = getxattr(path, name, &buf, buf.count)
            if got < 0 && errno == ERANGE { continue }   // it grew in between (bytes arrived), as getfattr retries
            guard got >= 0 else { return .failure(POSIX.Failure(errno: errno)) }
            return .success(String(decoding: buf.prefix(got), as: UTF8.self))
        }
    }

    func set(_ path: String, _ name: String, _ value: String) -> Int32 {
        let bytes = Array(value.utf8)
        return setxattr(path, name, bytes, bytes.count, 0) == 0 ? 0 : errno
    }

    func testAFilesCacheStateReadsAsAttributes() throws {
        let m = try mount()
        defer { m.stop() }
        let file = m.path("films/film.mkv")
        let fd = open(file, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        XCTAssertEqual(pread(fd, &buf, buf.count, 0), buf.count)
        close(fd)
        m.engine.core.writes.waitIdle()   // `cached` counts bytes on disk

        XCTAssertEqual(get(file, "user.httpcachefs.url"), .success(m.origin.url("/v/film.mkv")))
        let cached = try get(file, "user.httpcachefs.cached").get().split(separator: "/")
        XCTAssertEqual(cached.last, "\(size)")
        // Bytes on disk: what was read, as far as the writer got (the transfer may still deliver).
        XCTAssertGreaterThan(Int64(cached.first ?? "") ?? 0, 1, "more than the open's probe byte")
        XCTAssertTrue(try get(file, "user.httpcachefs.ranges").get().hasPrefix("0-"))
        XCTAssertEqual(get(file, "user.httpcachefs.pinned"), .success("0"))
        XCTAssertEqual(get(file, "user.httpcachefs.validator"), .success("etag \"gen-\(String(seed, radix: 16))-\(size)\""))

        var names = [CChar](repeating: 0, count: 1024)
        let n = listxattr(file, &names, names.count)
        XCTAssertGreaterThan(n, 0)
        let listed = names.prefix(max(n, 0)).split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        XCTAssertEqual(listed, ["url", "cached", "ranges", "pinned", "validator"].map { "user.httpcachefs." + $0 })
        XCTAssertEqual(listxattr(m.path("films"), &names, names.count), 0, "a directory has none")
    }

    func testOtherNamesGetTheErrnoToolsExpect() throws {
        let m = try mount()
        defer { m.stop() }
        let file = m.path("films/film.mkv")
        XCTAssertEqual(get(file, "user.httpcachefs.nope"), .failure(POSIX.Failure(errno: ENODATA)), "a name of ours we do not have")
        XCTAssertEqual(get(file, "security.selinux"), .failure(POSIX.Failure(errno: ENOTSUP)), "another namespace")
        XCTAssertEqual(get(file, "user.comment"), .failure(POSIX.Failure(errno: ENOTSUP)))
        XCTAssertEqual(get(m.path("films"), "user.httpcachefs.url"), .failure(POSIX.Failure(errno: ENODATA)), "a directory")
        XCTAssertEqual(set(file, "user.httpcachefs.cached", "1"), EPERM, "read-only")
        XCTAssertEqual(set(file, "user.comment", "hi"), ENOTSUP)
        XCTAssertEqual(set(file, "user.httpcachefs.pin", "maybe"), EINVAL)
        XCTAssertEqual(set(m.path("films"), "user.httpcachefs.pin", "1"), EPERM, "folders are not pinned")
        XCTAssertEqual(removexattr(file, "user.httpcachefs.url") == 0 ? 0 : errno, EPERM)
        var small = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(getxattr(file, "user.httpcachefs.url", &small, small.count), -1)
        XCTAssertEqual(errno, ERANGE, "a buffer too small")
    }

    func testSetfattrPinsTheHeadAndTailAndWarmsThemAndRemovingItUnpins() throws {
        let m = try mount()
        defer { m.stop() }
        let file = m.path("films/film.mkv")
        let url = m.origin.url("/v/film.mkv")
        XCTAssertEqual(set(file, "user.httpcachefs.pin", "1"), 0)
        let head = 0..<CacheAttributes.pinHead, tail = (size - CacheAttributes.pinTail)..<size
        XCTAssertEqual(m.engine.pinnedRanges(url: url), [head, tail])
        XCTAssertEqual(get(file, "user.httpcachefs.pinned"), .success("1"))
        XCTAssertEqual(m.mount.fs.core.warmUps.wait(timeout: .now() + 60), .success, "warm-up")
        // Warmed: a probe of the head and the tail asks the origin for nothing.
        m.origin.resetLog()
        let fd = open(file, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        for offset in [0, head.upperBound - Int64(buf.count), tail.lowerBound, size - Int64(buf.count)] {
            XCTAssertEqual(pread(fd, &buf, buf.count, off_t(offset)), buf.count)
            XCTAssertEqual(buf, OriginServer.generatedBytes(seed: seed, offset: offset, count: buf.count), "bytes at \(offset)")
        }
        close(fd)
        XCTAssertEqual(m.origin.requests.filter { $0.pathWithoutQuery == "/v/film.mkv" }.map { $0.range ?? "whole" }, [],
                       "head and tail were warmed")

        XCTAssertEqual(removexattr(file, "user.httpcachefs.pin") == 0 ? 0 : errno, 0)
        XCTAssertEqual(m.engine.pinnedRanges(url: url), [])
        XCTAssertEqual(get(file, "user.httpcachefs.pinned"), .success("0"))
    }
}

extension CacheAttributesMountTests {
    func testWithoutXattrPinsSetfattrIsRefusedByTheKernelAndReadingStillWorks() throws {
        let m = try EngineMount(tree: { o in try treeFromList("film.mkv = \(o.url("/v/film.mkv"))") },
                                setup: { [size, seed] in $0.setGeneratedFile("/v/film.mkv", length: size, seed: seed) })
        defer { m.stop() }
        XCTAssertEqual(get(m.path("film.mkv"), "user.httpcachefs.pinned"), .success("0"))
        XCTAssertEqual(set(m.path("film.mkv"), "user.httpcachefs.pin", "1"), EROFS, "mount with --xattr-pins to pin with setfattr")
    }

    func testAWritableMountStillRefusesEveryWrite() throws {
        let m = try mount()
        defer { m.stop() }
        let file = m.path("films/film.mkv")
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.open(file, O_WRONLY) }, EROFS)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.open(m.path("films/new.mkv"), O_CREAT | O_WRONLY) }, EROFS)
        XCTAssertEqual(truncate(file, 0) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(unlink(file) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(mkdir(m.path("films/d"), 0o755) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(chmod(file, 0o644) == 0 ? 0 : errno, EROFS)
    }
}
