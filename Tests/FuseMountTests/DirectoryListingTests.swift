import XCTest
@testable import FuseMount

/// Listings as the servers really write them (nginx 1.22 autoindex, Apache 2.4 mod_autoindex).
enum ListingFixtures {
    static let nginxHTML = """
    <html>
    <head><title>Index of /pub/</title></head>
    <body>
    <h1>Index of /pub/</h1><hr><pre><a href="../">../</a>
    <a href="docs/">docs/</a>                                              04-Jan-2024 10:00                   -
    <a href="My%20Movie.mp4">My Movie.mp4</a>                                       05-Feb-2024 11:22             1048576
    <a href="a%26b.txt">a&amp;b.txt</a>                                          06-Mar-2024 12:33                  12
    <a href="a-very-long-file-name-that-nginx-truncates-in-the-link-text.mkv">a-very-long-file-name-that-nginx-truncates-in-the..&gt;</a> 07-Apr-2024 13:44               42
    </pre><hr></body>
    </html>
    """

    static let nginxHTMLApproximate = """
    <html><body><h1>Index of /pub/</h1><hr><pre><a href="../">../</a>
    <a href="big.iso">big.iso</a>                                            04-Jan-2024 10:00                  3G
    </pre><hr></body></html>
    """

    static let apacheTable = """
    <!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">
    <html>
     <head>
      <title>Index of /pub</title>
     </head>
     <body>
    <h1>Index of /pub</h1>
      <table>
       <tr><th valign="top"><img src="/icons/blank.gif" alt="[ICO]"></th><th><a href="?C=N;O=D">Name</a></th><th><a href="?C=M;O=A">Last modified</a></th><th><a href="?C=S;O=A">Size</a></th><th><a href="?C=D;O=A">Description</a></th></tr>
       <tr><th colspan="5"><hr></th></tr>
    <tr><td valign="top"><img src="/icons/back.gif" alt="[PARENTDIR]"></td><td><a href="/">Parent Directory</a></td><td>&nbsp;</td><td align="right">  - </td><td>&nbsp;</td></tr>
    <tr><td valign="top"><img src="/icons/folder.gif" alt="[DIR]"></td><td><a href="docs/">docs/</a></td><td align="right">2024-01-04 10:00  </td><td align="right">  - </td><td>&nbsp;</td></tr>
    <tr><td valign="top"><img src="/icons/movie.gif" alt="[VID]"></td><td><a href="My%20Movie.mp4">My Movie.mp4</a></td><td align="right">2024-02-05 11:22  </td><td align="right">1.0M</td><td>&nbsp;</td></tr>
    <tr><td valign="top"><img src="/icons/text.gif" alt="[TXT]"></td><td><a href="small.txt">small.txt</a></td><td align="right">2024-03-06 12:33  </td><td align="right">123 </td><td>&nbsp;</td></tr>
       <tr><th colspan="5"><hr></th></tr>
    </table>
    <address>Apache/2.4.57 (Debian) Server at example.com Port 80</address>
    </body></html>
    """

    static let apachePre = """
    <html><head><title>Index of /pub</title></head><body>
    <h1>Index of /pub</h1>
    <pre><img src="/icons/blank.gif" alt="Icon "> <a href="?C=N;O=D">Name</a>                    <a href="?C=M;O=A">Last modified</a>      <a href="?C=S;O=A">Size</a>  <a href="?C=D;O=A">Description</a><hr><img src="/icons/back.gif" alt="[PARENTDIR]"> <a href="/">Parent Directory</a>                             -
    <img src="/icons/folder.gif" alt="[DIR]"> <a href="docs/">docs/</a>                   2024-01-04 10:00    -
    <img src="/icons/movie.gif" alt="[VID]"> <a href="My%20Movie.mp4">My Movie.mp4</a>            2024-02-05 11:22  1.0M
    <img src="/icons/text.gif" alt="[TXT]"> <a href="small.txt">small.txt</a>               2024-03-06 12:33   123
    <hr></pre>
    <address>Apache/2.4.57 (Debian) Server at example.com Port 80</address>
    </body></html>
    """

    static let apacheList = """
    <html><head><title>Index of /pub</title></head><body><h1>Index of /pub</h1>
    <ul><li><a href="/"> Parent Directory</a></li>
    <li><a href="docs/"> docs/</a></li>
    <li><a href="small.txt"> small.txt</a></li>
    </ul></body></html>
    """

    static let nginxJSON = """
    [
    { "name":"docs", "type":"directory", "mtime":"Thu, 04 Jan 2024 10:00:00 GMT" },
    { "name":"My Movie.mp4", "type":"file", "mtime":"Mon, 05 Feb 2024 11:22:00 GMT", "size":1048576 },
    { "name":"link", "type":"other", "mtime":"Mon, 05 Feb 2024 11:22:00 GMT" }
    ]
    """
}

final class DirectoryListingTests: XCTestCase {
    let base = "http://example.com/pub/"

