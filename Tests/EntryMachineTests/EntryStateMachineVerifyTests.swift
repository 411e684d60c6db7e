import CoreTypes
@testable import EntryMachine
import XCTest

/// The verify marks as tables: which slices of an entry are still unchecked since the start,
/// which are queued for a check ahead of a reader, and what each event leaves to check.
final class EntryStateMachineVerifyTests: XCTestCase {
    typealias Machine = EntryStateMachine<Int>
    typealias State = Machine.State

    private func live(unchecked: Set<Int64> = [], queued: Set<Int64> = []) -> State {
        .live(Machine.Facts(opens: nil, unverified: unchecked, verifyQueued: queued))
    }

    func testLoadedUnchecked() {
        var machine = Machine(state: live())
        machine.loadedUnchecked([1, 2])
        machine.loadedUnchecked([2, 5])
        XCTAssertEqual(machine.state, live(unchecked: [1, 2, 5]), "every slice found at start waits for its check")
        var removed = Machine(state: .removed)
        removed.loadedUnchecked([1])
        XCTAssertEqual(removed.state, .removed)
    }

    func testVerifyAheadRequested() {
        struct Row { var line: UInt; var state: State; var ahead: [Int64]; var queue: [Int64]; var next: State }
        let rows = [
            // Unchecked slices ahead of the reader are queued once.
            Row(line: #line, state: live(unchecked: [3, 4]), ahead: [3, 4], queue: [3, 4], next: live(unchecked: [3, 4], queued: [3, 4])),
            Row(line: #line, state: live(unchecked: [3, 4], queued: [3]), ahead: [3, 4], queue: [4], next: live(unchecked: [3, 4], queued: [3, 4])),
            Row(line: #line, state: live(unchecked: [3, 4], queued: [3, 4]), ahead: [3, 4], queue: [], next: live(unchecked: [3, 4], queued: [3, 4])),
            // Checked slices (or never unchecked) need nothing.
            Row(line: #line, state: live(unchecked: [9]), ahead: [3, 4], queue: [], next: live(unchecked: [9])),
            Row(line: #line, state: .removed, ahead: [3, 4], queue: [], next: .removed),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            XCTAssertEqual(machine.verifyAheadRequested(row.ahead), row.queue, line: row.line)
            XCTAssertEqual(machine.state, row.next, line: row.line)
        }
    }

    func testVerifyStartedAndFinished() {
        struct Row { var line: UInt; var state: State; var asked: [Int64]; var check: [Int64]; var next: State }
        let rows = [
            // The job takes its slices off the queue and checks those still unchecked.
            Row(line: #line, state: live(unchecked: [3, 4], queued: [3, 4]), asked: [3, 4], check: [3, 4], next: live(unchecked: [3, 4])),
            Row(line: #line, state: live(unchecked: [4], queued: [3, 4]), asked: [3, 4], check: [4], next: live(unchecked: [4])),
            // A second job for a slice checked meanwhile has nothing to do.
            Row(line: #line, state: live(), asked: [3], check: [], next: live()),
            Row(line: #line, state: .removed, asked: [3], check: [], next: .removed),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            XCTAssertEqual(machine.verifyStarted(row.asked), row.check, line: row.line)
            XCTAssertEqual(machine.state, row.next, line: row.line)
        }
        var machine = Machine(state: live(unchecked: [3, 4]))
        machine.verifyFinished(3)
        XCTAssertEqual(machine.state, live(unchecked: [4]), "a checked slice is served")
        machine.verifyFinished(3)
        XCTAssertEqual(machine.state, live(unchecked: [4]), "twice is once")
    }

    func testANewVersionLeavesNothingToCheck() {
        var machine = Machine(state: live(unchecked: [3, 4], queued: [4]))
        machine.uncheckedSlicesForgotten()
        XCTAssertEqual(machine.state, live())
        XCTAssertEqual(machine.unverified, [])
        XCTAssertEqual(machine.verifyQueued, [])
    }
}
