import XCTest
import CoreTypes
@testable import EntryMachine

final class ReadPlannerTests: XCTestCase {
    private let noReadAhead = ReadPlanner(readAhead: 0)

    func testTheDesignExample() {
        let cached = RangeSet([200..<500, 700..<800])
        let plan = noReadAhead.plan(request: 0..<1000, length: 10_000, cached: cached, running: [])
        XCTAssertEqual(plan.steps.map(\.description),
                       ["net 0-199", "disk 200-499", "net 500-699", "disk 700-799", "net 800-999"])
        XCTAssertEqual(plan.fetches, [.init(start: 0, end: 200), .init(start: 500, end: 700), .init(start: 800, end: 1000)])
        XCTAssertFalse(plan.isHit)
    }

    func testFullyCachedRequestIsAHit() {
        let plan = noReadAhead.plan(request: 10..<20, length: 100, cached: RangeSet([0..<100]), running: [])
        XCTAssertEqual(plan.steps, [.disk(10..<20)])
        XCTAssertTrue(plan.isHit)
        XCTAssertTrue(plan.fetches.isEmpty)
    }

    func testEmptyRequestPlansNothing() {
        let plan = noReadAhead.plan(request: 5..<5, length: 100, cached: RangeSet(), running: [])
        XCTAssertTrue(plan.steps.isEmpty)
        XCTAssertTrue(plan.fetches.isEmpty)
    }

    func testRequestIsClippedAtTheEndOfTheFile() {
        let plan = noReadAhead.plan(request: 90..<200, length: 100, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.steps, [.net(90..<100)])
        XCTAssertEqual(plan.fetches, [.init(start: 90, end: 100)])
    }

    func testRequestPastTheEndPlansNothing() {
        let plan = noReadAhead.plan(request: 150..<200, length: 100, cached: RangeSet(), running: [])
        XCTAssertTrue(plan.steps.isEmpty)
    }

    func testUnknownLengthFetchesWhatIsAsked() {
        let plan = noReadAhead.plan(request: 0..<50, length: nil, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [.init(start: 0, end: 50)])
    }

    func testReadAheadNearTheLargestOffsetStopsThereInsteadOfOverflowing() {
        // Found by Fuzz/FuzzReadPlanner: an unknown length and a request ending near Int64.max.
        let plan = ReadPlanner(readAhead: 1000).plan(request: (Int64.max - 10)..<(Int64.max - 5), length: nil,
                                                     cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [ReadPlanner.Fetch(start: Int64.max - 10, end: Int64.max)])
    }

    func testARequestEndingAtTheLargestOffsetPlansWithoutOverflowing() {
        // Found by Fuzz/FuzzReadPlanner: looking for cached bytes after Int64.max trapped.
        XCTAssertNil(RangeSet([0..<5]).nextPresent(atOrAfter: Int64.max))
        let plan = ReadPlanner(readAhead: 1000).plan(request: (Int64.max - 10)..<Int64.max, length: nil,
                                                     cached: RangeSet([0..<5]), running: [])
        XCTAssertEqual(plan.steps, [.net((Int64.max - 10)..<Int64.max)])
        XCTAssertEqual(plan.fetches, [ReadPlanner.Fetch(start: Int64.max - 10, end: Int64.max)])
    }

    func testReadAheadExtendsTheLastFetchButStopsAtCachedBytes() {
        let planner = ReadPlanner(readAhead: 1000)
        let plan = planner.plan(request: 0..<100, length: 10_000, cached: RangeSet([600..<700]), running: [])
        XCTAssertEqual(plan.steps, [.net(0..<100)])
        XCTAssertEqual(plan.fetches.first, .init(start: 0, end: 600), "never re-downloads cached bytes")
    }

    func testReadAheadStopsAtTheEndOfTheFile() {
        let plan = ReadPlanner(readAhead: 1000).plan(request: 0..<100, length: 300, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [.init(start: 0, end: 300)])
    }

