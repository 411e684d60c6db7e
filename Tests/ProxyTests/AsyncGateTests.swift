@testable import Proxy
import TestSupport
import XCTest

/// At most `limit` at once; the next one in once a place is given back.
final class AsyncGateTests: XCTestCase {
    func testAThirdWaitsForAPlaceAndGetsTheFirstOneGivenBack() async {
        let gate = AsyncGate(limit: 2)
        await gate.enter()
        await gate.enter()
        let entered = Locked(false)
        let third = Task {
            await gate.enter()
            entered.value = true
        }
        var waiting = 0
        while waiting == 0 { waiting = await gate.waitingCount; await Task.yield() }
        XCTAssertFalse(entered.value, "two places, both held")
        await gate.leave()
        await third.value
        XCTAssertTrue(entered.value)
        let stillWaiting = await gate.waitingCount
        XCTAssertEqual(stillWaiting, 0)
    }
}
