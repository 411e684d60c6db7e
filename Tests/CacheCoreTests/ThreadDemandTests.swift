import XCTest
@testable import CacheCore

/// Which thread of the pool for blocking I/O runs a job just queued.
final class ThreadDemandTests: XCTestCase {
    func testAJobWakesAnIdleThreadBeforeItStartsOne() {
        XCTAssertEqual(ThreadDemand.forJob(laneHasRoom: true, runnable: 1, coming: 0, idle: 2, threads: 3, bound: 8), .wakeIdle)
        XCTAssertEqual(ThreadDemand.forJob(laneHasRoom: true, runnable: 1, coming: 0, idle: 0, threads: 3, bound: 8), .start,
                       "every thread busy: it does not wait behind another job")
    }

    func testAJobLeftToAThreadAlreadyComingStartsNone() {
        XCTAssertEqual(ThreadDemand.forJob(laneHasRoom: true, runnable: 1, coming: 1, idle: 0, threads: 3, bound: 8), .none,
                       "the thread started for the job before it, which a busy thread took, takes this one")
        XCTAssertEqual(ThreadDemand.forJob(laneHasRoom: true, runnable: 2, coming: 1, idle: 0, threads: 3, bound: 8), .start,
                       "two jobs waiting, one thread coming: one more")
        XCTAssertEqual(ThreadDemand.forJob(laneHasRoom: true, runnable: 2, coming: 1, idle: 1, threads: 3, bound: 8), .wakeIdle)
    }

    func testAFullLaneOrAFullPoolAsksForNoThread() {
        XCTAssertEqual(ThreadDemand.forJob(laneHasRoom: false, runnable: 0, coming: 0, idle: 4, threads: 5, bound: 8), .none,
                       "its lane's own thread takes it when its job ends")
        XCTAssertEqual(ThreadDemand.forJob(laneHasRoom: true, runnable: 1, coming: 0, idle: 0, threads: 8, bound: 8), .none)
    }
}
