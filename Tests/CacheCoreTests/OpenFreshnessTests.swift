@testable import CacheCore
import XCTest

/// Whether an open is answered from what the entry knows, or checks the origin first: one row
/// per case, with a max age of 60 s.
final class OpenFreshnessTests: XCTestCase {
    func testFreshness() {
        typealias F = EntryStateMachine<Int>.Freshness
        struct Row { var line: UInt; var maxAge = 60.0; var lengthKnown = true; var age: Double; var originDown = false
                     var live = true; var fresh: Bool; var offline = false }
        let rows: [Row] = [
            Row(line: #line, age: 10, fresh: true),
            Row(line: #line, age: 60, fresh: false),
            Row(line: #line, age: -1, fresh: true),
            Row(line: #line, maxAge: 0, age: 0, fresh: false),             // max age 0: always check
            Row(line: #line, lengthKnown: false, age: 10, fresh: false),   // a length is what an open answers with
            // The origin is down: a cached file is served as it is, and said so.
            Row(line: #line, age: 600, originDown: true, fresh: true, offline: true),
            Row(line: #line, maxAge: 0, age: 0, originDown: true, fresh: true, offline: true),
            Row(line: #line, age: 10, originDown: true, fresh: true, offline: false),
            Row(line: #line, age: 600, originDown: true, live: false, fresh: false),
            Row(line: #line, lengthKnown: false, age: 600, originDown: true, fresh: false),
        ]
        for row in rows {
            let f = F(maxAge: row.maxAge, lengthKnown: row.lengthKnown, age: row.age, originDown: row.originDown, live: row.live)
            XCTAssertEqual(f.fresh, row.fresh, line: row.line)
            XCTAssertEqual(f.offline, row.offline, line: row.line)
        }
    }
}
