@testable import CacheCore
import XCTest

/// The sink's cursor (`EntrySink`): what of an arrival is compared with the cached bytes and what
/// is delivered, and whether a transfer whose range is done goes on.
final class EntrySinkCursorTests: XCTestCase {
    func testAnArrivalDividesIntoComparedAndDeliveredBytes() {
        struct Row { var line: UInt; var count: Int; var position: Int64; var deliver: Range<Int64>; var front: Int; var middle: Int }
        let rows = [
            // Everything kept (no overlap checks): all delivered.
            Row(line: #line, count: 100, position: 0, deliver: 0..<Int64.max, front: 0, middle: 100),
            // Compared bytes before the range, then the range, then compared bytes after it.
            Row(line: #line, count: 100, position: 0, deliver: 50..<500, front: 50, middle: 50),
            Row(line: #line, count: 100, position: 50, deliver: 50..<500, front: 0, middle: 100),
            Row(line: #line, count: 100, position: 450, deliver: 50..<500, front: 0, middle: 50),
            Row(line: #line, count: 100, position: 500, deliver: 50..<500, front: 0, middle: 0),
            Row(line: #line, count: 100, position: 0, deliver: 200..<500, front: 100, middle: 0),
            Row(line: #line, count: 1000, position: 0, deliver: 200..<500, front: 200, middle: 300),
        ]
        for row in rows {
            let (front, middle) = EntrySink.split(count: row.count, at: row.position, deliver: row.deliver)
            XCTAssertEqual(front, row.front, line: row.line)
            XCTAssertEqual(middle, row.middle, line: row.line)
        }
    }

    func testATransferWhoseRangeIsDoneGoesOnWhileBytesAfterItAreToBeCompared() {
        struct Row { var line: UInt; var flow: FetchFlow; var position: Int64; var checksLeft: Bool; var failed = false; var next: FetchFlow }
        let deliver: Range<Int64> = 50..<500
        let rows = [
            Row(line: #line, flow: .proceed, position: 300, checksLeft: true, next: .proceed),
            Row(line: #line, flow: .stop, position: 500, checksLeft: true, next: .proceed),
            Row(line: #line, flow: .stop, position: 500, checksLeft: false, next: .stop),
            Row(line: #line, flow: .stop, position: 500, checksLeft: true, failed: true, next: .stop),   // cut off, say
            Row(line: #line, flow: .stop, position: 300, checksLeft: true, next: .stop),                 // stopped inside its range
        ]
        for row in rows {
            XCTAssertEqual(EntrySink.flow(after: row.flow, position: row.position, deliver: deliver, checksLeft: row.checksLeft,
                                          failed: row.failed), row.next, line: row.line)
        }
    }
}