    func testBytesARunningFetchWillDeliverAreWaitedFor() {
        let running = [ReadPlanner.RunningFetch(id: 7, cursor: 100, end: 1000)]
        let plan = noReadAhead.plan(request: 150..<250, length: 10_000, cached: RangeSet([0..<100]), running: running)
        XCTAssertEqual(plan.steps, [.wait(150..<250, fetch: 7)])
        XCTAssertTrue(plan.fetches.isEmpty, "single flight: no second fetch for the same bytes")
    }

    func testNewFetchStopsWhereARunningFetchBegins() {
        let running = [ReadPlanner.RunningFetch(id: 1, cursor: 500, end: 900)]
        let plan = noReadAhead.plan(request: 0..<800, length: 10_000, cached: RangeSet(), running: running)
        XCTAssertEqual(plan.steps, [.net(0..<500), .wait(500..<800, fetch: 1)])
        XCTAssertEqual(plan.fetches, [.init(start: 0, end: 500)])
    }

    func testASeekFarAheadOfARunningFetchTakesOverAndTruncatesIt() {
        let planner = ReadPlanner(readAhead: 0, seekThreshold: 1000)
        let running = [ReadPlanner.RunningFetch(id: 3, cursor: 0, end: 100_000)]
        let plan = planner.plan(request: 50_000..<51_000, length: 200_000, cached: RangeSet(), running: running)
        XCTAssertEqual(plan.truncations, [.init(fetch: 3, end: 50_000)])
        XCTAssertEqual(plan.steps, [.net(50_000..<51_000)])
        XCTAssertEqual(plan.fetches, [.init(start: 50_000, end: 100_000)], "the new fetch inherits the old one's duty")
    }

    func testAFastFetchIsWaitedForEvenFarAheadOfItsCursor() {
        let planner = ReadPlanner(readAhead: 0, seekThreshold: 1000, catchUp: 0.5)
        // 8 MB ahead of a fetch running at 100 MB/s: it gets there in 80 ms. Kernel read-ahead
        // does this to every fast stream; a new request would only download the bytes twice.
        let fast = [ReadPlanner.RunningFetch(id: 4, cursor: 0, end: 50_000_000, bytesPerSecond: 100_000_000)]
        let plan = planner.plan(request: 8_000_000..<8_100_000, length: 50_000_000, cached: RangeSet(), running: fast)
        XCTAssertEqual(plan.steps, [.wait(8_000_000..<8_100_000, fetch: 4)])
        XCTAssertTrue(plan.truncations.isEmpty)
        // The same distance at 1 MB/s is a seek.
        let slow = [ReadPlanner.RunningFetch(id: 4, cursor: 0, end: 50_000_000, bytesPerSecond: 1_000_000)]
        let seek = planner.plan(request: 8_000_000..<8_100_000, length: 50_000_000, cached: RangeSet(), running: slow)
        XCTAssertEqual(seek.truncations, [.init(fetch: 4, end: 8_000_000)])
    }

    func testReadAheadGapIsFetchedOnlyWhenItIsWorthIt() {
        let planner = ReadPlanner(readAhead: 1000)
        let running = [ReadPlanner.RunningFetch(id: 1, cursor: 0, end: 900)]
        let small = planner.plan(request: 0..<100, length: 100_000, cached: RangeSet(), running: running)
        XCTAssertTrue(small.fetches.isEmpty, "a 200-byte gap in a 1000-byte window waits")
        let big = planner.plan(request: 0..<100, length: 100_000, cached: RangeSet(),
                               running: [.init(id: 1, cursor: 0, end: 400)])
        XCTAssertEqual(big.fetches, [.init(start: 400, end: 1100)])
    }

    func testAFetchThatRanPastItsTruncatedEndIsNotWaitedFor() {
        var table = InFlightTable()
        table.start(id: 1, generation: 1, start: 0, end: 1000, reader: 7, now: 0)
        table.truncate(1, at: 500)
        XCTAssertEqual(table.advance(1, to: 600, now: 0.5), .stop, "chunks overshoot a truncated end")
        XCTAssertEqual(table.running(generation: 1, now: 1), [])
        let plan = ReadPlanner(readAhead: 1000).plan(request: 0..<100, length: 10_000, cached: RangeSet([0..<600]),
                                                     running: [.init(id: 1, cursor: 600, end: 500)])
        XCTAssertTrue(plan.isHit)
    }

