@testable import CacheCore
import Foundation
import Logging
@testable import Proxy
import TestSupport
import XCTest

/// `status.json` at library scale: the summary the page polls holds no file and stays the same
/// size however many files there are; a folder's files come a page at a time; folder totals add
/// up to the cache's; the filter narrows both; the query's mistakes are one-line 400s. And the
/// page itself in Chromium over 10k files: what is happening first, folders collapsed, one page
/// of files, nothing wider than a phone.
final class StatusViewsTests: XCTestCase {
    /// An origin in memory that answers every URL at once with `length` bytes: fills a cache of
    /// thousands of files in a moment, with no socket.
    final class InstantSource: RangeSource, @unchecked Sendable {
        static let length: Int64 = 1000
        let queue = DispatchQueue(label: "instant", attributes: .concurrent)
        final class Handle: FetchHandle, @unchecked Sendable { func cancel() {} }

        func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
            queue.async {
                if request.url.contains("/missing") { return sink.fetchDidFinish(.http(status: 404, url: request.url)) }
                let len = Self.length, start = request.start, end = min(request.end ?? len, len)
                let head = ResponseHead(status: 206, finalURL: request.url, bodyStart: start, totalLength: len,
                                        contentType: "video/mp4", etag: "\"e\"", lastModified: nil, acceptsRanges: true)
                guard sink.fetchDidReceiveHead(head) else { return sink.fetchDidFinish(.cancelled) }
                let bytes = [UInt8](repeating: 7, count: Int(max(0, end - start)))
                _ = bytes.withUnsafeBytes { sink.fetchDidReceive($0) }
                sink.fetchDidFinish(nil)
            }
            return Handle()
        }
    }

    /// An engine over `InstantSource` holding the URLs `paths` of one origin, each fully cached.
    final class Library {
        let directory = TemporaryDirectory(prefix: "httpcachefs-status-views")
        let source = InstantSource()
        let engine: CacheEngine
        static let origin = "http://media.example"

        init(paths: [String]) async throws {
            var logger = Logger(label: "status-views")
            logger.logLevel = .critical
            engine = try CacheEngine(configuration: CacheConfiguration(directory: directory.path, freeSpaceFloor: 0, engineClock: .realTime), source: source,
                                     logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                var next = 0
                func add() {
                    let url = Self.origin + paths[next]
                    group.addTask { [engine] in _ = try await engine.open(url: url) }
                    next += 1
                }
                while next < paths.count && next < 64 { add() }
                while try await group.next() != nil { if next < paths.count { add() } }
            }
            engine.core.writes.waitIdle()
        }

        func close() {
            engine.shutdown()
            directory.remove()
        }
    }

    /// `files` files spread over `folders` folders (`/show03/e0042.mkv`).
    static func paths(files: Int, folders: Int) -> [String] {
        (0..<files).map { String(format: "/show%02d/e%04d.mkv", $0 % folders, $0 / folders) }
    }

    func testTheSummaryHoldsNoFileAndKeepsItsSizeAsTheFilesGrow() async throws {
        var sizes: [Int] = []
        for files in [300, 3000] {
            let library = try await Library(paths: Self.paths(files: files, folders: 3))
            defer { library.close() }
            let summary = library.engine.statusDocument(version: "test", showDirectory: false, view: .summary(filter: ""))
            XCTAssertEqual(summary.files, [])
            XCTAssertEqual(summary.cache.files, files)
            XCTAssertEqual(summary.folders?.map(\.path), ["/show00/", "/show01/", "/show02/"])
            sizes.append(summary.encoded().count)
        }
        // Only digits grow (1000 files where there were 100): a few bytes per figure.
        XCTAssertLessThan(abs(sizes[1] - sizes[0]), 100, "summary sizes \(sizes)")
    }

    func testFolderTotalsAddUpToTheCacheAndToTheirFiles() async throws {
        let library = try await Library(paths: Self.paths(files: 700, folders: 7) + ["/show00/"])
        defer { library.close() }
        let summary = library.engine.statusDocument(version: "test", showDirectory: false, view: .summary(filter: ""))
        let full = library.engine.statusDocument(version: "test", showDirectory: false)
        let folders = try XCTUnwrap(summary.folders)
        XCTAssertEqual(summary.foldersTotal, 7)
        XCTAssertEqual(folders.reduce(0) { $0 + $1.files + $1.listings }, summary.cache.files)
        XCTAssertEqual(folders.reduce(0) { $0 + $1.cachedBytes }, summary.cache.usedBytes)
        XCTAssertEqual(folders.first?.listings, 1, "the URL ending in / is a listing of /show00/")
        for folder in folders {
            let mine = full.files.filter { $0.folder == folder.path }
            XCTAssertEqual(folder.files + folder.listings, mine.count, folder.path)
            XCTAssertEqual(folder.cachedBytes, mine.reduce(0) { $0 + $1.cachedBytes }, folder.path)
            XCTAssertEqual(folder.lengthBytes, mine.reduce(0) { $0 + ($1.length ?? 0) }, folder.path)
            XCTAssertEqual(folder.origin, Library.origin)
        }
    }

    func testAFolderComesAPageAtATimeEachFileOnce() async throws {
        let library = try await Library(paths: Self.paths(files: 250, folders: 1))
        defer { library.close() }
        let id = try XCTUnwrap(library.engine.statusDocument(version: "test", showDirectory: false, view: .summary(filter: "")).folders?.first?.id)
        var seen: [String] = []
        for page in 0..<4 {
            let doc = library.engine.statusDocument(version: "test", showDirectory: false,
                                                    view: .folder(id: id, page: page, pageSize: 100, filter: "", order: .name))
            let p = try XCTUnwrap(doc.page)
            XCTAssertEqual([p.page, p.pageSize, p.matching, p.pages], [page, 100, 250, 3])
            XCTAssertEqual(doc.files.count, [100, 100, 50, 0][page], "page \(page)")
            seen += doc.files.map(\.name)
        }
        XCTAssertEqual(seen, (0..<250).map { String(format: "e%04d.mkv", $0) }, "in name order, each once")
        let missing = library.engine.statusDocument(version: "test", showDirectory: false,
                                                    view: .folder(id: "0123456789abcdef", page: 0, pageSize: 100, filter: "", order: .name))
        XCTAssertNil(missing.page)
        XCTAssertEqual(missing.files, [])
    }

    func testTheFilterNarrowsFoldersAndPagesCaseInsensitively() async throws {
        let library = try await Library(paths: Self.paths(files: 300, folders: 3) + ["/extras/Trailer%20One.mkv"])
        defer { library.close() }
        let engine = library.engine
        let summary = engine.statusDocument(version: "test", showDirectory: false, view: .summary(filter: "E001"))
        // e0010..e0019 in each of three folders; e0001 is not "e001" followed by anything but 1.
        XCTAssertEqual(summary.folders?.map(\.files), [10, 10, 10])
        XCTAssertEqual(summary.filter, "E001")
        let id = try XCTUnwrap(summary.folders?.first?.id)
        let page = engine.statusDocument(version: "test", showDirectory: false, view: .folder(id: id, page: 0, pageSize: 100, filter: "e001", order: .name))
        XCTAssertEqual(page.files.map(\.name), (10..<20).map { String(format: "e%04d.mkv", $0) })
        // The decoded name matches as well as the URL.
        XCTAssertEqual(engine.statusDocument(version: "test", showDirectory: false, view: .summary(filter: "trailer one")).folders?.map(\.path), ["/extras/"])
        XCTAssertEqual(engine.statusDocument(version: "test", showDirectory: false, view: .summary(filter: "nothing like it")).folders, [])
    }

    func testADeepLinkFindsThePageOfItsFolderThatHoldsTheFile() async throws {
        let library = try await Library(paths: Self.paths(files: 250, folders: 1))
        defer { library.close() }
        let url = Library.origin + "/show00/e0123.mkv"
        let doc = library.engine.statusDocument(version: "test", showDirectory: false, view: .locate(url: url, pageSize: 100, order: .name))
        XCTAssertEqual(doc.page?.page, 1)
        XCTAssertTrue(doc.files.contains { $0.url == url })
    }

    func testASummaryListsAtMostTheFolderLimitAndCountsTheRest() async throws {
        let folders = StatusView.folderLimit + 20
        let library = try await Library(paths: Self.paths(files: folders, folders: folders))
        defer { library.close() }
        let summary = library.engine.statusDocument(version: "test", showDirectory: false, view: .summary(filter: ""))
        XCTAssertEqual(summary.folders?.count, StatusView.folderLimit)
        XCTAssertEqual(summary.foldersTotal, folders)
    }

    /// Each form of the query, and each mistake with its one line.
    func testTheQueryNamesTheView() {
        let table: [(String, Result<StatusView, StatusDocumentQuery.QueryError>)] = [
            ("/.httpcachefs/status.json", .success(.full)),
            ("/.httpcachefs/status.json?", .success(.full)),
            ("/.httpcachefs/status.json?view=full", .success(.full)),
            ("/.httpcachefs/status.json?view=summary", .success(.summary(filter: ""))),
            ("/.httpcachefs/status.json?view=summary&filter=Big+Buck%20Bunny", .success(.summary(filter: "Big Buck Bunny"))),
            ("/.httpcachefs/status.json?folder=ab12&page=3&per=50&order=size&filter=x",
             .success(.folder(id: "ab12", page: 3, pageSize: 50, filter: "x", order: .size))),
            ("/.httpcachefs/status.json?folder=ab12", .success(.folder(id: "ab12", page: 0, pageSize: 100, filter: "", order: .name))),
            ("/.httpcachefs/status.json?url=http%3A%2F%2Fh%2Fa%3Fb%3D1", .success(.locate(url: "http://h/a?b=1", pageSize: 100, order: .name))),
            ("/.httpcachefs/status.json?view=all", .failure(.init("view=all is not 'summary', 'full' or 'unsaved'"))),
            ("/.httpcachefs/status.json?view=unsaved", .success(.unsaved)),
            ("/.httpcachefs/status.json?folder=a&page=-1", .failure(.init("page=-1 is not a page number (0 or more)"))),
            ("/.httpcachefs/status.json?folder=a&page=two", .failure(.init("page=two is not a page number (0 or more)"))),
            ("/.httpcachefs/status.json?folder=a&per=0", .failure(.init("per=0 is not a number of files from 1 to 1000"))),
            ("/.httpcachefs/status.json?folder=a&order=newest", .failure(.init("order=newest is not one of name, size, cached, access"))),
        ]
        for (target, expected) in table {
            XCTAssertEqual(StatusDocumentQuery.view(target: target), expected, target)
        }
    }

    /// Over a real proxy: the views answer, the full document stays what it was, mistakes are
    /// 400 and a folder that is gone 404, each with one line.
    func testTheProxyAnswersEachView() async throws {
        let library = try await Library(paths: Self.paths(files: 120, folders: 2))
        defer { library.close() }
        let configuration = ProxyConfiguration(port: 0)
        let server = ProxyServer(engine: library.engine, configuration: configuration, logger: Logger(label: "status-views"))
        let port = try server.start()
        defer { server.stop() }
        func get(_ target: String) throws -> RawHTTP.Response {
            try RawHTTP.request(port: port, path: target, headers: [(ControlRequest.keyHeader, configuration.controlKey)], timeout: 20)
        }

        let full = try StatusDocument.decode(try get("/.httpcachefs/status.json").body)
        XCTAssertEqual(full.files.count, 120)
        XCTAssertNil(full.view)
        let summary = try StatusDocument.decode(try get("/.httpcachefs/status.json?view=summary").body)
        XCTAssertEqual(summary.files.count, 0)
        let id = try XCTUnwrap(summary.folders?.first?.id)
        let page = try StatusDocument.decode(try get("/.httpcachefs/status.json?folder=\(id)&page=1&per=50").body)
        XCTAssertEqual(page.files.count, 10)
        XCTAssertTrue(page.files.allSatisfy { $0.proxyPath?.hasPrefix("/") == true }, "each file of a page has its proxy URL")
        let bad = try get("/.httpcachefs/status.json?folder=\(id)&page=x")
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(String(decoding: bad.body, as: UTF8.self).filter { $0 == "\n" }.count, 1)
        XCTAssertEqual(try get("/.httpcachefs/status.json?folder=0000000000000000").status, 404)
    }
}
