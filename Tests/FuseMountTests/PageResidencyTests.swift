import Atomics
@testable import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Whether a reply spliced from data files can be sent where its read was answered: only when
/// every page it reads is in memory.
final class PageResidencyTests: XCTestCase {
    func testARangeTouchesEveryPageFromItsFirstByteToItsLast() {
        XCTAssertEqual(PageResidency.pages(offset: 0, count: 4096, pageSize: 4096), 1)
        XCTAssertEqual(PageResidency.pages(offset: 1, count: 4096, pageSize: 4096), 2, "one byte into the next page")
        XCTAssertEqual(PageResidency.pages(offset: 4095, count: 2, pageSize: 4096), 2)
        XCTAssertEqual(PageResidency.pages(offset: 8192, count: 1 << 20, pageSize: 4096), 256)
        XCTAssertEqual(PageResidency.pages(offset: 100, count: 0, pageSize: 4096), 0)
    }

    func testAReplyIsInMemoryOnlyWhenEveryPieceOfADataFileIs() {
        let pieces: [ReadLease.Piece] = [.memory([1, 2, 3]), .file(fd: 7, offset: 0, count: 8192), .file(fd: 8, offset: 4096, count: 4096)]
        XCTAssertTrue(PageResidency.inMemory(pieces, cachedPages: { _, _, count in Int64(count / 4096) }))
        XCTAssertFalse(PageResidency.inMemory(pieces, cachedPages: { fd, _, count in fd == 8 ? 0 : Int64(count / 4096) }),
                       "one page of the second file on disk only")
        XCTAssertFalse(PageResidency.inMemory(pieces, cachedPages: { _, _, _ in -1 }), "a kernel that cannot say (before 6.5)")
        XCTAssertTrue(PageResidency.inMemory([.memory([1])], cachedPages: { _, _, _ in XCTFail("no file to ask about"); return -1 }))
    }

    func testTheLoopSendsAHitInMemoryOnlyWhileFewFilesAreOpen() {
        let few = SpliceSender.filesSentOnLoop, many = SpliceSender.filesSentOnLoop + 1
        let rows: [(onLoop: Bool, onPool: Bool, filesOpen: Int, inMemory: Bool, sender: SpliceSender, why: String)] = [
            (true, false, 1, true, .inPlace, "one player, its pages in memory"),
            (true, false, few, true, .inPlace, "a few players"),
            (true, false, many, true, .lane, "many readers: their copies side by side on the lane"),
            (true, false, 1, false, .lane, "a page on disk only: the loop never waits for the disk"),
            (false, true, many, false, .inPlace, "a job that answered a waiting read sends it on its own thread"),
            (false, false, 1, true, .lane, "another thread (the curl loop) hands it to the lane"),
        ]
        for row in rows {
            XCTAssertEqual(SpliceSender.choose(onLoop: row.onLoop, filesOpen: row.filesOpen,
                                               inMemory: { row.inMemory }, onPool: { row.onPool }), row.sender, row.why)
        }
        XCTAssertEqual(SpliceSender.choose(onLoop: true, filesOpen: many,
                                           inMemory: { XCTFail("no cachestat when the answer is the lane anyway"); return true },
                                           onPool: { XCTFail("the loop is no pool thread"); return false }), .lane)
    }

    func testTheKernelCountsAFileJustWrittenAsInMemory() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("residency-\(getpid())").path
        defer { unlink(path) }
        let fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let bytes = [UInt8](repeating: 9, count: 1 << 20)
        XCTAssertEqual(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }, 1 << 20)
        let cached = PageResidency.cached(fd, 0, 1 << 20)
        try XCTSkipIf(cached < 0, "LOUD SKIP: this kernel has no cachestat (Linux 6.5): every spliced reply goes to the disk lane")
        XCTAssertEqual(cached, PageResidency.pages(offset: 0, count: 1 << 20))
        XCTAssertTrue(PageResidency.inMemory([.file(fd: fd, offset: 4096, count: 100_000)]))
    }
}

/// Through a real mount without passthrough: a warm read whose data file is in memory is sent by
/// the FUSE loop itself, with its bytes exact.
final class PageResidencyMountTests: XCTestCase {
    func testAWarmReadWhoseDataFileIsInMemoryIsSentByTheLoopWithItsBytesExact() throws {
        let length: Int64 = 8 << 20
        var options = MountOptions(readDeadline: nil)
        options.passthrough = false
        options.dataFileReadAhead = 0
        let m = try EngineMount(tree: { o in try treeFromList("v.bin = \(o.url("/v.bin"))") }, options: options,
                                setup: { o in o.setGeneratedFile("/v.bin", length: length, seed: 91) })
        defer { m.stop() }
        let expected = OriginServer.generatedBytes(seed: 91, offset: 0, count: Int(length))
        XCTAssertTrue(try withinBound(120, "cold read") { try POSIX.readAll(m.path("v.bin")) } == expected)
        XCTAssertTrue(m.engine.waitUntilCached(url: m.origin.url("/v.bin"), bytes: length), "v.bin cached")
        try XCTSkipIf(!kernelHasCachestat(),
                      "LOUD SKIP: this kernel has no cachestat (Linux 6.5): every spliced reply goes to the disk lane")
        // The kernel's copy of the mounted file dropped: every read comes to the daemon, whose
        // data file was just written and is in memory.
        let fd = try POSIX.open(m.path("v.bin"))
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
        m.origin.resetLog()
        let spliced = m.mount.fs.session.repliesSpliced
        let inPlace = spliced.sentInPlace.load(ordering: .relaxed)
        let byLane = spliced.sentByLane.load(ordering: .relaxed)
        let bytes = try withinBound(120, "warm read") { try POSIX.readAll(m.path("v.bin"), chunk: 128 << 10) }
        XCTAssertTrue(bytes == expected, "bytes differ from the origin's")
        XCTAssertGreaterThan(spliced.sentInPlace.load(ordering: .relaxed), inPlace, "the loop sent the warm replies")
        XCTAssertEqual(spliced.sentByLane.load(ordering: .relaxed), byLane, "none waited for the disk lane")
        XCTAssertEqual(m.origin.bytesServed(path: "/v.bin"), 0, "all from the cache")
    }
}

/// cachestat(2) answers on this kernel (Linux 6.5 and later).
func kernelHasCachestat() -> Bool {
    let fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return PageResidency.cached(fd, 0, 1) >= 0
}
