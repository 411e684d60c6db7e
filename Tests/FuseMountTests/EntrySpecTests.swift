import XCTest
@testable import FuseMount

final class EntrySpecTests: XCTestCase {
    func testAPlainURLIsNamedAfterItsLastSegmentDecoded() throws {
        let spec = try EntrySpec.parse("https://example.com/media/My%20Movie.mp4?token=abc#t=10")
        XCTAssertEqual(spec.path, ["My Movie.mp4"])
        // In its one spelling (URLSpelling): the fragment, never sent, is dropped.
        XCTAssertEqual(spec.url, "https://example.com/media/My%20Movie.mp4?token=abc")
    }

    func testANameBeforeTheURLWinsAndMayHoldDirectories() throws {
        let spec = try EntrySpec.parse("films/2024/intro.mp4 = http://h/x?a=b")
        XCTAssertEqual(spec.path, ["films", "2024", "intro.mp4"])
        XCTAssertEqual(spec.url, "http://h/x?a=b")
        XCTAssertEqual(try EntrySpec.parse("a.mp4=http://h/x").path, ["a.mp4"])
    }

    func testAnEqualsSignInsideTheQueryIsNotASeparator() throws {
        let spec = try EntrySpec.parse("http://h/get?file=a.mp4&redirect=http://other/")
        XCTAssertEqual(spec.path, ["get"])
        XCTAssertEqual(spec.url, "http://h/get?file=a.mp4&redirect=http://other/")
    }

    func testAnEncodedSlashStaysEncodedSoOneURLIsOneFile() throws {
        XCTAssertEqual(try FileName.derive(fromURL: "http://h/a%2Fb.mp4"), "a%2Fb.mp4")
    }

    func testURLsWithoutAFileNameNeedAName() {
        // A bare host is its root folder (`http://h/`, its one spelling).
        XCTAssertThrowsError(try EntrySpec.parse("http://h")) { error in
            XCTAssertEqual(error as? EntrySpecError, .noName(url: "http://h/"))
            XCTAssertTrue("\(error)".contains("mount its listing with --index http://h/"), "\(error)")
        }
    }

    func testADirectoryURLPointsToIndex() {
        XCTAssertThrowsError(try EntrySpec.parse("http://h/dir/")) { error in
            XCTAssertEqual(error as? EntrySpecError, .noName(url: "http://h/dir/"))
            XCTAssertTrue("\(error)".contains("--index http://h/dir/"), "\(error)")
            XCTAssertTrue("\(error)".contains("NAME=http://h/dir/"), "\(error)")
        }
    }

    func testOnlyHTTPAndHTTPSAreAccepted() {
        XCTAssertThrowsError(try EntrySpec.parse("ftp://h/a.mp4"))
        XCTAssertThrowsError(try EntrySpec.parse("a.mp4 = file:///etc/passwd"))
        XCTAssertThrowsError(try EntrySpec.parse("not a url"))
    }

    func testDotNamesAreRefused() {
        XCTAssertThrowsError(try EntrySpec.parse("../escape.mp4 = http://h/a"))
        XCTAssertThrowsError(try EntrySpec.parse("a/./b = http://h/a"))
    }
}

final class URLListParserTests: XCTestCase {
    func testEntriesCommentsAndBlankLines() throws {
        let text = """
        # my media
        http://h/a.mp4

          series/s01/e01.mkv = https://cdn.example/x/1?sig=a=b
        \tmovies/b.mp4=http://h/b\r
        """
        let entries = try URLListParser.parse(text)
        XCTAssertEqual(entries.map(\.spec.path), [["a.mp4"], ["series", "s01", "e01.mkv"], ["movies", "b.mp4"]])
        XCTAssertEqual(entries.map(\.line), [2, 4, 5])
        XCTAssertEqual(entries[1].spec.url, "https://cdn.example/x/1?sig=a=b")
        XCTAssertEqual(entries[2].spec.url, "http://h/b")
    }

    func testACommentAfterTheURLIsNotPartOfIt() throws {
        let text = """
        http://h/small.bin   # the small one
        clips/b.mp4 = http://h/b.mp4\t# tab before the comment
        http://h/trailing-blanks.mp4\u{20}\u{20}
        """
        let entries = try URLListParser.parse(text)
        XCTAssertEqual(entries.map(\.spec.path), [["small.bin"], ["clips", "b.mp4"], ["trailing-blanks.mp4"]])
        XCTAssertEqual(entries.map(\.spec.url), ["http://h/small.bin", "http://h/b.mp4", "http://h/trailing-blanks.mp4"])
    }

    func testAHashInsideTheURLOrTheNameIsNotAComment() throws {
        let text = """
        http://h/movie.mp4#t=10
        Episode #1.mkv = http://h/e1.mkv # first
        """
        let entries = try URLListParser.parse(text)
        XCTAssertEqual(entries.map(\.spec.url), ["http://h/movie.mp4", "http://h/e1.mkv"], "the fragment is never sent: dropped")
        XCTAssertEqual(entries.map(\.spec.path), [["movie.mp4"], ["Episode #1.mkv"]])
    }

