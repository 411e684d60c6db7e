import CacheCore
import XCTest
@testable import FuseMount
import TestSupport

/// WebDAV multistatus answers as servers write them (nginx dav_ext, Apache mod_dav's default
/// namespace, odd prefixes), and hostile ones.
final class WebDAVListingTests: XCTestCase {
    let base = "http://dav.example/media/"

    func parse(_ xml: String, url: String? = nil) throws -> [ListingEntry] {
        try WebDAVListing.parse(Array(xml.utf8), url: url ?? base)
    }

    static func response(_ href: String, collection: Bool = false, length: Int64? = nil,
                         modified: String? = nil, prefix p: String = "D") -> String {
        var props = collection ? "<\(p):resourcetype><\(p):collection/></\(p):resourcetype>" : "<\(p):resourcetype/>"
        if let length { props += "<\(p):getcontentlength>\(length)</\(p):getcontentlength>" }
        if let modified { props += "<\(p):getlastmodified>\(modified)</\(p):getlastmodified>" }
        return "<\(p):response><\(p):href>\(href)</\(p):href><\(p):propstat><\(p):prop>\(props)</\(p):prop><\(p):status>HTTP/1.1 200 OK</\(p):status></\(p):propstat></\(p):response>"
    }

    static func multistatus(_ responses: [String], prefix p: String = "D") -> String {
        "<?xml version=\"1.0\" encoding=\"utf-8\" ?>\n<\(p):multistatus xmlns:\(p)=\"DAV:\">\(responses.joined())</\(p):multistatus>"
    }

    func testFilesAndFoldersWithSizesAndDatesExceptTheFolderItself() throws {
        let entries = try parse(Self.multistatus([
            Self.response("/media/", collection: true, modified: "Mon, 23 Nov 2026 10:00:00 GMT"),
            Self.response("/media/Film%20One.mkv", length: 1_234_567, modified: "Sun, 22 Nov 2026 09:30:00 GMT"),
            Self.response("/media/Shows/", collection: true, modified: "Sat, 21 Nov 2026 08:00:00 GMT"),
        ]))
        XCTAssertEqual(entries.map(\.name), ["Film One.mkv", "Shows"])
        XCTAssertEqual(entries[0], ListingEntry(name: "Film One.mkv", isDirectory: false, url: base + "Film%20One.mkv",
                                                size: 1_234_567, modified: HTTPDate.parse("Sun, 22 Nov 2026 09:30:00 GMT")))
        XCTAssertEqual(entries[1].url, base + "Shows/")
        XCTAssertTrue(entries[1].isDirectory)
        XCTAssertNil(entries[1].size)
    }

    func testAnyPrefixOrTheDefaultNamespaceCountsAndOtherNamespacesDoNot() throws {
        let odd = try parse(Self.multistatus([Self.response("/media/a.mp4", length: 10, prefix: "lp1")], prefix: "lp1"))
        XCTAssertEqual(odd.map(\.size), [10])
        let xml = """
            <multistatus xmlns="DAV:" xmlns:z="urn:other"><response><href>/media/b.mp4</href>
            <propstat><prop><z:getcontentlength>99</z:getcontentlength><getcontentlength>20</getcontentlength>
            <z:resourcetype><z:collection/></z:resourcetype></prop><status>HTTP/1.1 200 OK</status></propstat></response></multistatus>
            """
        let entries = try parse(xml)
        XCTAssertEqual(entries, [ListingEntry(name: "b.mp4", isDirectory: false, url: base + "b.mp4", size: 20)])
        // The right local names in no namespace are no multistatus.
        XCTAssertThrowsError(try parse("<multistatus><response><href>/media/c</href></response></multistatus>"))
    }

    func testPropertiesOfAPropstat404AreIgnored() throws {
        let xml = Self.multistatus(["""
            <D:response><D:href>/media/x.mkv</D:href>
            <D:propstat><D:prop><D:resourcetype/></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>
            <D:propstat><D:prop><D:getcontentlength>5</D:getcontentlength><D:getlastmodified>Sun, 22 Nov 2026 09:30:00 GMT</D:getlastmodified></D:prop>
            <D:status>HTTP/1.1 404 Not Found</D:status></D:propstat></D:response>
            """])
        let entries = try parse(xml)
        XCTAssertEqual(entries, [ListingEntry(name: "x.mkv", isDirectory: false, url: base + "x.mkv")])
    }

