import Foundation
@testable import HLS
import XCTest

/// The byte-level merge of plain relative references must answer exactly as Foundation's
/// resolution does, and leave everything else to it.
final class ReferenceBaseTests: XCTestCase {
    private func foundation(_ reference: String, _ base: String) -> String? {
        guard let url = URL(string: reference, relativeTo: URL(string: base))?.absoluteURL,
              let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return nil }
        return url.absoluteString
    }

    func testEveryReferenceResolvesAsFoundationResolvesIt() {
        let bases = [
            "http://cdn.example.com/vod/film/index.m3u8", "https://cdn.example.com:8443/a/b/c.m3u8?token=abc#x",
            "http://127.0.0.1:18080/live/", "http://h/list.m3u8", "http://h", "http://h/a/../b/list.m3u8",
            "http://h/a/./list.m3u8", "http://user:pw@h/a/list.m3u8", "http://[::1]:80/a/list.m3u8",
            "HTTP://H/A/list.m3u8", "http://h/a%20b/list.m3u8", "http://h/a/list.m3u8;p", "not a url",
        ]
        let references = [
            "seg_000123.ts", "720p/seg1.ts", "a.b.c/d-e_f~g.ts", "../up.ts", "./here.ts", ".", "..", "...", ".../x.ts",
            "a/../b.ts", "a/./b.ts", "a//b.ts", "/root.ts", "//other.host/x.ts", "seg.ts?x=1", "seg.ts#f",
            "https://other.example/x.ts", "skd://key", "data:text/plain,hi", "seg%20one.ts", "seg one.ts", "",
            "a:b.ts", "dir/", "é.ts",
        ]
        for base in bases {
            let b = ReferenceBase(base)
            for reference in references {
                XCTAssertEqual(b.resolve(reference), foundation(reference, base), "\(reference) against \(base)")
            }
        }
    }

    func testOnlyPlainRelativePathsTakeTheFastWay() {
        XCTAssertEqual(ReferenceBase.directory(of: "http://h:80/a/b/list.m3u8?q"), "http://h:80/a/b/")
        XCTAssertNil(ReferenceBase.directory(of: "http://h/a/../list.m3u8"))
        XCTAssertNil(ReferenceBase.directory(of: "http://h"))
        XCTAssertTrue(ReferenceBase.isPlainRelativePath("720p/seg_1.ts"))
        for reference in ["", ".", "..", "a/..", "../a", "a//b", "/a", "a?b", "a%20", "a:b", "dir/"] {
            XCTAssertFalse(ReferenceBase.isPlainRelativePath(reference), reference)
        }
    }
}
