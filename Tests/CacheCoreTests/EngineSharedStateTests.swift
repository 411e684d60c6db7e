import Foundation
import XCTest
@testable import CacheCore

/// The engine's small shared parts, each owned by what uses it (`EngineIDs`, `NoRoomWarnings`,
/// `DAVAnswers`), and the monotonic instants their clocks are read as.
final class EngineSharedStateTests: XCTestCase {
    func testIdsAndGenerationsAreNeverHandedOutTwiceAndGenerationsStartAboveTheStoredOnes() {
        let ids = EngineIDs(lastGeneration: 41)
        let made = LockedValue<(ids: [Int], generations: [Int64])>(([], []))
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            var mine: (ids: [Int], generations: [Int64]) = ([], [])
            for _ in 0..<500 {
                mine.ids.append(ids.makeID())
                mine.generations.append(ids.makeGeneration())
            }
            made.withLock { $0.ids += mine.ids; $0.generations += mine.generations }
        }
        let all = made.withLock { $0 }
        XCTAssertEqual(Set(all.ids).count, 4000, "no id twice")
        XCTAssertEqual(Set(all.generations).count, 4000, "no generation twice")
        XCTAssertEqual(all.generations.min(), 42, "above the last one stored")
    }

    func testAFullDiskIsWarnedOfAtMostOnceAMinuteAmongAllTransfers() {
        let warnings = NoRoomWarnings()
        XCTAssertTrue(warnings.shouldWarn(now: 1_000), "the first")
        XCTAssertFalse(warnings.shouldWarn(now: 1_030))
        XCTAssertFalse(warnings.shouldWarn(now: 1_059.9))
        XCTAssertTrue(warnings.shouldWarn(now: 1_060), "a minute later")
        XCTAssertFalse(warnings.shouldWarn(now: 1_061))
    }

    func testAnEntryAnsweredWithDAVIsRememberedUntilAnAnswerWithout() throws {
        let answers = DAVAnswers()
        let key = try KeyRules().key(for: "http://origin.test/folder/")
        XCTAssertFalse(answers.answered(key))
        answers.note(true, key: key)
        XCTAssertTrue(answers.answered(key))
        answers.note(false, key: key)
        XCTAssertFalse(answers.answered(key))
    }

    func testInstantsMoveByDurationsAndNeverBeforeTheClocksZero() {
        let t = MonotonicInstant(nanoseconds: 5_000_000_000)
        XCTAssertEqual(t + .milliseconds(250), MonotonicInstant(nanoseconds: 5_250_000_000))
        XCTAssertEqual(t - .seconds(2), MonotonicInstant(nanoseconds: 3_000_000_000))
        XCTAssertEqual(t - .seconds(9), MonotonicInstant(nanoseconds: 0), "clamped at zero")
        XCTAssertEqual(t + .seconds(-1), t, "a negative amount moves nothing")
        XCTAssertEqual((t + .seconds(3)) - t, .seconds(3))
        XCTAssertEqual(t - (t + .seconds(3)), .zero, "an earlier instant is no time away")
        XCTAssertEqual(Duration.milliseconds(1500).timeInterval, 1.5)
    }
}