    func testRangeSetArithmetic() {
        var s = RangeSet()
        XCTAssertEqual(s.insert(0..<10), 10)
        XCTAssertEqual(s.insert(5..<15), 5)
        XCTAssertEqual(s.insert(20..<30), 10)
        XCTAssertEqual(s.ranges, [0..<15, 20..<30])
        XCTAssertEqual(s.gaps(in: 0..<40), [15..<20, 30..<40])
        XCTAssertEqual(s.remove(10..<25), 10)
        XCTAssertEqual(s.ranges, [0..<10, 25..<30])
        XCTAssertTrue(s.contains(2..<8))
        XCTAssertFalse(s.contains(8..<26))
        XCTAssertEqual(s.insert(10..<25), 15)
        XCTAssertEqual(s.ranges, [0..<30])
        XCTAssertEqual(s.nextPresent(atOrAfter: 31), nil)
    }

    // MARK: Hostile numbers: nothing here may trap

    func testTheLengthLimitIs2To62AndLeavesRoomForAnyTwoInRangeNumbers() {
        XCTAssertEqual(FileLength.limit, 4_611_686_018_427_387_904)
        XCTAssertTrue(FileLength.isRepresentable(0))
        XCTAssertTrue(FileLength.isRepresentable(FileLength.limit))
        XCTAssertFalse(FileLength.isRepresentable(FileLength.limit + 1))
        XCTAssertFalse(FileLength.isRepresentable(.max))
        XCTAssertFalse(FileLength.isRepresentable(-1))
        XCTAssertEqual(FileLength.limit.addingClamped(FileLength.limit - 1), .max, "2^63 - 1: the sum of two in-range numbers fits")
        XCTAssertEqual(Int64.max.addingClamped(1), .max)
        XCTAssertEqual(Int64.min.addingClamped(-1), .min)
        XCTAssertEqual(Int64(5).addingClamped(-7), -2)
    }

    func testReadAheadAfterARequestEndingAtInt64MaxIsClamped() {
        // A suffix range of a file claiming Int64.max bytes, or a kernel read at the top of off_t.
        let planner = ReadPlanner(readAhead: 32 << 20)
        let end = Int64.max
        let plan = planner.plan(request: (end - 1)..<end, length: nil, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [.init(start: end - 1, end: end)])
        let known = planner.plan(request: (end - 1)..<end, length: end, cached: RangeSet(), running: [])
        XCTAssertEqual(known.fetches, [.init(start: end - 1, end: end)])
        let beyond = planner.plan(request: (end - 10)..<(end - 5), length: nil, cached: RangeSet(), running: [])
        XCTAssertEqual(beyond.fetches, [.init(start: end - 10, end: end)], "read-ahead stops at Int64.max")
    }

    func testAbsurdRatesOfARunningFetchDoNotTrap() {
        for rate in [Double.infinity, .nan, 1e300, -5, Double(Int64.max)] {
            let running = [ReadPlanner.RunningFetch(id: 1, cursor: 0, end: nil, bytesPerSecond: rate)]
            let plan = ReadPlanner(readAhead: 0).plan(request: 100_000_000..<100_000_100, length: nil,
                                                      cached: RangeSet(), running: running)
            XCTAssertFalse(plan.steps.isEmpty, "rate \(rate)")
        }
        XCTAssertEqual(ReadPlanner.bytes(catchingUpAt: .infinity, for: 0.5), FileLength.limit)
        XCTAssertEqual(ReadPlanner.bytes(catchingUpAt: .nan, for: 0.5), 0)
        XCTAssertEqual(ReadPlanner.bytes(catchingUpAt: 1e300, for: 0.5), FileLength.limit)
        XCTAssertEqual(ReadPlanner.bytes(catchingUpAt: 1000, for: 0.5), 500)
        XCTAssertEqual(ReadPlanner.bytes(catchingUpAt: nil, for: 0.5), 0)
    }