    func testNestedFolderHrefsWithoutSlashAndFullURLs() throws {
        let entries = try parse(Self.multistatus([
            Self.response("http://dav.example/media/Season%201", collection: true),
            Self.response("/media/Season%201/e01.mkv", length: 3),  // a grandchild (Depth: infinity answers)
            Self.response("http://other.example/media/evil.mkv", length: 1),
            Self.response("/elsewhere/f.mkv", length: 1),
            Self.response("/media/../etc/passwd", length: 1),
            Self.response("/media/q.mkv?x=1", length: 1),
        ]))
        XCTAssertEqual(entries, [ListingEntry(name: "Season 1", isDirectory: true, url: base + "Season%201/")])
    }

    func testPercentEncodingEitherWay() throws {
        let entries = try parse(Self.multistatus([
            Self.response("/media/caf%C3%A9%20%26%20bar.mkv", length: 1),
            Self.response("/media/naïve film.mp4", length: 2),
            Self.response("/media/a&amp;b.mp4", length: 3),
        ]))
        XCTAssertEqual(entries.map(\.name), ["café & bar.mkv", "naïve film.mp4", "a&b.mp4"])
        XCTAssertEqual(entries[1].url, base + "na%C3%AFve%20film.mp4")
    }

    func testHostileInputIsRefusedOrSkipped() throws {
        // A DTD (where entities live) is refused before parsing: nothing is ever expanded.
        let laughs = """
            <?xml version="1.0"?><!DOCTYPE m [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
            <D:multistatus xmlns:D="DAV:"><D:response><D:href>/media/&b;</D:href></D:response></D:multistatus>
            """
        XCTAssertThrowsError(try parse(laughs)) { error in
            XCTAssertTrue("\(error)".contains("document type declaration"), "\(error)")
        }
        XCTAssertThrowsError(try parse("<D:multistatus xmlns:D=\"DAV:\"><D:response>"))
        XCTAssertThrowsError(try parse("<html><body>Forbidden</body></html>"))
        // Names the mount cannot show, negative and huge sizes, duplicates.
        let entries = try parse(Self.multistatus([
            Self.response("/media/%0Abad", length: 1),
            Self.response("/media/" + String(repeating: "x", count: 300), length: 1),
            Self.response("/media/neg.mkv", length: -5),
            Self.response("/media/dup.mkv", length: 1),
            Self.response("/media/dup.mkv", length: 2),
        ]))
        XCTAssertEqual(entries, [ListingEntry(name: "neg.mkv", isDirectory: false, url: base + "neg.mkv"),
                                 ListingEntry(name: "dup.mkv", isDirectory: false, url: base + "dup.mkv", size: 1)])
    }

    /// Inputs on which FoundationXML itself ended the process (found by the fuzzer) are refused
    /// before they reach it, as are the other constructs a multistatus never needs.
    func testInputsThatCrashTheXMLParserAreRefusedBeforeIt() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzCorpus/FuzzWebDAVListing")
        for name in ["crash-invalid-utf8-name", "crash-empty-processing-instruction"] {
            let bytes = Array(try Data(contentsOf: corpus.appendingPathComponent(name)).dropFirst())
            XCTAssertThrowsError(try WebDAVListing.parse(bytes, url: base), name)
        }
        for (xml, why) in [("<?xml version=\"1.0\"?><?x?><D:multistatus xmlns:D=\"DAV:\"/>", "a processing instruction"),
                           ("<D:multistatus xmlns:D=\"DAV:\"><!-- hi --></D:multistatus>", "a comment"),
                           ("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><D:multistatus xmlns:D=\"DAV:\"/>", "an encoding other than UTF-8"),
                           ("<D:multistatus xmlns:D=\"DAV:\">\u{1}</D:multistatus>", "a control character")] {
            XCTAssertThrowsError(try parse(xml)) { XCTAssertTrue("\($0)".contains(why), "\($0)") }
        }
        XCTAssertEqual(try parse("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<D:multistatus xmlns:D=\"DAV:\"></D:multistatus>"), [])
        // However the server spells the host, a child's URL is the folder's own.
        XCTAssertEqual(try parse(Self.multistatus([Self.response("http://DAV.example/media/a.mp4", length: 1)])).map(\.url),
                       [base + "a.mp4"])
    }

    func testASeedOfTheFuzzCorpusParses() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzCorpus/FuzzWebDAVListing/nginx-dav-ext")
        let bytes = Array(try Data(contentsOf: corpus).dropFirst())  // the first byte picks the base
        let entries = try WebDAVListing.parse(bytes, url: base)
        XCTAssertEqual(entries.map(\.name), ["Film One.mkv", "Shows"])
    }
}

