@testable import CacheCore
import Foundation
import XCTest

/// `cache ls` reads the index a page at a time (`CacheSnapshotPages`): over an index of more
/// entries than a page, the pages hold every entry once, in URL order, with the bytes of its
/// current version only, and the last page says it is the last.
final class CacheSnapshotPagesTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "httpcachefs-pages-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func row(_ id: Int64, url: String, key: String, generation: Int64 = 2) -> CacheIndex.EntryRow {
        CacheIndex.EntryRow(id: id, key: key, url: url, finalURL: url, length: 1000, contentType: nil, etag: nil,
                            lastModified: nil, acceptsRanges: true, generation: generation, validatedAt: 0, lastAccess: 0,
                            hits: id, misses: 0, bytesFromCache: 0, bytesFromOrigin: 0, lastError: nil)
    }

    /// 23 entries written in an order unlike their URLs', two of them with one URL (different
    /// keys): each with 10 × id bytes of its current version and 500 of an older one.
    private func writeIndex() throws -> [(url: String, id: Int64)] {
        let index = try CacheIndex(path: dir + "/index.sqlite")
        var written: [(url: String, id: Int64)] = []
        for id in Int64(1)...23 {
            let url = id == 23 ? "http://h/f07" : String(format: "http://h/f%02d", (id * 7) % 23)
            index.updateEntry(row(id, url: url, key: "k\(id)"))
            index.addExtent(.init(entryID: id, generation: 2, slice: 0, start: 0, end: 10 * id, checksum: 0))
            index.addExtent(.init(entryID: id, generation: 1, slice: 0, start: 0, end: 500, checksum: 0))
            written.append((url, id))
        }
        index.flush()
        try index.close()
        return written.sorted { ($0.url, $0.id) < ($1.url, $1.id) }
    }

    func testPagesHoldEveryEntryOnceInURLOrder() throws {
        let expected = try writeIndex()
        let pages = try XCTUnwrap(CacheSnapshotPages(configuration: CacheConfiguration(directory: dir, engineClock: .realTime)), "a migrated index pages")
        var seen: [EntryStatus] = []
        var cursor: CacheSnapshotPages.Cursor?
        var pageSizes: [Int] = []
        repeat {
            let page = try pages.page(after: cursor, limit: 5)
            pageSizes.append(page.entries.count)
            seen += page.entries
            cursor = page.next
        } while cursor != nil
        XCTAssertEqual(seen.map(\.info.url), expected.map(\.url))
        XCTAssertEqual(seen.map(\.hits), expected.map(\.id), "the two entries of one URL both listed, by id")
        XCTAssertEqual(seen.map(\.cachedBytes), expected.map { 10 * $0.id }, "only the current version's bytes")
        XCTAssertEqual(pageSizes, [5, 5, 5, 5, 3])
    }

    func testAnIndexOfExactlyPagesEndsWithAnEmptyPage() throws {
        _ = try writeIndex()
        let pages = try XCTUnwrap(CacheSnapshotPages(configuration: CacheConfiguration(directory: dir, engineClock: .realTime)))
        let first = try pages.page(after: nil, limit: 23)
        XCTAssertEqual(first.entries.count, 23)
        let last = try pages.page(after: first.next, limit: 23)
        XCTAssertEqual(last.entries.count, 0)
        XCTAssertNil(last.next)
    }

    func testACacheWithoutAnIndexIsNotPaged() throws {
        XCTAssertNil(try CacheSnapshotPages(configuration: CacheConfiguration(directory: dir, engineClock: .realTime)))
    }
}