    func testAControlCharacterInTheURLOrTheNameFailsItsLine() {
        // Found by Fuzz/FuzzURLList: "%A\u{03}" made a URL that could never be fetched.
        for line in ["http://h/%E2%82%A\u{03}.mp4", "http://h/a\tb.mp4", "bell\u{07}.mp4 = http://h/b.mp4"] {
            XCTAssertThrowsError(try URLListParser.parse("http://h/ok.mp4\n" + line + "\n"), line.debugDescription) { error in
                XCTAssertEqual((error as? URLListError)?.line, 2)
                XCTAssertTrue("\(error)".contains("control character"), "\(error)")
            }
        }
    }

    func testAURLWhoseLastSegmentIsTooLongForAFileNameNeedsAName() throws {
        // Found by Fuzz/FuzzURLList: the derived name was not held to the 255-byte limit.
        let url = "http://h/" + String(repeating: "%E2%82%AC", count: 86) + ".mp4"
        XCTAssertThrowsError(try URLListParser.parse(url + "\n")) { error in
            XCTAssertTrue("\(error)".contains("longer than 255 bytes"), "\(error)")
        }
        XCTAssertEqual(try URLListParser.parse("short.mp4 = \(url)\n").map(\.spec.path), [["short.mp4"]])
    }

    func testAByteOrderMarkIsIgnored() throws {
        XCTAssertEqual(try URLListParser.parse("\u{FEFF}http://h/a.mp4\n").map(\.spec.path), [["a.mp4"]])
    }

    func testABadLineFailsTheWholeListWithItsLineNumber() {
        XCTAssertThrowsError(try URLListParser.parse("http://h/a.mp4\n\nb.mp4 = gopher://x/\n")) { error in
            let e = error as? URLListError
            XCTAssertEqual(e?.line, 3)
            XCTAssertTrue("\(error)".contains(":3:"), "\(error)")
        }
    }

    func testLoadNamesTheFile() throws {
        let path = NSTemporaryDirectory() + "urllist-\(UUID().uuidString).txt"
        try "http://h/dir/\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        XCTAssertThrowsError(try URLListParser.load(path: path)) { error in
            XCTAssertTrue("\(error)".hasPrefix("\(path):1:"), "\(error)")
        }
        XCTAssertThrowsError(try URLListParser.load(path: path + ".missing"))
    }
}

final class MountTreeSpecTests: XCTestCase {
    private func arg(_ s: String) throws -> (text: String, spec: EntrySpec) { (s, try EntrySpec.parse(s)) }

    func testTwoURLsWithTheSameFileNameClash() throws {
        XCTAssertThrowsError(try MountTreeSpec.build(arguments: [try arg("http://a/x/v.mp4"), try arg("http://b/y/v.mp4")])) { error in
            XCTAssertTrue("\(error)".contains("'v.mp4'"), "\(error)")
            XCTAssertTrue("\(error)".contains("http://a/x/v.mp4") && "\(error)".contains("http://b/y/v.mp4"), "\(error)")
        }
    }

    func testAFileCannotAlsoBeADirectory() throws {
        let list = try URLListParser.parse("a = http://h/1\na/b = http://h/2\n")
        XCTAssertThrowsError(try MountTreeSpec.build(urlList: list, urlListPath: "l.txt")) { error in
            guard case .fileUsedAsDirectory(path: "a", _, _)? = error as? MountTreeError else { return XCTFail("\(error)") }
        }
    }

    func testTheByURLDirectoryNameIsReserved() throws {
        XCTAssertThrowsError(try MountTreeSpec.build(arguments: [try arg(".url = http://h/a")], byURL: true))
        XCTAssertNoThrow(try MountTreeSpec.build(arguments: [try arg(".url = http://h/a")], byURL: false))
    }

    func testIndexesGoToTheRootOrAPathAndAlwaysEndInASlash() throws {
        XCTAssertEqual(try MountTreeSpec.parseIndex("http://h/pub").path, [])
        XCTAssertEqual(try MountTreeSpec.parseIndex("http://h/pub").url, "http://h/pub/")
        let named = try MountTreeSpec.parseIndex("mirror/debian = http://h/debian/?C=M")
        XCTAssertEqual(named.path, ["mirror", "debian"])
        XCTAssertEqual(named.url, "http://h/debian/?C=M")
        XCTAssertThrowsError(try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("http://h/a/"), try MountTreeSpec.parseIndex("http://h/b/")]))
    }

    func testFilesMayOverlayAnIndexDirectory() throws {
        let spec = try MountTreeSpec.build(arguments: [try arg("pub/extra.mp4 = http://h/e")],
                                           indexes: [try MountTreeSpec.parseIndex("pub = http://h/pub/")])
        XCTAssertEqual(spec.files.count, 1)
    }

    func testReplacingTheURLListKeepsArguments() throws {
        let spec = try MountTreeSpec.build(arguments: [try arg("http://h/a.mp4")], urlList: try URLListParser.parse("http://h/b.mp4"))
        let next = try spec.replacingURLList(try URLListParser.parse("http://h/c.mp4"), path: nil)
        XCTAssertEqual(next.files.map(\.path), [["a.mp4"], ["c.mp4"]])
        XCTAssertThrowsError(try spec.replacingURLList(try URLListParser.parse("http://other/a.mp4"), path: nil))
    }
}
