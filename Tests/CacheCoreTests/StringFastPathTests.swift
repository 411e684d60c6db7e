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
}