    func testReadAheadIsSplitIntoParallelStreamsButTheRequestStaysInOneFetch() {
        let mib: Int64 = 1 << 20
        let planner = ReadPlanner(readAhead: 16 * mib, streamSize: 4 * mib)
        let plan = planner.plan(request: 0..<(1 * mib), length: 100 * mib, cached: RangeSet(), running: [])
        XCTAssertEqual(plan.fetches, [
            .init(start: 0, end: 4 * mib), .init(start: 4 * mib, end: 8 * mib),
            .init(start: 8 * mib, end: 12 * mib), .init(start: 12 * mib, end: 17 * mib),
        ], "a remainder under half a stream joins the last one")
        // A request larger than a stream is never split: the read waits on one fetch.
        let big = planner.plan(request: 0..<(6 * mib), length: 100 * mib, cached: RangeSet(), running: [])
        XCTAssertEqual(big.fetches.first, .init(start: 0, end: 6 * mib))
        XCTAssertEqual(ReadPlanner.streams(of: .init(start: 5, end: nil), keepingWhole: 10, size: 4), [.init(start: 5, end: nil)],
                       "a fetch to the end of an unknown length stays whole")
    }

    func testAReadNearWhereTheLastEndedContinuesSequentially() {
        let mib: Int64 = 1 << 20
        func continues(_ start: Int64, after lastEnd: Int64) -> Bool {
            ReadPlanner.continuesSequentially(start..<(start + 128 << 10), lastEnd: lastEnd, slack: mib,
                                              cached: RangeSet(), running: [])
        }
        XCTAssertTrue(continues(4 * mib, after: 4 * mib))
        XCTAssertTrue(continues(4 * mib + 512 << 10, after: 4 * mib), "slightly ahead: reads issued together")
        XCTAssertTrue(continues(3 * mib + 512 << 10, after: 4 * mib), "slightly behind: out of order")
        XCTAssertFalse(continues(8 * mib, after: 4 * mib), "a jump over bytes nobody has is a seek")
        XCTAssertFalse(continues(0, after: 4 * mib), "back to the start is a seek")
        XCTAssertFalse(continues(0, after: -1), "a first read continues nothing")
        XCTAssertTrue(ReadPlanner.continuesSequentially((2 * mib)..<(3 * mib), lastEnd: 8 * mib, slack: mib, behind: 8 * mib,
                                                        cached: RangeSet(), running: []),
                      "the kernel's readahead reads arrive out of order by up to the reader's window")
        XCTAssertFalse(ReadPlanner.continuesSequentially((1 * mib)..<(2 * mib), lastEnd: 12 * mib, slack: mib, behind: 8 * mib,
                                                         cached: RangeSet(), running: []),
                       "further back is a seek")
    }

    func testAJumpOverBytesOtherReadersBroughtInOrAreFetchingContinuesSequentially() {
        // Readers of one file share the page cache: one reader's next read skips what the
        // others' reads brought in. Its fetches ahead must keep running for them.
        let mib: Int64 = 1 << 20
        let request = (20 * mib)..<(20 * mib + 128 << 10)
        let cached = RangeSet([0..<(12 * mib)])
        let running = [ReadPlanner.RunningFetch(id: 1, cursor: 12 * mib, end: 16 * mib),
                       ReadPlanner.RunningFetch(id: 2, cursor: 16 * mib, end: nil)]
        XCTAssertTrue(ReadPlanner.continuesSequentially(request, lastEnd: 4 * mib, slack: mib, cached: cached, running: running))
        XCTAssertFalse(ReadPlanner.continuesSequentially(request, lastEnd: 4 * mib, slack: mib, cached: cached,
                                                         running: [running[1]]),
                       "a hole nobody fetches (12-16 MiB) makes it a seek")
        XCTAssertFalse(ReadPlanner.continuesSequentially(request, lastEnd: 4 * mib, slack: mib, cached: cached,
                                                         running: [.init(id: 1, cursor: 12 * mib, end: 16 * mib),
                                                                   .init(id: 2, cursor: 17 * mib, end: nil)]),
                       "bytes a fetch already passed and that are not cached are a hole too")
        XCTAssertFalse(ReadPlanner.continuesSequentially(0..<(128 << 10), lastEnd: 20 * mib, slack: mib, cached: cached, running: running),
                       "backwards over cached bytes is still a seek")
    }
}
