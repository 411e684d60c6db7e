import CacheCore
@testable import FuseMount
import Foundation
import Logging
import XCTest

/// ListObjectsV2 answers as folders: common prefixes are folders, objects files with their size
/// and date, pages followed by continuation token; names that are no file names are escaped,
/// never dropped; hostile XML is refused.
final class S3ListingTests: XCTestCase {
    private func page(_ body: String, truncated: Bool = false, token: String? = nil, encoding: Bool = false) -> [UInt8] {
        Array("""
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>media</Name><Prefix>films/</Prefix>\
            \(encoding ? "<EncodingType>url</EncodingType>" : "")<IsTruncated>\(truncated)</IsTruncated>\
            \(token.map { "<NextContinuationToken>\($0)</NextContinuationToken>" } ?? "")\(body)</ListBucketResult>
            """.utf8)
    }

    func testPrefixesAreFoldersAndObjectsFiles() throws {
        let bytes = page("""
            <Contents><Key>films/</Key><Size>0</Size></Contents>
            <Contents><Key>films/a.mp4</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified><ETag>"abc"</ETag><Size>434234</Size></Contents>
            <Contents><Key>films/b &amp; c.mkv</Key><Size>12</Size></Contents>
            <CommonPrefixes><Prefix>films/extras/</Prefix></CommonPrefixes>
            <CommonPrefixes><Prefix>other/x/</Prefix></CommonPrefixes>
            """)
        let parsed = try S3Listing.parse(bytes, url: "http://e/media/films/", prefix: "films/")
        XCTAssertEqual(parsed.items, [
            .init(name: "extras", isDirectory: true),
            .init(name: "a.mp4", isDirectory: false, size: 434234, modified: Date(timeIntervalSince1970: 1_255_369_830), etag: "\"abc\""),
            .init(name: "b & c.mkv", isDirectory: false, size: 12),
        ])
        XCTAssertFalse(parsed.truncated)
    }

    func testURLEncodedKeysAreDecoded() throws {
        let bytes = page("""
            <Contents><Key>films/a+film%2B1%01.mp4</Key><Size>1</Size></Contents>
            <CommonPrefixes><Prefix>films/sub%20dir/</Prefix></CommonPrefixes>
            """, encoding: true)
        let parsed = try S3Listing.parse(bytes, url: "http://e/media/films/", prefix: "films/")
        XCTAssertEqual(parsed.items.map(\.name), ["sub dir", "a film+1\u{1}.mp4"])
    }

    func testHostileOrForeignAnswersAreRefused() {
        let table: [String] = [
            "<!DOCTYPE x [<!ENTITY e \"e\">]><ListBucketResult></ListBucketResult>",
            "<html><body>not a bucket</body></html>",
            "<ListBucketResult><Contents>",
            "<Error><Code>NoSuchBucket</Code></Error>",
            "",
        ]
        for text in table {
            XCTAssertThrowsError(try S3Listing.parse(Array(text.utf8), url: "http://e/media/", prefix: ""), text)
        }
    }

    func testNamesThatAreNoFileNamesAreEscapedNotDropped() {
        let long = String(repeating: "é", count: 200)
        let table: [(String, String)] = [
            ("a.mp4", "a.mp4"), ("100% pure.mp4", "100% pure.mp4"),
            ("", "%"), (".", "%2E"), ("..", "%2E%2E"),
            ("a\u{1}b", "a%01b"), ("x\u{202E}y", "x%E2%80%AEy"), ("50%\u{7F}", "50%25%7F"),
        ]
        for (name, shown) in table { XCTAssertEqual(S3Listing.escapedName(name), shown, name.debugDescription) }
        let shortened = S3Listing.escapedName(long)
        XCTAssertLessThanOrEqual(shortened.utf8.count, PathName.maxComponentBytes)
        XCTAssertTrue(shortened.hasPrefix("éé"))
        XCTAssertNotEqual(shortened, S3Listing.escapedName(long + "x"), "the hash tells two long names apart")
        var names: Set<String> = ["%2E"]
        XCTAssertEqual(S3Listing.unique("%2E", in: &names), "%2E~2")
    }