    private func parse(_ s: String, base: String? = nil) throws -> [ListingEntry] {
        try DirectoryListing.parse(Array(s.utf8), url: base ?? self.base)
    }

    private func date(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int) -> Date {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        return c.date(from: DateComponents(year: y, month: mo, day: d, hour: h, minute: mi))!
    }

    func testNginxHTMLGivesExactSizesDatesAndDirectories() throws {
        let entries = try parse(ListingFixtures.nginxHTML)
        XCTAssertEqual(entries.map(\.name), ["docs", "My Movie.mp4", "a&b.txt",
                                             "a-very-long-file-name-that-nginx-truncates-in-the-link-text.mkv"])
        XCTAssertEqual(entries[0], ListingEntry(name: "docs", isDirectory: true, url: "http://example.com/pub/docs/",
                                                modified: date(2024, 1, 4, 10, 0)))
        XCTAssertEqual(entries[1], ListingEntry(name: "My Movie.mp4", isDirectory: false,
                                                url: "http://example.com/pub/My%20Movie.mp4", size: 1_048_576,
                                                modified: date(2024, 2, 5, 11, 22)))
        XCTAssertEqual(entries[2].url, "http://example.com/pub/a%26b.txt")
        XCTAssertEqual(entries[2].size, 12)
        XCTAssertEqual(entries[3].size, 42)
    }

    /// Columns split on any whitespace: CRLF, tabs and no-break spaces (U+00A0, as `&nbsp;` or raw).
    func testColumnsSeparatedByNoBreakSpacesOrTabsAreRead() throws {
        let entries = try parse("<pre><a href=\"a\">a</a>\u{A0}04-Jan-2024\u{A0}10:00\u{A0}42\r\n<a href=\"b\">b</a>&nbsp;04-Jan-2024\t10:00\t43\r\n</pre>")
        XCTAssertEqual(entries.map(\.size), [42, 43])
        XCTAssertEqual(entries.map(\.modified), [date(2024, 1, 4, 10, 0), date(2024, 1, 4, 10, 0)])
    }

    func testApproximateSizesAreDroppedNotGuessed() throws {
        let entries = try parse(ListingFixtures.nginxHTMLApproximate)
        XCTAssertEqual(entries.count, 1)
        XCTAssertNil(entries[0].size)
        XCTAssertEqual(entries[0].modified, date(2024, 1, 4, 10, 0))
    }

    func testApacheTable() throws {
        let entries = try parse(ListingFixtures.apacheTable)
        XCTAssertEqual(entries.map(\.name), ["docs", "My Movie.mp4", "small.txt"])
        XCTAssertEqual(entries.map(\.isDirectory), [true, false, false])
        XCTAssertEqual(entries[1].size, nil, "1.0M is approximate")
        XCTAssertEqual(entries[1].modified, date(2024, 2, 5, 11, 22))
        XCTAssertEqual(entries[2].size, 123)
    }

    func testApachePre() throws {
        let entries = try parse(ListingFixtures.apachePre)
        XCTAssertEqual(entries.map(\.name), ["docs", "My Movie.mp4", "small.txt"])
        XCTAssertEqual(entries[2].size, 123)
        XCTAssertEqual(entries[2].modified, date(2024, 3, 6, 12, 33))
        XCTAssertNil(entries[1].size)
    }

    func testApachePlainListHasNamesOnly() throws {
        let entries = try parse(ListingFixtures.apacheList)
        XCTAssertEqual(entries.map(\.name), ["docs", "small.txt"])
        XCTAssertNil(entries[1].size)
        XCTAssertNil(entries[1].modified)
    }

    func testNginxJSON() throws {
        let entries = try parse(ListingFixtures.nginxJSON)
        XCTAssertEqual(entries, [
            ListingEntry(name: "docs", isDirectory: true, url: "http://example.com/pub/docs/", modified: date(2024, 1, 4, 10, 0)),
            ListingEntry(name: "My Movie.mp4", isDirectory: false, url: "http://example.com/pub/My%20Movie.mp4",
                         size: 1_048_576, modified: date(2024, 2, 5, 11, 22)),
        ])
    }

    func testLinksOutsideTheDirectoryAreIgnored() throws {
        let html = """
        <a href="http://other.example/pub/x.mp4">x</a> <a href="/elsewhere/y.mp4">y</a>
        <a href="sub/deeper/z.mp4">z</a> <a href="#top">top</a> <a href="mailto:a@b">m</a>
        <a href="http://example.com/pub/ok.mp4">ok</a> <a href='single.mp4'>s</a> <A HREF=bare.mp4>b</A>
        """
        XCTAssertEqual(try parse(html).map(\.name), ["ok.mp4", "single.mp4", "bare.mp4"])
    }

    func testAbsoluteLinksIntoTheDirectoryCount() throws {
        let html = #"<pre><a href="/pub/a.mp4">a.mp4</a>   01-Jan-2024 00:00   5</pre>"#
        XCTAssertEqual(try parse(html).first?.size, 5)
    }

