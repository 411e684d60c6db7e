import XCTest
@testable import CacheCore

/// The open's remembered keys are the keys the rules make, errors are never remembered, and the
/// table stays within its capacity.
final class RecentKeysTests: XCTestCase {
    func testARememberedKeyIsTheRulesKeyAndTheTableStaysSmall() throws {
        let rules = KeyRules(ignoredQueryNames: ["token"])
        let keys = RecentKeys(capacity: 4)
        for round in 0..<3 {
            for i in 0..<10 {
                let url = "HTTP://Origin.test:80/v\(i).mp4?token=\(round)&b=\(i)"
                XCTAssertEqual(try keys.key(for: url, rules: rules), try rules.key(for: url), url)
            }
        }
        XCTAssertThrowsError(try keys.key(for: "ftp://origin.test/a", rules: rules))
        XCTAssertThrowsError(try keys.key(for: "ftp://origin.test/a", rules: rules), "an error is made again, not remembered")
    }
}
