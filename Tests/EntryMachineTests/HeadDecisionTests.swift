import CoreTypes
@testable import EntryMachine
import XCTest

/// What a response head means, as a table: version first, then body.
final class HeadDecisionTests: XCTestCase {
    private func decide(isNew: Bool = false, differs: Bool = false, status: Int = 206, bodyStart: Int64 = 100,
                        acceptsRanges: Bool = true, position: Int64 = 100, wholeBodyRunning: Bool = false,
                        provenance: HeadDecision.Provenance = .init()) -> HeadDecision {
        HeadDecision.decide(isNew: isNew, differs: differs, status: status, bodyStart: bodyStart,
                            acceptsRanges: acceptsRanges, position: position, wholeBodyRunning: wholeBodyRunning,
                            provenance: provenance)
    }

    /// A captive portal's "Please log in" page is no new version of the file: a failed revalidation.
    func testA200ThatNamesNoVersionAndLooksLikeAnotherResourceIsAFailedRevalidation() {
        typealias P = HeadDecision.Provenance
        let otherType = "a 200 of another media type, with no ETag or Last-Modified"
        let ignoredRange = "a 200 to a range request of an origin that serves ranges, with no ETag or Last-Modified"
        struct Row { var line: UInt; var differs = true; var status = 200; var position: Int64 = 0; var acceptsRanges = false
                     var provenance: P; var version: HeadDecision.Version }
        let rows: [Row] = [
            // Another media type, no validators: the portal page, to a probe or a read.
            Row(line: #line, provenance: P(namesVersion: false, otherMediaType: true, rangeAsked: true, rangesServed: true),
                version: .failedRevalidation(otherType)),
            Row(line: #line, position: 100, provenance: P(namesVersion: false, otherMediaType: true),
                version: .failedRevalidation(otherType)),
            // The same media type, no validators, but a whole body to a range of a ranges origin.
            Row(line: #line, provenance: P(namesVersion: false, rangeAsked: true, rangesServed: true),
                version: .failedRevalidation(ignoredRange)),
            Row(line: #line, acceptsRanges: true, provenance: P(namesVersion: false, rangeAsked: true, rangesServed: true),
                version: .failedRevalidation(ignoredRange)),
            // An If-Range 200 that names its version is a real new version, whatever its type.
            Row(line: #line, provenance: P(namesVersion: true, otherMediaType: true, rangeAsked: true, rangesServed: true),
                version: .newVersionFromStart),
            // No validators, but nothing else amiss: an origin without ranges or validators changed.
            Row(line: #line, provenance: P(namesVersion: false, rangeAsked: true, rangesServed: false), version: .newVersionFromStart),
            Row(line: #line, provenance: P(namesVersion: false, rangeAsked: false, rangesServed: true), version: .newVersionFromStart),
            // The same version, or a 206, is never distrusted by this rule.
            Row(line: #line, differs: false, provenance: P(namesVersion: false, otherMediaType: true), version: .confirm),
            Row(line: #line, status: 206, provenance: P(namesVersion: false, otherMediaType: true), version: .newVersionRefetch),
        ]
        for row in rows {
            let d = decide(differs: row.differs, status: row.status, bodyStart: row.status == 206 ? row.position : 0,
                           acceptsRanges: row.acceptsRanges, position: row.position, provenance: row.provenance)
            XCTAssertEqual(d.version, row.version, line: row.line)
            if case .failedRevalidation = row.version {
                XCTAssertEqual(d.body, .none, line: row.line)
                XCTAssertFalse(d.proceeds, line: row.line)
            }
        }
    }

    func testTheFirstAnswerMakesTheEntryAndASameVersionAnswerConfirmsIt() {
        XCTAssertEqual(decide(isNew: true), HeadDecision(version: .adoptFirst, body: .partial))
        XCTAssertEqual(decide(), HeadDecision(version: .confirm, body: .partial))
    }

    /// A 200 whose lead the fetcher dropped (a range near the start, `TransferState.usableLead`)
    /// is the range asked for: kept as a 206 would be, and never taken for a new version sent
    /// whole from byte 0 (its bytes do not start there).
    func testA200WhoseLeadWasDroppedIsTheRangeAskedFor() {
        let rows: [(line: UInt, isNew: Bool, differs: Bool, acceptsRanges: Bool, expected: HeadDecision)] = [
            (#line, false, false, true, HeadDecision(version: .confirm, body: .partial)),
            (#line, false, false, false, HeadDecision(version: .confirm, body: .partial)),
            (#line, true, false, false, HeadDecision(version: .adoptFirst, body: .partial)),
            (#line, false, true, true, HeadDecision(version: .newVersionRefetch, body: .none)),
            (#line, false, true, false, HeadDecision(version: .newVersionRefetch, body: .none)),
        ]
        for row in rows {
            XCTAssertEqual(decide(isNew: row.isNew, differs: row.differs, status: 200, bodyStart: 100, acceptsRanges: row.acceptsRanges,
                                  position: 100), row.expected, line: row.line)
        }
        XCTAssertEqual(decide(status: 200, bodyStart: 50, position: 100).body, .wrongStart("asked for bytes from 100, got 50"))
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
