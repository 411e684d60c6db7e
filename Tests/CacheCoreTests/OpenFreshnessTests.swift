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

    /// A probe revalidates a cached head with one byte; otherwise it brings the first 256 KiB along.
    func testProbeFetch() {
        let p: Int64 = 256 << 10
        struct Row { var line: UInt; var take = true; var coverage = RangeSet(); var length: Int64?; var end: Int64 }
        let rows: [Row] = [
            Row(line: #line, length: nil, end: p),                                        // a new entry
            Row(line: #line, take: false, length: nil, end: 1),                           // told not to
            Row(line: #line, coverage: RangeSet([0..<p]), length: 1 << 20, end: 1),      // its head is on disk
            Row(line: #line, coverage: RangeSet([0..<p - 1]), length: 1 << 20, end: p),  // not all of it
            Row(line: #line, coverage: RangeSet([0..<100]), length: 100, end: 1),        // a small file, all there
        ]
        for row in rows {
            let f = EntryStateMachine<Int>.probeFetch(takeFirstBytes: row.take, coverage: row.coverage, length: row.length, probeLength: p)
            XCTAssertEqual(f, ReadPlanner.Fetch(start: 0, end: row.end), line: row.line)
        }
    }
}
