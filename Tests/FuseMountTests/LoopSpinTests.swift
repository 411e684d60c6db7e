import XCTest
@testable import FuseMount

/// When the FUSE loop waits for its next request awake: only inside a burst, for a bounded time.
final class LoopSpinTests: XCTestCase {
    let us: UInt64 = 1_000

    func testALoneRequestLetsTheLoopSleep() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        XCTAssertNil(spin.awakeUntil(now: 0), "nothing came yet")
        spin.answered(at: 1_000 * us)
        XCTAssertNil(spin.awakeUntil(now: 1_001 * us), "one request is not a burst")
    }

    func testTwoRequestsInsideTheWindowKeepItAwakeUntilTheWindowAfterTheLast() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        spin.answered(at: 1_000 * us)
        spin.answered(at: 1_020 * us)
        XCTAssertEqual(spin.awakeUntil(now: 1_025 * us), 1_070 * us)
        XCTAssertNil(spin.awakeUntil(now: 1_070 * us), "the window after the last request is over")
    }

    func testAGapAsLongAsTheWindowEndsTheBurst() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        spin.answered(at: 1_000 * us)
        spin.answered(at: 1_010 * us)
        spin.answered(at: 1_060 * us)
        XCTAssertNil(spin.awakeUntil(now: 1_061 * us), "a player's reads, far apart, never spin it")
        spin.answered(at: 1_070 * us)
        XCTAssertEqual(spin.awakeUntil(now: 1_071 * us), 1_120 * us, "the next close pair starts a burst again")
    }

    func testOneCPUOrAWindowOfZeroNeverSpins() {
        for var spin in [LoopSpin(window: 50 * us, cpus: 1), LoopSpin(window: 0, cpus: 8)] {
            spin.answered(at: 1_000 * us)
            spin.answered(at: 1_001 * us)
            XCTAssertNil(spin.awakeUntil(now: 1_002 * us))
            XCTAssertEqual(spin.window, 0)
        }
    }

    func testTheClockGoingBackDoesNotTrap() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        spin.answered(at: 1_000 * us)
        spin.answered(at: 900 * us)
        XCTAssertNil(spin.awakeUntil(now: 901 * us), "a negative gap wraps to a long one: no burst")
    }

    func testARequestHandedToAnEngineThreadLetsTheLoopSleep() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        spin.arrived(at: 1_000 * us)
        spin.served(inline: false)
        spin.arrived(at: 1_005 * us)
        spin.served(inline: false)
        XCTAssertNil(spin.awakeUntil(now: 1_006 * us), "a cold read's burst of READs: the replies come later, from elsewhere")
        spin.arrived(at: 1_010 * us)
        spin.served(inline: true)
        XCTAssertEqual(spin.awakeUntil(now: 1_011 * us), 1_060 * us, "a hit answered on the loop")
    }

    func testACatOfSmallFilesKeepsItAwakeThroughout() {
        var spin = LoopSpin(window: 50 * us, cpus: 2)
        var t: UInt64 = 0
        for file in 0..<1_000 {
            spin.arrived(at: t)            // its OPEN
            spin.served(inline: true)
            if file > 0 { XCTAssertEqual(spin.awakeUntil(now: t + 3 * us), t + 50 * us) }
            spin.arrived(at: t + 12 * us)  // its RELEASE
            spin.served(inline: true)
            XCTAssertEqual(spin.awakeUntil(now: t + 14 * us), t + 62 * us)
            t += 20 * us                   // the next file's OPEN
        }
    }
}

private extension LoopSpin {
    /// A request that came at `now` and was answered on the loop.
    mutating func answered(at now: UInt64) {
        arrived(at: now)
        served(inline: true)
    }
}
