@testable import CacheCore
import XCTest

/// What a response head means, as a table: version first, then body.
final class HeadDecisionTests: XCTestCase {
    private func decide(isNew: Bool = false, differs: Bool = false, status: Int = 206, bodyStart: Int64 = 100,
                        acceptsRanges: Bool = true, position: Int64 = 100, wholeBodyRunning: Bool = false) -> HeadDecision {
        HeadDecision.decide(isNew: isNew, differs: differs, status: status, bodyStart: bodyStart,
                            acceptsRanges: acceptsRanges, position: position, wholeBodyRunning: wholeBodyRunning)
    }

    func testTheFirstAnswerMakesTheEntryAndASameVersionAnswerConfirmsIt() {
        XCTAssertEqual(decide(isNew: true), HeadDecision(version: .adoptFirst, body: .partial))
        XCTAssertEqual(decide(), HeadDecision(version: .confirm, body: .partial))
    }

    func testA206ThatStartsElsewhereIsRefused() {
        XCTAssertEqual(decide(bodyStart: 0).body, .wrongStart("asked for bytes from 100, got 0"))
    }

    func testAnotherVersionIsFetchedAgainUnlessItArrivesWholeFromTheStart() {
        XCTAssertEqual(decide(differs: true), HeadDecision(version: .newVersionRefetch, body: .none))
        XCTAssertEqual(decide(differs: true, status: 200, bodyStart: 0, acceptsRanges: true),
                       HeadDecision(version: .newVersionRefetch, body: .none), "a resumable range: ask again")
        XCTAssertEqual(decide(differs: true, status: 200, bodyStart: 0, acceptsRanges: false, position: 0, wholeBodyRunning: true),
                       HeadDecision(version: .newVersionFromStart, body: .whole(ignoredRange: false)),
                       "the old version's whole-body transfer is stopped: this one fills the new version")
    }

    func testAWholeBodyIsKeptByOneTransferAtATime() {
        XCTAssertEqual(decide(status: 200, bodyStart: 0).body, .whole(ignoredRange: true))
        XCTAssertEqual(decide(status: 200, bodyStart: 0, wholeBodyRunning: true).body, .giveWay)
        XCTAssertEqual(decide(status: 200, bodyStart: 0, acceptsRanges: true, position: 0).body, .partial,
                       "a 200 from byte 0 to a range from byte 0 carries the wanted bytes first")
    }
}
