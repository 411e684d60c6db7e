import CoreTypes
@testable import EntryMachine
import XCTest

/// The sweeper's tick for opens waiting and transfers nobody opens any more, with no engine:
/// each row is the tables before, the tick at `now` (1000 s on the monotonic clock), and what
/// fails, stops and stays. Times in the rows are seconds from `now`; opens are numbers (odd:
/// answered meanwhile); URLs `a` and `a2` are one file (key `A`); the grace is 60 s.
final class OpenDeadlinesTests: XCTestCase {
    typealias Open = (deadline: MonotonicInstant, url: String, answer: Int)

    func testTick() {
        struct Row {
            var line: UInt
            var opens: [(Double, String, Int)] = []
            var abandoned: [String: (String, Double)] = [:]
            var late: [Int] = []
            var stop: [String] = []
            var opensAfter: [Int] = []
            var abandonedAfter: [String: Double] = [:]
        }
        /// `seconds` from now.
        func at(_ seconds: Double) -> MonotonicInstant { MonotonicInstant(nanoseconds: UInt64((1000 + seconds) * 1e9)) }
        let now = 0.0
        let rows: [Row] = [
            Row(line: #line),
            // Before its deadline an open waits; one answered meanwhile leaves.
            Row(line: #line, opens: [(now + 1, "a", 2), (now - 5, "b", 1)], opensAfter: [2]),
            // Past it: it fails, and its file's transfer is stopped a grace later...
            Row(line: #line, opens: [(now, "a", 2)], late: [2], abandonedAfter: ["A": now + 60]),
            // ...unless another open of the same file still waits on it.
            Row(line: #line, opens: [(now, "a", 2), (now + 5, "a2", 4)], late: [2], opensAfter: [4]),
            // A second timeout does not push the stop further.
            Row(line: #line, opens: [(now, "a", 2)], abandoned: ["A": ("a", now + 30)], late: [2],
                abandonedAfter: ["A": now + 30]),
            // At its time the transfer stops; an open that came back for it keeps it.
            Row(line: #line, abandoned: ["A": ("a", now)], stop: ["a"]),
            Row(line: #line, abandoned: ["A": ("a", now + 1)], abandonedAfter: ["A": now + 1]),
            Row(line: #line, opens: [(now + 5, "a2", 4)], abandoned: ["A": ("a", now)], opensAfter: [4]),
            // A URL with no key is never abandoned.
            Row(line: #line, opens: [(now, "bad", 2)], late: [2]),
        ]
        for row in rows {
            var opens: [Open] = row.opens.map { (deadline: at($0.0), url: $0.1, answer: $0.2) }
            var abandoned: [CacheKey: (url: String, at: MonotonicInstant)] = [:]
            for (k, a) in row.abandoned { abandoned[CacheKey(rawValue: k)] = (url: a.0, at: at(a.1)) }
            let (late, stop) = OpenDeadlines.tick(
                opens: &opens, abandoned: &abandoned, now: at(now), grace: .seconds(60), isAnswered: { $0 % 2 == 1 },
                key: { url in url == "bad" ? nil : CacheKey(rawValue: url.hasPrefix("a") ? "A" : url.uppercased()) })
            XCTAssertEqual(late.map(\.answer), row.late, line: row.line)
            XCTAssertEqual(late.map(\.url), row.opens.filter { row.late.contains($0.2) }.map(\.1), line: row.line)
            XCTAssertEqual(stop, row.stop, line: row.line)
            XCTAssertEqual(opens.map(\.answer), row.opensAfter, line: row.line)
            XCTAssertEqual(Dictionary(uniqueKeysWithValues: abandoned.map { ($0.key.string, $0.value.at) }),
                           row.abandonedAfter.mapValues(at), line: row.line)
        }
    }
}