    func testPagesAreFollowedAndChildURLsMadeFromTheKeys() throws {
        S3Listing.register(root: "http://127.0.0.1:9/paged/", listingBase: "http://127.0.0.1:9/paged")
        let folder = "http://127.0.0.1:9/paged/films/"
        let location = try XCTUnwrap(S3Listing.location(of: folder))
        XCTAssertEqual(location.prefix, "films/")
        XCTAssertNil(S3Listing.location(of: "http://127.0.0.1:9/other/films/"))
        let first = S3Listing.pageURL(listingBase: location.listingBase, prefix: "films/", continuation: nil)
        XCTAssertEqual(first, "http://127.0.0.1:9/paged?list-type=2&delimiter=%2F&encoding-type=url&prefix=films%2F")
        let second = S3Listing.pageURL(listingBase: location.listingBase, prefix: "films/", continuation: "t/1+=")
        XCTAssertTrue(second.hasSuffix("&continuation-token=t%2F1%2B%3D"), second)
        let transport = PagedTransport(pages: [
            first: page("<Contents><Key>films/a b.mp4</Key><Size>5</Size></Contents><Contents><Key>films/.</Key><Size>1</Size></Contents>",
                        truncated: true, token: "t/1+="),
            second: page("<CommonPrefixes><Prefix>films/sub/</Prefix></CommonPrefixes>"),
        ])
        let listed = try list(folder, transport)
        XCTAssertEqual(listed.kind, .s3)
        // "films/." would be fetched as the folder's URL (URLs drop dot segments): skipped.
        XCTAssertEqual(listed.entries.map(\.name), ["a b.mp4", "sub"])
        XCTAssertEqual(listed.entries.map(\.url), [folder + "a%20b.mp4", folder + "sub/"])
        XCTAssertEqual(listed.entries.map(\.size), [5, nil])
        XCTAssertEqual(transport.asked, [first, second])
    }

    func testManyPagesAnsweredAtOnceAreFollowedInALoopAndARepeatedTokenEndsTheListing() throws {
        S3Listing.register(root: "http://127.0.0.1:9/many/", listingBase: "http://127.0.0.1:9/many")
        var pages: [String: [UInt8]] = [:]
        let count = 1500
        for i in 0..<count {
            let url = S3Listing.pageURL(listingBase: "http://127.0.0.1:9/many", prefix: "", continuation: i == 0 ? nil : "t\(i)")
            pages[url] = page("<Contents><Key>f\(i).bin</Key><Size>1</Size></Contents>", truncated: i < count - 1, token: "t\(i + 1)")
        }
        let listed = try list("http://127.0.0.1:9/many/", PagedTransport(pages: pages))
        XCTAssertEqual(listed.entries.count, count)
        XCTAssertEqual(listed.entries.last?.name, "f\(count - 1).bin")

        S3Listing.register(root: "http://127.0.0.1:9/loop/", listingBase: "http://127.0.0.1:9/loop")
        let first = S3Listing.pageURL(listingBase: "http://127.0.0.1:9/loop", prefix: "", continuation: nil)
        let again = S3Listing.pageURL(listingBase: "http://127.0.0.1:9/loop", prefix: "", continuation: "same")
        let loop = PagedTransport(pages: [first: page("", truncated: true, token: "same"), again: page("", truncated: true, token: "same")])
        XCTAssertThrowsError(try list("http://127.0.0.1:9/loop/", loop)) { XCTAssertTrue("\($0)".contains("continuation token twice"), "\($0)") }
        XCTAssertEqual(loop.asked, [first, again])
    }

