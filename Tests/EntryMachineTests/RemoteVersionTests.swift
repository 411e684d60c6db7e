import CoreTypes
@testable import EntryMachine
import XCTest

/// "Did the remote file change?", as a table: validators compared where both sides have them,
/// ETags not at all when told so; an ETag that changed alone (same length and date) recognised.
final class RemoteVersionTests: XCTestCase {
    func testChangeReasons() {
        let lm = "Mon, 01 Jan 2024 00:00:00 GMT", later = "Tue, 02 Jan 2024 00:00:00 GMT"
        struct Row { var line: UInt; var old: (String?, String?, Int64?); var new: (String?, String?, Int64?)
                     var ignoringETag = false; var reason: String?; var rotated = false }
        let rows: [Row] = [
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"a\"", lm, 100), reason: nil),
            // Only the ETag changed: a change still (the engine decides on evidence of rotation).
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"b\"", lm, 100), reason: "ETag \"a\" became \"b\"", rotated: true),
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"b\"", lm, 100), ignoringETag: true, reason: nil, rotated: true),
            // Without a Last-Modified (or a length) on both sides the ETag is all there is.
            Row(line: #line, old: ("\"a\"", nil, 100), new: ("\"b\"", nil, 100), reason: "ETag \"a\" became \"b\""),
            Row(line: #line, old: ("\"a\"", lm, nil), new: ("\"b\"", lm, 100), reason: "ETag \"a\" became \"b\""),
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"b\"", later, 100), reason: "ETag \"a\" became \"b\""),
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"b\"", lm, 200), reason: "ETag \"a\" became \"b\""),
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"a\"", later, 100), reason: "Last-Modified \(lm) became \(later)"),
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"a\"", lm, 200), reason: "length 100 became 200"),
            // --ignore-etag: only Last-Modified and the length count.
            Row(line: #line, old: ("\"a\"", nil, 100), new: ("\"b\"", nil, 100), ignoringETag: true, reason: nil),
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"b\"", lm, 200), ignoringETag: true, reason: "length 100 became 200"),
            Row(line: #line, old: ("\"a\"", lm, 100), new: ("\"b\"", later, 100), ignoringETag: true,
                reason: "Last-Modified \(lm) became \(later)"),
        ]
        for r in rows {
            XCTAssertEqual(RemoteVersion.changeReason(etag: r.old.0, lastModified: r.old.1, length: r.old.2,
                                                      to: r.new.0, r.new.1, r.new.2, ignoringETag: r.ignoringETag),
                           r.reason, line: r.line)
            XCTAssertEqual(RemoteVersion.etagRotated(etag: r.old.0, lastModified: r.old.1, length: r.old.2,
                                                     to: r.new.0, r.new.1, r.new.2), r.rotated, line: r.line)
        }
    }
}
