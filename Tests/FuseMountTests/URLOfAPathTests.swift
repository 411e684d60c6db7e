import Foundation
import TestSupport
import XCTest

/// `httpcachefs url PATH` of a path inside an `--index` mount: the mount, not the tree alone,
/// says whether the name is there, and a folder's URL is its listing's. Real mount, real binary.
final class URLOfAPathTests: XCTestCase {
    private var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
        list("/lib/", ["a.mp4", "sub/"])
        list("/lib/sub/", ["b.mkv"])
        h.origin.setGeneratedFile("/lib/a.mp4", length: 100_000, seed: 61)
        h.origin.setGeneratedFile("/lib/sub/b.mkv", length: 50_000, seed: 62)
    }

    override func tearDown() {
        h?.cleanup()
    }

    /// An nginx-style autoindex page linking `names` (folders end in `/`).
    private func list(_ path: String, _ names: [String]) {
        let rows = names.map { "<a href=\"\($0)\">\($0)</a>                 01-Jan-2024 00:00    -\n" }.joined()
        let html = "<html><body><h1>Index of \(path)</h1><hr><pre><a href=\"../\">../</a>\n\(rows)</pre><hr></body></html>\n"
        h.origin.setResponse(path, status: 200, headers: [("Content-Type", "text/html")], body: Array(html.utf8))
    }

    /// GET of a printed proxy URL: status and body.
    private func get(_ printed: String, range: String? = nil) throws -> (status: Int, body: [UInt8]) {
        let c = try XCTUnwrap(URLComponents(string: printed.trimmingCharacters(in: .whitespacesAndNewlines)), printed)
        let r = try RawHTTP.request(port: try XCTUnwrap(c.port), path: c.percentEncodedPath,
                                    headers: range.map { [("Range", $0)] } ?? [], timeout: 30)
        return (r.status, r.body)
    }

    /// A name the listing does not have got a URL and exit 0 (the tree maps any name under an
    /// --index); a folder got its URL without the listing's '/' (a 404 at this origin).
    func testAMissingNameFailsAndAFolderGivesItsListing() throws {
        let m = try h.mount(["--index", h.origin.url("/lib/"), "--proxy-port", "0"], proxy: true)
        XCTAssertEqual(m.status, 0, m.stderr + h.log)

        let file = try h.run(h.binary, ["url", h.path("sub/b.mkv")])
        XCTAssertEqual(file.status, 0, file.stderr)
        let bytes = try get(file.stdout, range: "bytes=0-99")
        XCTAssertEqual(bytes.status, 206)
        XCTAssertEqual(bytes.body, OriginServer.generatedBytes(seed: 62, offset: 0, count: 100))

        let missing = try h.run(h.binary, ["url", h.path("sub/typo.mkv")])
        XCTAssertNotEqual(missing.status, 0, "a URL for a name the mount does not show: \(missing.stdout)")
        XCTAssertEqual(missing.stdout, "")
        XCTAssertTrue(missing.stderr.hasPrefix("httpcachefs: error: ") && missing.stderr.contains("No such file")
                      && missing.stderr.contains("in the mount \(h.mountpoint)"), missing.stderr)
        XCTAssertEqual(missing.stderr.split(separator: "\n").count, 1, missing.stderr)

        let folder = try h.run(h.binary, ["url", h.path("sub")])
        XCTAssertEqual(folder.status, 0, folder.stderr)
        let listing = try get(folder.stdout)
        XCTAssertEqual(listing.status, 200, String(decoding: listing.body, as: UTF8.self))
        XCTAssertTrue(String(decoding: listing.body, as: UTF8.self).contains("Index of /lib/sub/"))
    }
}