    /// A folder of many pages tells its caller at each page but the last, so the mount's
    /// deadline bounds each page, never a listing that keeps coming (`ListingProgress`).
    func testEachPageButTheLastIsToldAsProgressAndTheDeadlineWaitsWhilePagesCome() throws {
        S3Listing.register(root: "http://127.0.0.1:9/paged/", listingBase: "http://127.0.0.1:9/paged")
        var pages: [String: [UInt8]] = [:]
        for i in 0..<3 {
            let url = S3Listing.pageURL(listingBase: "http://127.0.0.1:9/paged", prefix: "", continuation: i == 0 ? nil : "t\(i)")
            pages[url] = page("<Contents><Key>f\(i).bin</Key><Size>1</Size></Contents>", truncated: i < 2, token: "t\(i + 1)")
        }
        let told = LockedValue(0)
        let done = expectation(description: "listed")
        ListingFetch.fetch(url: "http://127.0.0.1:9/paged/", through: PagedTransport(pages: pages), limit: 1 << 20, maxAge: 0,
                           webDAVFirst: false, timers: Scheduler.manual(), logger: Logger(label: "test"), progress: { told.withLock { $0 += 1 } }) { result in
            XCTAssertEqual((try? result.get())?.entries.count, 3)
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(told.withLock { $0 }, 2)

        let progress = ListingProgress()
        XCTAssertFalse(progress.take(), "no page yet: the deadline fires")
        progress.note()
        progress.note()
        XCTAssertTrue(progress.take(), "a page came: the deadline waits again")
        XCTAssertFalse(progress.take(), "and none since")
    }

    func testAFailedPageFailsTheListing() {
        S3Listing.register(root: "http://127.0.0.1:9/failing/", listingBase: "http://127.0.0.1:9/failing")
        let transport = PagedTransport(pages: [:])
        XCTAssertThrowsError(try list("http://127.0.0.1:9/failing/", transport))
    }

    func testAURLListMapsEachEntryAndAMappingFailureNamesItsLine() throws {
        struct Bad: Error, CustomStringConvertible { var description: String { "bad S3 URL: 'x' is no bucket name" } }
        let map: (String) throws -> String = { text in
            if text.contains("s3://x/") { throw Bad() }
            return text.replacingOccurrences(of: "s3://media/", with: "http://127.0.0.1:9/media/")
        }
        let entries = try URLListParser.parse("s3://media/a.mp4\nb/c.mp4 = s3://media/c%20d.mp4  # note\n", mapURL: map)
        XCTAssertEqual(entries.map(\.spec.url), ["http://127.0.0.1:9/media/a.mp4", "http://127.0.0.1:9/media/c%20d.mp4"])
        XCTAssertEqual(entries.map(\.spec.path), [["a.mp4"], ["b", "c.mp4"]])
        XCTAssertThrowsError(try URLListParser.parse("s3://media/a.mp4\ns3://x/y\n", mapURL: map)) { error in
            XCTAssertEqual("\(error)", "URL list:2: bad S3 URL: 'x' is no bucket name")
        }
    }

    private func list(_ url: String, _ transport: PagedTransport) throws -> ListingFetch.Listing {
        let done = expectation(description: "listed")
        let box = LockedValue<Result<ListingFetch.Listing, CacheError>?>(nil)
        ListingFetch.fetch(url: url, through: transport, limit: 1 << 20, maxAge: 0, webDAVFirst: false,
                           timers: Scheduler.manual(), logger: Logger(label: "test")) { result in
            box.withLock { $0 = result }
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        return try XCTUnwrap(box.withLock { $0 }).get()
    }
}

/// Pages by URL (a missing one answers 404), and the URLs asked, in order.
final class PagedTransport: ListingTransport, @unchecked Sendable {
    private let pages: [String: [UInt8]]
    private let lock = NSLock()
    private var _asked: [String] = []
    var asked: [String] { lock.withLock { _asked } }

    init(pages: [String: [UInt8]]) { self.pages = pages }

    func fetchPage(url: String, limit: Int, maxAge: TimeInterval,
                   completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        lock.withLock { _asked.append(url) }
        completion(pages[url].map { .success($0) } ?? .failure(.httpStatus(url: url, status: 404)))
    }

    func fetchDocument(_ request: FetchRequest, limit: Int, maxAge: TimeInterval,
                       completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
        completion(.failure(.httpStatus(url: request.url, status: 405)))
    }
}