    /// Children's URLs come from the folder's URL, not from how an href spells the host: one
    /// file, one URL (and cache key), and the folder's credentials kept.
    func testChildURLsAreTheFoldersOwnWhateverTheHrefSpellsTheHostAs() throws {
        let folder = "http://user:pw@Media.Example:8080/pub/"
        let html = """
        <a href="http://MEDIA.example:8080/pub/a%20b.mkv">a b.mkv</a> <a href="HTTP://media.example:8080/pub/Sub/">Sub/</a>
        <a href="c.mkv">c.mkv</a>
        """
        // In their one spelling (URLSpelling): the host lower-case.
        XCTAssertEqual(try parse(html, base: folder).map(\.url), [
            "http://user:pw@media.example:8080/pub/a%20b.mkv", "http://user:pw@media.example:8080/pub/Sub/",
            "http://user:pw@media.example:8080/pub/c.mkv"])
        // A folder URL without its trailing slash gets one in its children's (JSON names are
        // no relative links, so they are under it).
        XCTAssertEqual(try parse(ListingFixtures.nginxJSON, base: "http://example.com/pub").map(\.url),
                       ["http://example.com/pub/docs/", "http://example.com/pub/My%20Movie.mp4"])
    }

    func testNamesWithLineBreaksOrControlCharactersAreDropped() throws {
        let html = """
        <pre><a href="good.mp4">good.mp4</a>
        <a href="evil%0D%0A.mp4">evil</a> <a href="tab%09.mp4">tab</a> <a href="bell%07.mp4">bell</a> <a href="del%7F.mp4">del</a>
        </pre>
        """
        XCTAssertEqual(try parse(html).map(\.name), ["good.mp4"])
        let json = #"[{"name":"evil\r\n.mp4","type":"file","size":1},{"name":"esc\u001b.mp4","type":"file"},{"name":"good.mp4","type":"file"}]"#
        XCTAssertEqual(try parse(json).map(\.name), ["good.mp4"])
    }

    /// A right-to-left override makes `\u{202E}4pm.exe` read as `exe.mp4` in `ls`: such names
    /// are skipped ("Trojan Source"); other scripts, right-to-left ones included, stay.
    func testNamesWithCharactersThatReorderTextAreDropped() throws {
        let html = """
        <pre><a href="%E2%80%AEgnp.exe.mp4">x</a> <a href="a%E2%81%A6b.mp4">y</a> <a href="lrm%E2%80%8E.mp4">z</a>
        <a href="%D7%A1%D7%A8%D7%98.mp4">x</a> <a href="caf%C3%A9.mp4">x</a>
        </pre>
        """
        XCTAssertEqual(try parse(html).map(\.name), ["\u{5E1}\u{5E8}\u{5D8}.mp4", "caf\u{E9}.mp4"])
        let json = #"[{"name":"\u202egnp.exe.mp4","type":"file"},{"name":"ok.mp4","type":"file"}]"#
        XCTAssertEqual(try parse(json).map(\.name), ["ok.mp4"])
    }

    func testANameTooLongForTheKernelIsSkippedAndTheRestIsListed() throws {
        let long = String(repeating: "x", count: 5000) + ".mp4"
        let html = "<pre><a href=\"\(long)\">\(long)</a>  01-Jan-2024 00:00  5\n<a href=\"ok.mp4\">ok.mp4</a>  01-Jan-2024 00:00  7\n</pre>"
        XCTAssertEqual(try parse(html).map(\.name), ["ok.mp4"])
        let json = #"[{"name":"\#(long)","type":"file","size":5},{"name":"ok.mp4","type":"file","size":7}]"#
        XCTAssertEqual(try parse(json).map(\.name), ["ok.mp4"])
        // 255 bytes is the limit, counted in UTF-8: 85 three-byte characters fit, 86 do not.
        let fits = String(repeating: "\u{20AC}", count: 85), tooLong = String(repeating: "\u{20AC}", count: 86)
        let utf8 = #"[{"name":"\#(fits)","type":"file"},{"name":"\#(tooLong)","type":"file"}]"#
        XCTAssertEqual(try parse(utf8).map(\.name), [fits])
    }

    func testAJSONSizeThatIsNoInt64IsNoSizeAndTheRestOfTheListingStands() throws {
        let json = #"[{"name":"huge.bin","type":"file","size":99999999999999999999},{"name":"half.bin","type":"file","size":1.5},{"name":"ok.bin","type":"file","size":7}]"#
        let entries = try parse(json)
        XCTAssertEqual(entries.map(\.name), ["huge.bin", "half.bin", "ok.bin"])
        XCTAssertEqual(entries.map(\.size), [nil, nil, 7])
    }

    func testNotAListing() {
        XCTAssertThrowsError(try parse("just some text"))
        XCTAssertThrowsError(try parse("[1, 2"))
    }
}
