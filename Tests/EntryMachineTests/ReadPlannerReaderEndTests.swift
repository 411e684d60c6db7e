import XCTest
import CoreTypes
@testable import EntryMachine

/// A reader that says where it stops (`cat --range`, a proxy 206) gets no read-ahead past it:
/// the origin sends exactly the bytes that will be read.
final class ReadPlannerReaderEndTests: XCTestCase {
    func testReadAheadStopsWhereTheReaderStops() {
        let planner = ReadPlanner(readAhead: 1000, readerEnd: 250)
        let plan = planner.plan(request: 0..<100, length: 10_000, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [.init(start: 0, end: 250)])
    }

    func testAReadPastTheReaderEndStillGetsItsBytesButNoMore() {
        let planner = ReadPlanner(readAhead: 1000, readerEnd: 250)
        let plan = planner.plan(request: 200..<400, length: 10_000, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [.init(start: 200, end: 400)])
    }

    func testNoReadAheadFetchStartsAtTheReaderEnd() {
        // The request is cached up to the reader's end: nothing is left to fetch ahead.
        let planner = ReadPlanner(readAhead: 1000, readerEnd: 300)
        let plan = planner.plan(request: 200..<300, length: 10_000, cached: RangeSet([0..<300]), running: [])
        XCTAssertTrue(plan.isHit)
        XCTAssertEqual(plan.fetches, [])
    }

    func testParallelStreamsStayWithinTheReaderEnd() {
        let planner = ReadPlanner(readAhead: 8 << 20, streamSize: 1 << 20, readerEnd: 3 << 20)
        let plan = planner.plan(request: 0..<(1 << 20), length: 100 << 20, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches.last?.end, 3 << 20)
        XCTAssertEqual(plan.fetches.map(\.start), [0, 1 << 20, 2 << 20])
    }

    func testWithAnUnknownLengthTheReaderEndStillBoundsTheFetch() {
        let planner = ReadPlanner(readAhead: 1000, readerEnd: 150)
        let plan = planner.plan(request: 0..<100, length: nil, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [.init(start: 0, end: 150)])
    }
}
