import XCTest
@testable import FuseMount

/// When the FUSE loop waits for its next request awake: only inside a burst, for a bounded time.
final class LoopSpinTests: XCTestCase {
    let us: UInt64 = 1_000

    func testALoneRequestLetsTheLoopSleep() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        XCTAssertNil(spin.awakeUntil(now: 0), "nothing came yet")
        spin.arrived(at: 1_000 * us)
        XCTAssertNil(spin.awakeUntil(now: 1_001 * us), "one request is not a burst")
    }

    func testTwoRequestsInsideTheWindowKeepItAwakeUntilTheWindowAfterTheLast() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        spin.arrived(at: 1_000 * us)
        spin.arrived(at: 1_020 * us)
        XCTAssertEqual(spin.awakeUntil(now: 1_025 * us), 1_070 * us)
        XCTAssertNil(spin.awakeUntil(now: 1_070 * us), "the window after the last request is over")
    }

    func testAGapAsLongAsTheWindowEndsTheBurst() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        spin.arrived(at: 1_000 * us)
        spin.arrived(at: 1_010 * us)
        spin.arrived(at: 1_060 * us)
        XCTAssertNil(spin.awakeUntil(now: 1_061 * us), "a player's reads, far apart, never spin it")
        spin.arrived(at: 1_070 * us)
        XCTAssertEqual(spin.awakeUntil(now: 1_071 * us), 1_120 * us, "the next close pair starts a burst again")
    }

    func testOneCPUOrAWindowOfZeroNeverSpins() {
        for var spin in [LoopSpin(window: 50 * us, cpus: 1), LoopSpin(window: 0, cpus: 8)] {
            spin.arrived(at: 1_000 * us)
            spin.arrived(at: 1_001 * us)
            XCTAssertNil(spin.awakeUntil(now: 1_002 * us))
            XCTAssertEqual(spin.window, 0)
        }
    }

    func testTheClockGoingBackDoesNotTrap() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        spin.arrived(at: 1_000 * us)
        spin.arrived(at: 900 * us)
        XCTAssertNil(spin.awakeUntil(now: 901 * us), "a negative gap wraps to a long one: no burst")
    }
}
