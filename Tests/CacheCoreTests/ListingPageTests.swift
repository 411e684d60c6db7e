import XCTest
@testable import CacheCore
import TestSupport

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
                                                                      readTimeout: 10, engineClock: .realTime), source: source)
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

    /// A page sent whole with a length but no ETag and no Last-Modified (the origin ignores
    /// ranges), changed to another page of the same length: nothing in the answer's head tells
    /// the versions apart, so the revalidation was taken as the same version, the whole body's
    /// bytes were dropped as "cached already", and `refresh` served the old page. Asked again
    /// with max-age 0, such a page is read anew: the new page, whole, never the old or a mix.
    func testAPageWithALengthButNoValidatorsIsReadAnewEvenAtTheSameLength() async throws {
        let source = ScriptedSource()
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 64 << 20, freeSpaceFloor: 0,
                                                                      readTimeout: 10, engineClock: .realTime), source: source)
        defer { cache.shutdown() }
        for body in ["<a href=\"a\">a</a>", "<a href=\"b\">b</a>", "<a href=\"b\">b</a>", "<a href=\"c\">c</a><a href=\"d\">d</a>", "<a href=\"e\">e</a>"] {
            source.set(page, .init(bytes: Array(body.utf8), etag: nil, ignoresRanges: true))
            let got = try await readWhole(cache, page, listing: true)
            XCTAssertEqual(String(decoding: got, as: UTF8.self), body, "the page the origin sends now")
        }
    }

    /// The race behind `refresh` keeping an old listing: the page's first probe, whose head had
    /// answered its open, was still streaming the page (to its end) when the refresh's open
    /// (max-age 0) started a probe of its own; the older one's end answered the refresh's open
    /// with the version it knew, and the refresh read the old page. The refresh's open is
    /// answered by its own probe: the page the origin sends now. (The source holds the first
    /// transfer's end until the second request is made, and the second answer until then.)
    func testARefreshIsAnsweredByItsOwnProbeNotByAnEarlierTransferThatEnds() async throws {
        let source = EndHeldSource(page: Array("<a href=\"a\">a</a>".utf8))
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 64 << 20, freeSpaceFloor: 0,
                                                                      readTimeout: 10, engineClock: .realTime), source: source)
        defer { cache.shutdown() }
        let first = try await readWhole(cache, page, listing: true)
        XCTAssertEqual(String(decoding: first, as: UTF8.self), "<a href=\"a\">a</a>")
        source.setPage(Array("<a href=\"b\">b</a><a href=\"c\">c</a>".utf8))
        let second = try await readWhole(cache, page, listing: true)
        XCTAssertEqual(String(decoding: second, as: UTF8.self), "<a href=\"b\">b</a><a href=\"c\">c</a>", "the refresh reads the new page")
        XCTAssertEqual(source.requestCount, 2)
    }
}

/// A page sent whole, with a length and no validators, by a script: the first transfer delivers
/// its head and body at once but ends only once the second request is made; the second answers
/// only after the first ended. Later requests are answered at once.
private final class EndHeldSource: RangeSource, @unchecked Sendable {
    private let lock = NSLock()
    private var page: [UInt8]
    private var requests = 0
    private let secondAsked = DispatchSemaphore(value: 0)
    private let firstEnded = DispatchSemaphore(value: 0)

    init(page: [UInt8]) { self.page = page }

    func setPage(_ bytes: [UInt8]) { lock.lock(); page = bytes; lock.unlock() }
    var requestCount: Int { lock.lock(); defer { lock.unlock() }; return requests }

    func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        lock.lock()
        requests += 1
        let n = requests, bytes = page
        lock.unlock()
        if n == 2 { secondAsked.signal() }
        DispatchQueue.global().async { [self] in
            if n == 2 { firstEnded.wait() }
            defer { if n == 1 { firstEnded.signal() } }
            let head = ResponseHead(status: 200, finalURL: request.url, bodyStart: 0, totalLength: Int64(bytes.count),
                                    contentType: "text/html", etag: nil, lastModified: nil, acceptsRanges: false)
            guard sink.fetchDidReceiveHead(head) else {
                if n == 1 { secondAsked.wait() }
                return sink.fetchDidFinish(.cancelled)
            }
            let ok = bytes.withUnsafeBytes { sink.fetchDidReceive($0) }
            if n == 1 { secondAsked.wait() }
            sink.fetchDidFinish(ok ? nil : .cancelled)
        }
        return ScriptedSource.Handle()
    }
}
