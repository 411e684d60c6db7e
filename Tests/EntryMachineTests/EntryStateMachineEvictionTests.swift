import CoreTypes
@testable import EntryMachine
import XCTest

/// Eviction's per-entry decision as a table: a slice offered by the evictor's scan (seen last
/// read at t = 10) with its facts now, and what the machine answers and marks. Slice 3 is
/// offered; slice 8 is being evicted by another round in some rows.
final class EntryStateMachineEvictionTests: XCTestCase {
    typealias Machine = EntryStateMachine<Int>
    typealias State = Machine.State
    typealias Facts = Machine.SliceFacts

    private func state(live: Bool = true, evicting: Set<Int64> = []) -> State {
        let f = Machine.Facts(opens: nil, evicting: evicting)
        return live ? .live(f) : .probing(f)
    }

    private let offer = Machine.EvictionOffer(slice: 3, access: 10)
    private let idle = Facts(bytes: 4096, access: 10)

    func testEvictionOffered() {
        struct Row { var line: UInt; var state: State; var now: Facts; var answer: Machine.EvictionAnswer; var next: State }
        var pinned = idle; pinned.pinned = true
        var readSince = idle; readSince.access = 11
        var userPinned = idle; userPinned.userPinned = true
        var unwanted = idle; unwanted.wanted = false
        var empty = idle; empty.bytes = nil
        var scannedSince = idle; scannedSince.scan = true
        var scanOffer = offer; scanOffer.scan = true
        let rows = [
            // An idle slice as the scan saw it goes, and stays marked until its rows are gone.
            Row(line: #line, state: state(), now: idle, answer: .take, next: state(evicting: [3])),
            Row(line: #line, state: state(evicting: [8]), now: idle, answer: .take, next: state(evicting: [3, 8])),
            // Everything else stays, and nothing is marked.
            Row(line: #line, state: state(evicting: [3]), now: idle, answer: .keep(.evicting), next: state(evicting: [3])),
            Row(line: #line, state: state(), now: pinned, answer: .keep(.inUse), next: state()),
            Row(line: #line, state: state(), now: readSince, answer: .keep(.readSince), next: state()),
            Row(line: #line, state: state(), now: userPinned, answer: .keep(.userPinned), next: state()),
            Row(line: #line, state: state(), now: unwanted, answer: .keep(.notWanted), next: state()),
            Row(line: #line, state: state(), now: empty, answer: .keep(.empty), next: state()),
            // A scanner read it since it was offered as an ordinary slice: the scan share has it.
            Row(line: #line, state: state(), now: scannedSince, answer: .keep(.scannedSince), next: state()),
            // No row yet, or gone from its shard: nothing of it is evicted.
            Row(line: #line, state: state(live: false), now: idle, answer: .keep(.notLive), next: state(live: false)),
            Row(line: #line, state: .removed, now: idle, answer: .keep(.notLive), next: .removed),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            XCTAssertEqual(machine.evictionOffered(offer, now: row.now), row.answer, line: row.line)
            XCTAssertEqual(machine.state, row.next, line: row.line)
            var marked: Set<Int64> = []
            if case let .live(f) = row.next { marked = f.evicting }
            XCTAssertEqual(machine.evicting, marked, "what writers stay out of", line: row.line)
            // Offered as a scan slice (the share's own eviction) it is judged as any slice.
            var scanMachine = Machine(state: row.state)
            var now = row.now; now.scan = true
            XCTAssertEqual(scanMachine.evictionOffered(scanOffer, now: now), row.answer == .keep(.scannedSince) ? .take : row.answer,
                           "offered as a scan slice", line: row.line)
        }
    }

    func testEvictionCommitted() {
        struct Row { var line: UInt; var state: State; var committed: [Int64]; var next: State }
        let rows = [
            // Writers may use the committed slices again; others stay marked.
            Row(line: #line, state: state(evicting: [3, 8]), committed: [3], next: state(evicting: [8])),
            Row(line: #line, state: state(evicting: [3, 8]), committed: [3, 8], next: state()),
            // A slice not marked (a repeated commit) changes nothing.
            Row(line: #line, state: state(evicting: [8]), committed: [3], next: state(evicting: [8])),
            // An entry that became a probe again keeps its life; a removed one has nothing.
            Row(line: #line, state: state(live: false, evicting: [3]), committed: [3], next: state(live: false)),
            Row(line: #line, state: .removed, committed: [3], next: .removed),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            machine.evictionCommitted(row.committed)
            XCTAssertEqual(machine.state, row.next, line: row.line)
        }
    }
}
