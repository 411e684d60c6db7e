import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// The engine reads time only from its `EngineClock`, which tests inject: what the status page
/// and metrics show of time follows a clock the test moves, so nothing here waits or allows for
/// the machine's clock. (A running transfer's age on the status page, which the layers around
/// the source keep, is Fetcher's `TrackedEngineTests`.)
final class EngineClockTests: GatedEngineTestCase {
    func testMetricsStampTheStartAndErrorsWithTheEnginesClock() {
        let clock = MovableClock()
        let metrics = CacheMetrics(clock: clock.engineClock)
        XCTAssertEqual(metrics.startedAt, clock.now)
        clock.advance(90)
        metrics.noteError(.timeout(url: url), url: url, range: 0..<10)
        XCTAssertEqual(metrics.recentErrors.first?.time, clock.now, "stamped when it happened, by the same clock")
    }
}
