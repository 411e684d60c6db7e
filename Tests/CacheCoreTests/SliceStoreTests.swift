import XCTest
@testable import CacheCore
import TestSupport

/// The slice store: an extent carries the checksum of exactly its bytes from the writer to the
/// index, and a check reads it back against that checksum (as mountpoint-s3's `ChecksummedBytes`
/// carry theirs).
final class SliceStoreTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/media/video.mp4"
    private let slice: Int64 = 1 << 20

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-slicestore-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func extent(slice: Int64 = 2, at offset: Int64 = 2 << 20, count: Int = 100) -> ChecksummedExtent {
        let bytes = randomBytes(count, seed: 7)
        return bytes.withUnsafeBytes { ChecksummedExtent(entryID: 1, generation: 1, slice: slice, at: offset, $0) }
    }

    func testAnExtentGrowsOnlyWithBytesWrittenRightAfterItInItsSliceBelowItsLimit() {
        let x = extent()   // slice 2, bytes 2 MiB ..< 2 MiB + 100
        let table: [(slice: Int64, offset: Int64, continues: Bool, why: String)] = [
            (2, (2 << 20) + 100, true, "right after it, same slice"),
            (2, (2 << 20) + 101, false, "a gap"),
            (2, (2 << 20) + 99, false, "overlapping"),
            (3, (2 << 20) + 100, false, "another slice"),
        ]
        for row in table {
            XCTAssertEqual(x.continues(slice: row.slice, at: row.offset), row.continues, row.why)
        }
        let full = extent(count: Int(ChecksummedExtent.maxLength))
        XCTAssertFalse(full.continues(slice: 2, at: full.end), "an extent stops at 1 MiB: a damaged byte costs at most that")
    }

    func testAnExtentsChecksumIsThatOfExactlyTheBytesAppended() {
        let a = randomBytes(5000, seed: 1), b = randomBytes(3000, seed: 2)
        var x = a.withUnsafeBytes { ChecksummedExtent(entryID: 4, generation: 9, slice: 0, at: 0, $0) }
        b.withUnsafeBytes { x.append($0) }
        let row = x.row
        XCTAssertEqual(row.checksum, XXH64.hash(a + b))
        XCTAssertEqual(row.start..<row.end, 0..<8000)
        XCTAssertEqual([row.entryID, row.generation, row.slice], [4, 9, 0])
    }

    func testWrittenExtentsCheckBackAsRecordedAndADamagedByteOrALostFileDoesNot() async throws {
        let data = randomBytes(3 << 20, seed: 31)
        let source = ScriptedSource()
        source.set(url, .init(bytes: data, etag: "\"a\""))
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                                                       sliceSize: slice, readTimeout: 10, engineClock: .realTime),
                                    source: source)
        defer { cache.shutdown() }
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: data.count)
        // The transfer hands its last bytes to the writer after the read is answered: wait for it.
        cache.core.activeSinks.wait(until: { $0 == 0 })
        cache.core.writes.waitIdle()
        cache.core.index.flush()
        let store = cache.core.store
        let id = try XCTUnwrap(cache.core.commands.entryID(url: url))
        let extents = try store.extents(entryID: id, generation: info.generation)
        XCTAssertEqual(extents.reduce(Int64(0)) { $0 + $1.end - $1.start }, Int64(data.count), "every byte is in an extent")
        for x in extents {
            guard case .matches = store.check(x) else { return XCTFail("extent \(x.start)-\(x.end) should match") }
        }

        // One byte changed on disk: its extent differs, the others still match.
        let damaged = try XCTUnwrap(extents.first { $0.slice == 1 })
        let fd = try store.files.openForWriting(entry: id, generation: info.generation)
        var flipped = data[Int(damaged.start)] ^ 0xFF
        XCTAssertEqual(pwrite(fd, &flipped, 1, off_t(damaged.start)), 1)
        close(fd)
        for x in extents {
            let check = store.check(x)
            if x.start == damaged.start {
                guard case .differs = check else { return XCTFail("the damaged extent should differ, got \(check)") }
            } else {
                guard case .matches = check else { return XCTFail("extent \(x.start)-\(x.end) should still match") }
            }
        }

        // The data file gone: its extents are unreadable, never taken for zeros.
        store.removeFile(entry: id, generation: info.generation)
        guard case .unreadable = store.check(extents[0]) else { return XCTFail("a lost file's extent is unreadable") }
    }
}
