import CacheCore
import Foundation
import Glibc
import XCTest
@testable import FuseMount

/// The FUSE layer against an in-memory backend: every kernel-facing behaviour that does not
/// depend on the real cache (names, attributes, errors, handles, listings, reload, unmount).
final class FusePlumbingTests: XCTestCase {
    let backend = FakeBackend()

    private func spec(_ lines: String, byURL: Bool = false, indexes: [String] = []) throws -> MountTreeSpec {
        try MountTreeSpec.build(urlList: try URLListParser.parse(lines), indexes: try indexes.map(MountTreeSpec.parseIndex), byURL: byURL)
    }

    func testFilesAndDirectoriesFromAURLListReadByteExact() throws {
        let a = testBytes(count: 3_000_000, seed: 1)
        backend.setFile("http://o/a.bin", a)
        backend.setFile("http://o/b.bin", testBytes(count: 10, seed: 2))
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/a.bin\nsub/dir/b.bin = http://o/b.bin\n"))
        defer { mount.stop() }

        XCTAssertEqual(try POSIX.list(mount.mountpoint), ["a.bin", "sub"])
        XCTAssertEqual(try POSIX.list(mount.path("sub/dir")), ["b.bin"])
        let st = try POSIX.stat(mount.path("a.bin"))
        XCTAssertEqual(st.st_size, 3_000_000)
        XCTAssertEqual(st.st_mode & 0o7777, 0o444)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFREG)
        XCTAssertEqual(st.st_mtim.tv_sec, 1_704_067_200, "mtime is the Last-Modified date")
        XCTAssertEqual(try POSIX.stat(mount.path("sub")).st_mode & 0o7777, 0o555)
        XCTAssertEqual(st.st_blksize, 1 << 20, "a film is read in chunks of 1 MiB")
        XCTAssertEqual(try POSIX.stat(mount.path("sub/dir/b.bin")).st_blksize, 4096, "a small file asks for no large buffer")
        XCTAssertEqual(try POSIX.readAll(mount.path("a.bin")), a)
        XCTAssertEqual(try POSIX.readAll(mount.path("sub/dir/b.bin")), testBytes(count: 10, seed: 2))
    }

    func testReadsAreAsLargeAsTheSplicePipeAllows() throws {
        backend.setFile("http://o/a.bin", testBytes(count: 8 << 20))
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/a.bin"))
        defer { mount.stop() }
        _ = try POSIX.readAll(mount.path("a.bin"), chunk: 4 << 20)
        let largest = backend.readLog.map(\.length).max() ?? 0
        XCTAssertEqual(largest, MountOptions.defaultMaxRead,
                       "the kernel should send reads of 1 MiB less 32 KiB: \(backend.readLog.map(\.length))")
    }

    func testAReplyOfFilePiecesAroundMemoryIsByteExact() throws {
        backend.mixedLeases = true
        let bytes = testBytes(count: 5 << 20, seed: 9)
        backend.setFile("http://o/a.bin", bytes)
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/a.bin"))
        defer { mount.stop() }
        XCTAssertEqual(try POSIX.readAll(mount.path("a.bin"), chunk: 1 << 20), bytes)
        XCTAssertGreaterThan(backend.readLog.count, 5, "many replies, each of three pieces")
    }

    func testEveryWriteTypeOperationIsReadOnly() throws {
        backend.setFile("http://o/a.bin", [1, 2, 3])
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/a.bin"))
        defer { mount.stop() }
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.open(mount.path("a.bin"), O_WRONLY) }, EROFS)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.open(mount.path("new.bin"), O_CREAT | O_WRONLY) }, EROFS)
        XCTAssertEqual(mkdir(mount.path("d"), 0o755) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(unlink(mount.path("a.bin")) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(rename(mount.path("a.bin"), mount.path("b.bin")) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(truncate(mount.path("a.bin"), 0) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(chmod(mount.path("a.bin"), 0o644) == 0 ? 0 : errno, EROFS)
        XCTAssertEqual(symlink("a.bin", mount.path("l")) == 0 ? 0 : errno, EROFS)
    }

    func testHTTPErrorsBecomeENOENTAndEACCES() throws {
        backend.setError("http://o/gone.bin", .notFound(url: "http://o/gone.bin", status: 410))
        backend.setError("http://o/secret.bin", .forbidden(url: "http://o/secret.bin", status: 403))
        backend.setError("http://o/broken.bin", .httpStatus(url: "http://o/broken.bin", status: 503))
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/gone.bin\nhttp://o/secret.bin\nhttp://o/broken.bin\n"))
        defer { mount.stop() }
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("gone.bin")) }, ENOENT)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("secret.bin")) }, EACCES)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("broken.bin")) }, EIO)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(mount.path("never-listed.bin")) }, ENOENT)
    }

    func testAReadThatNeverCompletesFailsWithEIOAtTheDeadline() throws {
        backend.setFile("http://o/slow.bin", testBytes(count: 100))
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/slow.bin"),
                                       options: MountOptions(readDeadline: 1), logLevel: .critical)
        defer { mount.stop() }
        let fd = try POSIX.open(mount.path("slow.bin"))
        defer { close(fd) }
        backend.setSilent("http://o/slow.bin")
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.pread(fd, offset: 0, count: 10) }, EIO)
    }

    func testStatfsReportsTheCacheCapacityAndUse() throws {
        backend.capacity = 10 << 30
        let mount = try InProcessMount(backend: backend, tree: MountTreeSpec())
        defer { mount.stop() }
        var st = statvfs()
        XCTAssertEqual(statvfs(mount.mountpoint, &st), 0)
        XCTAssertEqual(UInt64(st.f_blocks) * UInt64(st.f_frsize), 10 << 30)
        XCTAssertEqual((UInt64(st.f_blocks) - UInt64(st.f_bfree)) * UInt64(st.f_frsize), 1 << 20)
    }

    func testReleasingAFileClosesItsReader() throws {
        backend.setFile("http://o/a.bin", testBytes(count: 100))
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/a.bin"))
        defer { mount.stop() }
        let fd = try POSIX.open(mount.path("a.bin"))
        XCTAssertEqual(mount.fs.core.openFileCount, 1)
        close(fd)
        // release is asynchronous in the kernel; unmounting waits for nothing but the fs's own state.
        mount.stop()
        XCTAssertEqual(backend.closedReaderCount, 1)
    }

    /// The mount command awaits its loop's end without holding a thread: `ended()` resumes once
    /// the loop has returned, whether it was asked while the loop ran or after.
    func testEndedResumesOnceTheLoopHasReturned() async throws {
        backend.setFile("http://o/a.bin", testBytes(count: 100))
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/a.bin"))
        let fs = mount.fs
        async let before = fs.ended()
        fs.unmount()
        let error = await before
        XCTAssertNil(error, "an unmount is no error")
        XCTAssertFalse(fs.isRunning)
        let after = await fs.ended()
        XCTAssertNil(after)
        mount.stop()
    }

    func testUnmountWithAFileOpenStillEndsTheLoop() throws {
        backend.setFile("http://o/a.bin", testBytes(count: 100))
        let mount = try InProcessMount(backend: backend, tree: try spec("http://o/a.bin"))
        let fd = try POSIX.open(mount.path("a.bin"))
        defer { close(fd) }
        mount.fs.unmount()
        mount.fs.wait()
        XCTAssertFalse(Mountpoint.isMounted(mount.mountpoint))
        XCTAssertEqual(backend.closedReaderCount, 1)
        mount.stop()
    }
}
