import CoreTypes
@testable import EntryMachine
import XCTest

/// An entry's life with no engine: every state × event, as tables of action and next state.
/// Opens are plain numbers; fetch ids handed out for new probes start at 100.
final class EntryStateMachineTests: XCTestCase {
    typealias Machine = EntryStateMachine<Int>
    typealias State = Machine.State

    private static let newID = 100

    private func facts(opens: [Int]? = nil, probes: Set<Int> = [], ignored: Int = 0) -> Machine.Facts {
        Machine.Facts(opens: opens, probes: probes, ignoredRanges: ignored)
    }

    private func head(_ status: Int = 206, from bodyStart: Int64 = 0, total: Int64? = 1000,
                      acceptsRanges: Bool = true) -> ResponseHead {
        ResponseHead(status: status, finalURL: "http://origin.test/f", bodyStart: bodyStart, totalLength: total,
                     acceptsRanges: acceptsRanges)
    }

    // MARK: Open requested

    func testOpenRequested() {
        struct Row { var line: UInt; var state: State; var fresh: Bool; var action: Machine.OpenAction; var next: State }
        let rows = [
            Row(line: #line, state: .probing(facts()), fresh: false,
                action: .startProbe(fetchID: Self.newID), next: .probing(facts(opens: [7], probes: [Self.newID]))),
            Row(line: #line, state: .probing(facts()), fresh: true,   // only a live entry can be fresh
                action: .startProbe(fetchID: Self.newID), next: .probing(facts(opens: [7], probes: [Self.newID]))),
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), fresh: false,
                action: .wait, next: .probing(facts(opens: [1, 7], probes: [5]))),
            Row(line: #line, state: .live(facts()), fresh: true,
                action: .answer, next: .live(facts())),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), fresh: true,
                action: .answer, next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .live(facts(ignored: 2)), fresh: false,
                action: .startProbe(fetchID: Self.newID), next: .live(facts(opens: [7], probes: [Self.newID], ignored: 2))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), fresh: false,
                action: .wait, next: .live(facts(opens: [1, 7], probes: [5]))),
            // A probe whose head answered its opens runs on; the next open starts another.
            Row(line: #line, state: .live(facts(probes: [5])), fresh: false,
                action: .startProbe(fetchID: Self.newID), next: .live(facts(opens: [7], probes: [5, Self.newID]))),
            Row(line: #line, state: .removed, fresh: false, action: .cancel, next: .removed),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            var ids = Self.newID - 1
            let action = machine.openRequested(7, fresh: row.fresh, makeFetchID: { ids += 1; return ids })
            XCTAssertEqual(action, row.action, line: row.line)
            XCTAssertEqual(machine.state, row.next, line: row.line)
            if case .startProbe = action {} else { XCTAssertEqual(ids, Self.newID - 1, "no id taken", line: row.line) }
        }
    }

    // MARK: Head arrived

    func testHeadArrived() {
        struct Row {
            var line: UInt
            var state: State
            var fetch = 5
            var current = true
            var head: ResponseHead
            var differs = false
            var position: Int64 = 0
            var lengthKnown = false
            var wholeBodyRunning = false
            var provenance = HeadDecision.Provenance()
            var action: Machine.HeadAction
            var proceeds: Bool?
            var next: State
        }
        let d = HeadDecision.init(version:body:)
        let rows: [Row] = [
            // The first answer: the entry becomes live; a probe's length answers the opens.
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), head: head(),
                action: .apply(d(.adoptFirst, .partial), answer: [1], reprobe: nil), proceeds: true,
                next: .live(facts(probes: [5]))),
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), head: head(total: nil),
                action: .apply(d(.adoptFirst, .partial), answer: [], reprobe: nil), proceeds: true,
                next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), fetch: 9, head: head(),
                action: .apply(d(.adoptFirst, .partial), answer: [], reprobe: nil), proceeds: true,
                next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), head: head(206, from: 40), position: 0,
                action: .apply(d(.adoptFirst, .wrongStart("asked for bytes from 0, got 40")), answer: [], reprobe: nil),
                proceeds: false, next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), current: false, head: head(),
                action: .stop, next: .probing(facts(opens: [1], probes: [5]))),
            // The same version: confirmed; a 206 ends a run of ignored ranges.
            Row(line: #line, state: .live(facts(ignored: 2)), fetch: 9, head: head(206, from: 100), position: 100,
                lengthKnown: true, action: .apply(d(.confirm, .partial), answer: [], reprobe: nil), proceeds: true,
                next: .live(facts())),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), head: head(total: nil), lengthKnown: true,
                action: .apply(d(.confirm, .partial), answer: [1], reprobe: nil), proceeds: true,
                next: .live(facts(probes: [5]))),
            Row(line: #line, state: .live(facts(ignored: 2)), head: head(200, from: 0, total: 1000), position: 0,
                action: .apply(d(.confirm, .partial), answer: [], reprobe: nil), proceeds: true,
                next: .live(facts(ignored: 2))),
            // The whole body to a range: kept, counted; given way to one already streaming.
            Row(line: #line, state: .live(facts(ignored: 2)), fetch: 9, head: head(200), position: 100, lengthKnown: true,
                action: .apply(d(.confirm, .whole(ignoredRange: true)), answer: [], reprobe: nil), proceeds: true,
                next: .live(facts(ignored: 3))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), head: head(200, acceptsRanges: false),
                action: .apply(d(.confirm, .whole(ignoredRange: false)), answer: [1], reprobe: nil), proceeds: true,
                next: .live(facts(probes: [5]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), head: head(200), position: 100,
                lengthKnown: true, wholeBodyRunning: true,
                action: .apply(d(.confirm, .giveWay), answer: [], reprobe: nil), proceeds: false,
                next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .live(facts(ignored: 2)), fetch: 9, head: head(206, from: 0), position: 100,
                lengthKnown: true,
                action: .apply(d(.confirm, .wrongStart("asked for bytes from 100, got 0")), answer: [], reprobe: nil),
                proceeds: false, next: .live(facts(ignored: 2))),
            // Another version: asked again; a probe answers the opens, or probes again without a length.
            Row(line: #line, state: .live(facts(opens: [1], probes: [5], ignored: 2)), head: head(), differs: true,
                lengthKnown: true, action: .apply(d(.newVersionRefetch, .none), answer: [1], reprobe: nil),
                proceeds: false, next: .live(facts(probes: [5]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), head: head(total: nil), differs: true,
                lengthKnown: true, action: .apply(d(.newVersionRefetch, .none), answer: [], reprobe: Self.newID),
                proceeds: false, next: .live(facts(opens: [1], probes: [5, Self.newID]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5], ignored: 2)), fetch: 9, head: head(200),
                differs: true, position: 100, lengthKnown: true,
                action: .apply(d(.newVersionRefetch, .none), answer: [], reprobe: nil), proceeds: false,
                next: .live(facts(opens: [1], probes: [5]))),
            // Another version sent whole from byte 0: this transfer fills it.
            Row(line: #line, state: .live(facts(opens: [1], probes: [5], ignored: 2)),
                head: head(200, acceptsRanges: false), differs: true, lengthKnown: true, wholeBodyRunning: true,
                action: .apply(d(.newVersionFromStart, .whole(ignoredRange: false)), answer: [1], reprobe: nil),
                proceeds: true, next: .live(facts(probes: [5]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), head: head(200, total: nil, acceptsRanges: false),
                differs: true, lengthKnown: true,
                action: .apply(d(.newVersionFromStart, .whole(ignoredRange: false)), answer: [], reprobe: nil),
                proceeds: true, next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), current: false, head: head(),
                action: .stop, next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .removed, head: head(), action: .stop, next: .removed),
            // Not a version of this file (a portal's login page): the probe's opens get the cached
            // copy (or fail without a length); the entry and its count of ignored ranges stay.
            Row(line: #line, state: .live(facts(opens: [1], probes: [5], ignored: 2)), head: head(200, total: 53, acceptsRanges: false),
                differs: true, lengthKnown: true, provenance: .init(namesVersion: false, otherMediaType: true),
                action: .failedRevalidation("a 200 of another media type, with no ETag or Last-Modified", answer: [1], staleCopy: true),
                proceeds: nil, next: .live(facts(probes: [5], ignored: 2))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), head: head(200, total: 53, acceptsRanges: false),
                differs: true, provenance: .init(namesVersion: false, rangeAsked: true, rangesServed: true),
                action: .failedRevalidation("a 200 to a range request of an origin that serves ranges, with no ETag or Last-Modified",
                                            answer: [1], staleCopy: false),
                proceeds: nil, next: .live(facts(probes: [5]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), fetch: 9, head: head(200, total: 53, acceptsRanges: false),
                differs: true, position: 100, lengthKnown: true, provenance: .init(namesVersion: false, otherMediaType: true),
                action: .failedRevalidation("a 200 of another media type, with no ETag or Last-Modified", answer: [], staleCopy: true),
                proceeds: nil, next: .live(facts(opens: [1], probes: [5]))),
            // A first answer is believed whatever it is.
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), head: head(200, total: 53, acceptsRanges: false),
                differs: true, provenance: .init(namesVersion: false, otherMediaType: true),
                action: .apply(d(.adoptFirst, .whole(ignoredRange: false)), answer: [1], reprobe: nil), proceeds: true,
                next: .live(facts(probes: [5]))),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            var ids = Self.newID - 1
            let action = machine.headArrived(fetch: row.fetch, current: row.current, head: row.head,
                                             differs: row.differs, position: row.position,
                                             lengthKnown: row.lengthKnown, wholeBodyRunning: row.wholeBodyRunning,
                                             provenance: row.provenance, makeFetchID: { ids += 1; return ids })
            XCTAssertEqual(action, row.action, line: row.line)
            XCTAssertEqual(machine.state, row.next, line: row.line)
            if case let .apply(decision, _, _) = action { XCTAssertEqual(decision.proceeds, row.proceeds, line: row.line) }
        }
    }

    // MARK: Transfer finished

    func testTransferFinished() {
        struct Row {
            var line: UInt
            var state: State
            var fetch = 5
            var current = true
            var reachedEOF = false
            var lengthKnown = true
            var cause: CacheError?
            var action: Machine.FinishAction
            var next: State
        }
        let down = CacheError.unreachable(url: "u", message: "refused")
        let gone = CacheError.notFound(url: "u", status: 404)
        let answer = { (opens: [Int], with: Machine.OpenAnswer) in Machine.Answer(opens: opens, with: with) }
        let rows: [Row] = [
            // A probe of the entry's version answers with what it learned.
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])),
                action: .settle(learnLength: false, answer: answer([1], .info), removeIfUnused: false),
                next: .live(facts())),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), lengthKnown: false,
                action: .settle(learnLength: false, answer: answer([1], .noLength), removeIfUnused: false),
                next: .live(facts())),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), cause: down,
                action: .settle(learnLength: false, answer: answer([1], .staleCopy(down)), removeIfUnused: false),
                next: .live(facts())),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), lengthKnown: false, cause: down,
                action: .settle(learnLength: false, answer: answer([1], .failure(down)), removeIfUnused: false),
                next: .live(facts())),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), cause: gone,
                action: .settle(learnLength: false, answer: answer([1], .failure(gone)), removeIfUnused: false),
                next: .live(facts())),
            Row(line: #line, state: .live(facts(probes: [5, 6])),
                action: .settle(learnLength: false, answer: nil, removeIfUnused: false),
                next: .live(facts(probes: [6]))),
            // An older probe that ends (its head answered its own opens) leaves the opens of a
            // newer one to it: they asked after it began (a refresh, max-age 0).
            Row(line: #line, state: .live(facts(opens: [1], probes: [5, 6])),
                action: .settle(learnLength: false, answer: nil, removeIfUnused: false),
                next: .live(facts(opens: [1], probes: [6]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5, 6])), reachedEOF: true, lengthKnown: false,
                action: .settle(learnLength: true, answer: nil, removeIfUnused: false),
                next: .live(facts(opens: [1], probes: [6]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [4, 5])),
                action: .settle(learnLength: false, answer: answer([1], .info), removeIfUnused: false),
                next: .live(facts(probes: [4]))),
            // The end of a body with no length is the end of the file, whoever fetched it.
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), fetch: 9, reachedEOF: true, lengthKnown: false,
                action: .settle(learnLength: true, answer: answer([1], .info), removeIfUnused: false),
                next: .live(facts(probes: [5]))),
            Row(line: #line, state: .live(facts()), fetch: 9, reachedEOF: true, lengthKnown: true,
                action: .settle(learnLength: false, answer: nil, removeIfUnused: false), next: .live(facts())),
            // Another transfer answers no opens.
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), fetch: 9, cause: down,
                action: .settle(learnLength: false, answer: nil, removeIfUnused: false),
                next: .live(facts(opens: [1], probes: [5]))),
            // A first probe that failed takes its entry away; one that was cancelled does not.
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), lengthKnown: false, cause: gone,
                action: .settle(learnLength: false, answer: answer([1], .failure(gone)), removeIfUnused: true),
                next: .probing(facts())),
            Row(line: #line, state: .probing(facts(opens: [1], probes: [5])), lengthKnown: false,
                action: .settle(learnLength: false, answer: answer([1], .noLength), removeIfUnused: false),
                next: .probing(facts())),
            // A new version was found meanwhile.
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), current: false,
                action: .otherVersion(answer: answer([1], .info)), next: .live(facts())),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5, 6])), current: false, lengthKnown: false,
                action: .otherVersion(answer: nil), next: .live(facts(opens: [1], probes: [6]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5, 6])), current: false,
                action: .otherVersion(answer: nil), next: .live(facts(opens: [1], probes: [6]))),
            Row(line: #line, state: .live(facts(opens: [1], probes: [5])), fetch: 9, current: false,
                action: .otherVersion(answer: nil), next: .live(facts(opens: [1], probes: [5]))),
            Row(line: #line, state: .removed, cause: down, action: .none, next: .removed),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            let action = machine.transferFinished(fetch: row.fetch, current: row.current, reachedEOF: row.reachedEOF,
                                                  lengthKnown: row.lengthKnown, cause: row.cause)
            XCTAssertEqual(action, row.action, line: row.line)
            XCTAssertEqual(machine.state, row.next, line: row.line)
        }
    }

    // MARK: Removed

    func testRemoved() {
        let rows: [(line: UInt, state: State, action: Machine.RemoveAction)] = [
            (#line, .probing(facts(opens: [1, 2], probes: [5])), .leave(cancelOpens: [1, 2])),
            (#line, .live(facts(probes: [5], ignored: 3)), .leave(cancelOpens: [])),
            (#line, .removed, .none),
        ]
        for row in rows {
            var machine = Machine(state: row.state)
            XCTAssertEqual(machine.removed(), row.action, line: row.line)
            XCTAssertEqual(machine.state, .removed, line: row.line)
        }
    }

    // MARK: A whole life

    func testALifeFromFirstOpenToRemoval() {
        var machine = Machine(persisted: false)
        var ids = 0
        let next = { () -> Int in ids += 1; return ids }
        XCTAssertEqual(machine.openRequested(1, fresh: false, makeFetchID: { next() }), .startProbe(fetchID: 1))
        XCTAssertEqual(machine.openRequested(2, fresh: false, makeFetchID: { next() }), .wait, "one probe for both")
        XCTAssertEqual(machine.headArrived(fetch: 1, current: true, head: head(), differs: false, position: 0,
                                           lengthKnown: false, wholeBodyRunning: false, makeFetchID: { next() }),
                       .apply(HeadDecision(version: .adoptFirst, body: .partial), answer: [1, 2], reprobe: nil))
        XCTAssertTrue(machine.isLive)
        XCTAssertEqual(machine.openRequested(3, fresh: true, makeFetchID: { next() }), .answer)
        XCTAssertEqual(machine.transferFinished(fetch: 1, current: true, reachedEOF: false, lengthKnown: true, cause: nil),
                       .settle(learnLength: false, answer: nil, removeIfUnused: false), "its opens were answered")
        XCTAssertEqual(machine.openRequested(4, fresh: false, makeFetchID: { next() }), .startProbe(fetchID: 2),
                       "a stale entry is revalidated")
        XCTAssertEqual(machine.removed(), .leave(cancelOpens: [4]))
        XCTAssertEqual(machine.removed(), .none)
        XCTAssertEqual(machine.openRequested(5, fresh: true, makeFetchID: { next() }), .cancel)
        XCTAssertEqual(machine.headArrived(fetch: 2, current: true, head: head(), differs: false, position: 0,
                                           lengthKnown: true, wholeBodyRunning: false, makeFetchID: { next() }), .stop)
        XCTAssertEqual(ids, 2)
    }
}
