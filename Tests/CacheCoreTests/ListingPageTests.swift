import XCTest
@testable import CacheCore

/// Issue 38: a directory listing's page (nginx's autoindex: chunked, no ETag, no Last-Modified)
/// is a new version at every re-read. That is right for its bytes, but it is not "a remote file
/// changed": the log's notice, `remoteChanges` and the change observers count files only.
final class ListingPageTests: XCTestCase {
    private var dir: String!
    private let page = "http://origin.test/media/"
    private let file = "http://origin.test/media/notes.txt"

    override func setUp() { dir = NSTemporaryDirectory() + "httpcachefs-listing-\(UUID().uuidString)" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    private func open(_ cache: CacheEngine, _ url: String, listing: Bool) throws -> EntryInfo {
        let done = expectation(description: "open")
        let result = LockedValue<Result<EntryInfo, CacheError>?>(nil)
        cache.open(url: url, maxAge: 0, unknownLengthLimit: listing ? 64 << 20 : nil) { r in
            result.withLock { $0 = r }
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        return try XCTUnwrap(result.withLock { $0 }).get()
    }

    private func readWhole(_ cache: CacheEngine, _ url: String, listing: Bool) async throws -> [UInt8] {
        let info = try open(cache, url, listing: listing)
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        return try await reader.read(offset: 0, length: Int(info.length ?? 0))
    }

    func testAReReadListingPageIsNoRemoteChangeButAChangedFileIs() async throws {
        let source = ScriptedSource()
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 64 << 20, freeSpaceFloor: 0,
                                                                      readTimeout: 10), source: source)
        defer { cache.shutdown() }
        let changes = LockedValue<[String]>([])
        let fileChanged = expectation(description: "the file's change is observed")
        let file = file
        cache.onRemoteChange { info in
            changes.withLock { $0.append(info.url) }
            if info.url == file { fileChanged.fulfill() }
        }
        for body in ["<a href=\"a\">a</a>", "<a href=\"a\">a</a><a href=\"b\">b</a>", "<a href=\"c\">c</a>"] {
            source.set(page, .init(bytes: Array(body.utf8), etag: nil, ignoresRanges: true, hidesLength: true))
            let got = try await readWhole(cache, page, listing: true)
            XCTAssertEqual(String(decoding: got, as: UTF8.self), body, "each re-read is the page's new version")
        }
        // The same kind of answer for a file opened as a file: its change is one.
        for body in ["first", "second"] {
            source.set(file, .init(bytes: Array(body.utf8), etag: nil, ignoresRanges: true, hidesLength: true))
            let got = try await readWhole(cache, file, listing: false)
            XCTAssertEqual(String(decoding: got, as: UTF8.self), body)
        }
        // Observers run as jobs submitted in order; the listing's would have come first.
        await fulfillment(of: [fileChanged], timeout: 10)
        XCTAssertEqual(cache.metrics.totals.remoteChanges, 1, "the file's change, not the listing's")
        XCTAssertEqual(changes.withLock { $0 }, [file])
    }
}