/// Which folders are asked by PROPFIND, through a backend that answers GET with 403.
final class ListingFetchTests: XCTestCase {
    func testAFolderThatRefusesGETIsListedByPROPFINDAndItsSubfoldersGoThereFirst() throws {
        let backend = DAVBackend()
        backend.setError("http://dav.example/media/", .forbidden(url: "http://dav.example/media/", status: 403))
        backend.documents["http://dav.example/media/"] = WebDAVListingTests.multistatus([
            WebDAVListingTests.response("/media/a.mkv", length: 4),
            WebDAVListingTests.response("/media/sub/", collection: true),
        ])
        let kinds = ListingKinds()
        let listing = try fetch(backend, "http://dav.example/media/", kinds: kinds)
        XCTAssertEqual(listing.kind, .webDAV)
        XCTAssertEqual(listing.entries.map(\.name), ["a.mkv", "sub"])
        XCTAssertTrue(kinds.isWebDAV("http://dav.example/media/sub/"))
        XCTAssertEqual(backend.propfinds, ["http://dav.example/media/"])
    }

    func testAnHTMLListingNeedsNoPROPFINDAndANotFoundIsNoWebDAV() throws {
        let backend = DAVBackend()
        backend.setFile("http://dav.example/pub/", Array(ListingFixtures.nginxHTML.utf8))
        XCTAssertEqual(try fetch(backend, "http://dav.example/pub/", kinds: ListingKinds()).kind, .page)
        backend.setError("http://dav.example/gone/", .notFound(url: "http://dav.example/gone/", status: 404))
        XCTAssertThrowsError(try fetch(backend, "http://dav.example/gone/", kinds: ListingKinds()))
        XCTAssertEqual(backend.propfinds, [])
    }

    func fetch(_ backend: DAVBackend, _ url: String, kinds: ListingKinds) throws -> ListingFetch.Listing {
        let done = expectation(description: "listed")
        let box = ResultBox<ListingFetch.Listing>()
        ListingFetch.fetch(url: url, through: backend, limit: 1 << 20, maxAge: 60, webDAVFirst: kinds.isWebDAV(url),
                           timers: Scheduler.manual(), logger: .init(label: "test")) { result in
            if case let .success(listing) = result { kinds.note(listing, url: url) }
            box.set(result)
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        return try box.get()
    }
}

/// `FakeBackend`'s pages, and PROPFIND answers from `documents` (recorded).
final class DAVBackend: ListingTransport, @unchecked Sendable {
    let pages = FakeBackend()
    private let lock = NSLock()
    var documents: [String: String] = [:]   // guarded by lock
    private(set) var propfinds: [String] = []  // guarded by lock

    func setFile(_ url: String, _ bytes: [UInt8]) { pages.setFile(url, bytes) }
    func setError(_ url: String, _ error: CacheError) { pages.setError(url, error) }

    func fetchPage(url: String, limit: Int, maxAge: TimeInterval,
                   completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        pages.fetchPage(url: url, limit: limit, maxAge: maxAge, completion: completion)
    }

    func fetchDocument(_ request: FetchRequest, limit: Int, maxAge: TimeInterval,
                       completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        let doc: String? = lock.withLock {
            propfinds.append(request.url)
            return request.method == "PROPFIND" && request.headers.contains("Depth: 1") ? documents[request.url] : nil
        }
        completion(doc.map { .success(Array($0.utf8)) } ?? .failure(.httpStatus(url: request.url, status: 405)))
    }
}
