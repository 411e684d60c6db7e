import Foundation
import XCTest
@testable import CacheCore

/// The byte-wise string helpers of the per-request path give what the general (Character-wise,
/// Foundation) ways they replace give.
final class StringFastPathTests: XCTestCase {
    func testAByteSearchFindsWhatFoundationFinds() {
        for text in ["http://a", "abc", "://", ":/://x", "::://", "a:/b:/", "", "ü://x", "x:\u{301}//"] {
            let expected = text.range(of: "://").map { text.utf8.distance(from: text.startIndex, to: $0.lowerBound) }
            let found = text.firstByteRange(of: "://").map { text.utf8.distance(from: text.startIndex, to: $0.lowerBound) }
            XCTAssertEqual(found, expected, text)
        }
        let tail = "xx http://h/p".dropFirst(3)
        XCTAssertEqual(tail.firstByteRange(of: "://").map { String(tail[..<$0.lowerBound]) }, "http")
    }

    func testTheMediaTypeEssenceOfASCIITextIsWhatTheGeneralWayGives() {
        func general(_ s: String) -> String {
            String(s.split(separator: ";", maxSplits: 1).first ?? "").trimmingOWS().lowercased()
        }
        for s in ["", ";", ";;a;b", " Text/HTML ; charset=utf-8", "\tapplication/X-MPEGURL", "video/mp4",
                  "a;b", "  ", "\t ;  ", "text/plain\r\n", "AUDIO/MPEG;", "x/y \t", "Ünicode/Type; x", "é/É"] {
            XCTAssertEqual(s.mediaTypeEssence, general(s), s.debugDescription)
            XCTAssertEqual(Substring(s).mediaTypeEssence, general(s), s.debugDescription)
        }
    }

    func testRecentResultsWorkEachKeyOutOnceAndStartOverWhenFull() {
        let memo = RecentResults<Int>(capacity: 2)
        var made: [String] = []
        func value(_ k: String) -> Int { memo.value(for: k) { made.append($0); return $0.count } }
        XCTAssertEqual(value("a"), 1)
        XCTAssertEqual(value("a"), 1)
        XCTAssertEqual(value("bb"), 2)
        XCTAssertEqual(made, ["a", "bb"])
        XCTAssertEqual(value("ccc"), 3)   // full: starts over with "ccc"
        XCTAssertNil(memo.cached("a"))
        XCTAssertEqual(memo.cached("ccc"), 3)
    }
}
