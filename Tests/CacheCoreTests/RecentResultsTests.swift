import XCTest
@testable import CacheCore

/// A remembered result is the function's result, an error is never remembered, and the table
/// stays within its capacity.
final class RecentResultsTests: XCTestCase {
    func testARememberedKeyIsTheRulesKeyAndTheTableStaysSmall() throws {
        let rules = KeyRules(ignoredQueryNames: ["token"])
        let keys = RecentResults<CacheKey>(capacity: 4)
        func key(_ url: String) throws -> CacheKey { try keys.value(for: url) { try rules.key(for: $0) } }
        for round in 0..<3 {
            for i in 0..<10 {
                let url = "HTTP://Origin.test:80/v\(i).mp4?token=\(round)&b=\(i)"
                XCTAssertEqual(try key(url), try rules.key(for: url), url)
            }
        }
        XCTAssertThrowsError(try key("ftp://origin.test/a"))
        XCTAssertNil(keys.cached("ftp://origin.test/a"), "an error is made again, not remembered")
    }

    func testEachKeyIsWorkedOutOnceAndTheTableStartsOverWhenFull() {
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
