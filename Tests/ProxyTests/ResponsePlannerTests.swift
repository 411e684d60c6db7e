import CacheCore
import XCTest
@testable import Proxy

/// Status, headers and body layout for GET/HEAD against a known representation.
final class ResponsePlannerTests: XCTestCase {
    let rep = Representation(length: 10_000, contentType: "video/mp4", etag: "\"v1\"",
                             lastModified: "Mon, 01 Jan 2024 00:00:00 GMT")

    struct Case {
        var range: String?
        var ifRange: String? = nil
        var status: Int
        var contentRange: String?
        var contentLength: String?
        var body: [BodyPart]
    }

    func testRangeTable() {
        let cases: [Case] = [
            Case(range: nil, status: 200, contentRange: nil, contentLength: "10000", body: [.bytes(0..<10_000)]),
            Case(range: "bytes=0-499", status: 206, contentRange: "bytes 0-499/10000", contentLength: "500", body: [.bytes(0..<500)]),
            Case(range: "bytes=9500-", status: 206, contentRange: "bytes 9500-9999/10000", contentLength: "500", body: [.bytes(9500..<10_000)]),
            Case(range: "bytes=-500", status: 206, contentRange: "bytes 9500-9999/10000", contentLength: "500", body: [.bytes(9500..<10_000)]),
            Case(range: "bytes=0-", status: 206, contentRange: "bytes 0-9999/10000", contentLength: "10000", body: [.bytes(0..<10_000)]),
            Case(range: "bytes=9999-20000", status: 206, contentRange: "bytes 9999-9999/10000", contentLength: "1", body: [.bytes(9999..<10_000)]),
            Case(range: "bytes=-99999", status: 206, contentRange: "bytes 0-9999/10000", contentLength: "10000", body: [.bytes(0..<10_000)]),
            // Unsatisfiable: 416 with the length.
            Case(range: "bytes=10000-", status: 416, contentRange: "bytes */10000", contentLength: nil, body: []),
            Case(range: "bytes=-0", status: 416, contentRange: "bytes */10000", contentLength: nil, body: []),
            // Syntactically invalid: ignored, 200.
            Case(range: "bytes=5-2", status: 200, contentRange: nil, contentLength: "10000", body: [.bytes(0..<10_000)]),
            Case(range: "chapters=1-2", status: 200, contentRange: nil, contentLength: "10000", body: [.bytes(0..<10_000)]),
            Case(range: "garbage", status: 200, contentRange: nil, contentLength: "10000", body: [.bytes(0..<10_000)]),
            // If-Range: strong ETag exact match or the exact date; anything else means "all of it".
            Case(range: "bytes=0-9", ifRange: "\"v1\"", status: 206, contentRange: "bytes 0-9/10000", contentLength: "10", body: [.bytes(0..<10)]),
            Case(range: "bytes=0-9", ifRange: "\"v0\"", status: 200, contentRange: nil, contentLength: "10000", body: [.bytes(0..<10_000)]),
            Case(range: "bytes=0-9", ifRange: "W/\"v1\"", status: 200, contentRange: nil, contentLength: "10000", body: [.bytes(0..<10_000)]),
            Case(range: "bytes=0-9", ifRange: "Mon, 01 Jan 2024 00:00:00 GMT", status: 206, contentRange: "bytes 0-9/10000", contentLength: "10", body: [.bytes(0..<10)]),
            Case(range: "bytes=0-9", ifRange: "Tue, 02 Jan 2024 00:00:00 GMT", status: 200, contentRange: nil, contentLength: "10000", body: [.bytes(0..<10_000)]),
        ]
        for c in cases {
            let plan = ResponsePlanner.plan(rep, RequestConditions(range: c.range, ifRange: c.ifRange))
            let label = "\(c.range ?? "-") if-range \(c.ifRange ?? "-")"
            XCTAssertEqual(plan.status, c.status, label)
            XCTAssertEqual(plan.header("Content-Range"), c.contentRange, label)
            XCTAssertEqual(plan.header("Accept-Ranges"), "bytes", label)
            if let cl = c.contentLength {
                XCTAssertEqual(plan.header("Content-Length"), cl, label)
                guard case let .parts(parts) = plan.body else { return XCTFail(label) }
                XCTAssertEqual(parts, c.body, label)
            }
            XCTAssertEqual(plan.header("Content-Length"), plan.contentLength.map(String.init), "Content-Length matches the body: \(label)")
        }
    }

    func testOriginValuesThatCannotBeSentAsHeaderFieldsAreLeftOut() {
        // What an origin's header line may hold once curl has handed it on: DEL, SOH, ESC, a
        // bare CR. HTAB and non-ASCII text are allowed (RFC 9110 5.5) and stay.
        let bad = ["video/mp4\u{7F}", "garbage date \u{01}", "\"a\u{1B}]0;x\u{07}\"", "\"a\rb\""]
        for value in bad {
            let hostile = Representation(length: 10, contentType: value, etag: value, lastModified: value)
            for range in [nil, "bytes=0-1", "bytes=0-1,4-5", "bytes=20-"] {
                let plan = ResponsePlanner.plan(hostile, RequestConditions(range: range))
                let label = "\(value.debugDescription) \(range ?? "-")"
                XCTAssertTrue(plan.headers.allSatisfy { $0.1.isSendableFieldValue }, label)
                XCTAssertNil(plan.header("ETag"), label)
                XCTAssertNil(plan.header("Last-Modified"), label)
                if case let .parts(parts) = plan.body {
                    for case let .literal(bytes) in parts {
                        XCTAssertFalse(String(decoding: bytes, as: UTF8.self).contains(value), label)
                    }
                }
            }
            XCTAssertEqual(ResponsePlanner.plan(hostile, RequestConditions()).header("Content-Type"), "application/octet-stream")
        }
        // An If-Range naming the dropped validator gets the whole body, never a range of it.
        let hostile = Representation(length: 10, contentType: "video/mp4", etag: "\"a\u{7F}\"")
        XCTAssertEqual(ResponsePlanner.plan(hostile, RequestConditions(range: "bytes=0-1", ifRange: "\"a\u{7F}\"")).status, 200)
        let fine = Representation(length: 10, contentType: "video/mp4;\tcodecs=\"avc1\"", etag: "\"caf\u{E9}\"")
        let plan = ResponsePlanner.plan(fine, RequestConditions())
        XCTAssertEqual(plan.header("Content-Type"), "video/mp4;\tcodecs=\"avc1\"")
        XCTAssertEqual(plan.header("ETag"), "\"caf\u{E9}\"")
        XCTAssertEqual(MediaTypes.contentType(origin: "x\u{7F}", url: "http://o/a.mp4"), "video/mp4")
    }

    func testSuccessfulAnswersCarryTypeAndValidators() {
        let plan = ResponsePlanner.plan(rep, RequestConditions(range: "bytes=0-1"))
        XCTAssertEqual(plan.header("Content-Type"), "video/mp4")
        XCTAssertEqual(plan.header("ETag"), "\"v1\"")
        XCTAssertEqual(plan.header("Last-Modified"), "Mon, 01 Jan 2024 00:00:00 GMT")
    }

    func testMultipleRangesAreMultipartByteranges() throws {
        let plan = ResponsePlanner.plan(rep, RequestConditions(range: "bytes=0-1,-2"), boundary: "B")
        XCTAssertEqual(plan.status, 206)
        XCTAssertEqual(plan.header("Content-Type"), "multipart/byteranges; boundary=B")
        XCTAssertNil(plan.header("Content-Range"))
        guard case let .parts(parts) = plan.body else { return XCTFail() }
        let expected: [BodyPart] = [
            .literal(Array("--B\r\nContent-Type: video/mp4\r\nContent-Range: bytes 0-1/10000\r\n\r\n".utf8)),
            .bytes(0..<2),
            .literal(Array("\r\n--B\r\nContent-Type: video/mp4\r\nContent-Range: bytes 9998-9999/10000\r\n\r\n".utf8)),
            .bytes(9998..<10_000),
            .literal(Array("\r\n--B--\r\n".utf8)),
        ]
        XCTAssertEqual(parts, expected)
        XCTAssertEqual(plan.header("Content-Length"), String(plan.contentLength!))
    }

    func testOverlappingOrTooManyRangesGetTheWholeBody() {
        let overlapping = ResponsePlanner.plan(rep, RequestConditions(range: "bytes=0-100,50-150"))
        XCTAssertEqual(overlapping.status, 200)
        let many = (0..<17).map { "\($0 * 10)-\($0 * 10 + 1)" }.joined(separator: ",")
        XCTAssertEqual(ResponsePlanner.plan(rep, RequestConditions(range: "bytes=" + many)).status, 200)
    }

    func testConditionalGetAnswers304() {
        XCTAssertEqual(ResponsePlanner.plan(rep, RequestConditions(ifNoneMatch: "\"v1\"")).status, 304)
        XCTAssertEqual(ResponsePlanner.plan(rep, RequestConditions(ifNoneMatch: "W/\"v1\", \"x\"")).status, 304)
        XCTAssertEqual(ResponsePlanner.plan(rep, RequestConditions(ifNoneMatch: "\"v0\"")).status, 200)
        XCTAssertEqual(ResponsePlanner.plan(rep, RequestConditions(ifModifiedSince: "Mon, 01 Jan 2024 00:00:00 GMT")).status, 304)
        XCTAssertEqual(ResponsePlanner.plan(rep, RequestConditions(ifModifiedSince: "Sun, 31 Dec 2023 00:00:00 GMT")).status, 200)
    }

    func testUnknownLengthStreamsEverythingAndIgnoresRanges() {
        let plan = ResponsePlanner.plan(Representation(length: nil, contentType: "video/mp2t"), RequestConditions(range: "bytes=0-9"))
        XCTAssertEqual(plan.status, 200)
        XCTAssertEqual(plan.body, .untilEnd)
        XCTAssertNil(plan.header("Content-Length"))
        XCTAssertEqual(plan.header("Accept-Ranges"), "bytes")
    }

    func testEmptyFile() {
        let empty = Representation(length: 0, contentType: "text/plain")
        let full = ResponsePlanner.plan(empty, RequestConditions())
        XCTAssertEqual(full.status, 200)
        XCTAssertEqual(full.header("Content-Length"), "0")
        let ranged = ResponsePlanner.plan(empty, RequestConditions(range: "bytes=0-"))
        XCTAssertEqual(ranged.status, 416)
        XCTAssertEqual(ranged.header("Content-Range"), "bytes */0")
    }

    // MARK: Hostile numbers

    func testRangesAtTheTopOfInt64AreAnsweredWithoutTrapping() {
        let big = Representation(length: FileLength.limit, contentType: "video/mp4")
        let last = ResponsePlanner.plan(big, RequestConditions(range: "bytes=-1"))
        XCTAssertEqual(last.status, 206)
        XCTAssertEqual(last.header("Content-Range"), "bytes \(FileLength.limit - 1)-\(FileLength.limit - 1)/\(FileLength.limit)")
        XCTAssertEqual(last.body, .parts([.bytes((FileLength.limit - 1)..<FileLength.limit)]))

        for range in ["bytes=9223372036854775806-", "bytes=9223372036854775807-9223372036854775807",
                      "bytes=99999999999999999999999-"] {
            XCTAssertEqual(ResponsePlanner.plan(rep, RequestConditions(range: range)).status, 416, range)
        }
        let tail = ResponsePlanner.plan(rep, RequestConditions(range: "bytes=9999-9223372036854775807"))
        XCTAssertEqual(tail.header("Content-Range"), "bytes 9999-9999/10000")
        let all = ResponsePlanner.plan(rep, RequestConditions(range: "bytes=-9223372036854775807"))
        XCTAssertEqual(all.header("Content-Range"), "bytes 0-9999/10000")
        let multi = ResponsePlanner.plan(rep, RequestConditions(range: "bytes=0-0,9223372036854775800-,-9223372036854775807"))
        XCTAssertEqual(multi.status, 200, "overlapping: the whole body")
    }

    func testALengthPastTheLimitIsA502ThatSaysWhy() {
        for length in [FileLength.limit + 1, Int64.max] {
            let plan = ResponsePlanner.plan(Representation(length: length, contentType: "video/mp4"),
                                            RequestConditions(range: "bytes=-1"))
            XCTAssertEqual(plan.status, 502)
            guard case let .parts(parts) = plan.body, case let .literal(text)? = parts.first else { return XCTFail() }
            XCTAssertTrue(String(decoding: text, as: UTF8.self).contains("2^62"))
            XCTAssertEqual(plan.contentLength, Int64(text.count))
        }
    }

    /// RFC 9110 §13.1.1, §13.1.4 and §13.2.2: If-Match and If-Unmodified-Since, alone and with
    /// the other conditions, in the order the RFC evaluates them.
    func testPreconditionTable() {
        let modified = "Mon, 01 Jan 2024 00:00:00 GMT", before = "Sat, 01 Jan 2000 00:00:00 GMT", after = "Tue, 02 Jan 2024 00:00:00 GMT"
        let weak = Representation(length: 10_000, contentType: "video/mp4", etag: "W/\"v1\"", lastModified: modified)
        let bare = Representation(length: 10_000, contentType: "video/mp4")
        let cases: [(String, Representation, RequestConditions, Int)] = [
            // If-Match: strong comparison of listed tags; `*` matches any current representation.
            ("match", rep, RequestConditions(ifMatch: "\"v1\""), 200),
            ("match in a list", rep, RequestConditions(ifMatch: "\"x\", \"v1\""), 200),
            ("a tag with a comma", rep, RequestConditions(ifMatch: "\"a,b\""), 412),
            ("wrong tag", rep, RequestConditions(ifMatch: "\"wrong\""), 412),
            ("wrong tag with Range", rep, RequestConditions(range: "bytes=0-9", ifMatch: "\"wrong\""), 412),
            ("weak request tag", rep, RequestConditions(ifMatch: "W/\"v1\""), 412),
            ("weak current tag", weak, RequestConditions(ifMatch: "W/\"v1\""), 412),
            ("weak current tag, strong request", weak, RequestConditions(ifMatch: "\"v1\""), 412),
            ("star", rep, RequestConditions(ifMatch: "*"), 200),
            ("star without an ETag", bare, RequestConditions(ifMatch: "*"), 200),
            ("no ETag", bare, RequestConditions(ifMatch: "\"v1\""), 412),
            ("garbage", rep, RequestConditions(ifMatch: "v1"), 412),
            // If-Unmodified-Since: 412 when modified after the date.
            ("unmodified since 2000", rep, RequestConditions(range: "bytes=0-9", ifUnmodifiedSince: before), 412),
            ("unmodified since the same second", rep, RequestConditions(ifUnmodifiedSince: modified), 200),
            ("unmodified since later", rep, RequestConditions(range: "bytes=0-9", ifUnmodifiedSince: after), 206),
            ("not a date: ignored", rep, RequestConditions(ifUnmodifiedSince: "yesterday"), 200),
            ("no Last-Modified: ignored", bare, RequestConditions(ifUnmodifiedSince: before), 200),
            // If-Match wins over If-Unmodified-Since (which is then not looked at).
            ("If-Match holds, date would fail", rep, RequestConditions(ifMatch: "\"v1\"", ifUnmodifiedSince: before), 200),
            ("If-Match fails, date would hold", rep, RequestConditions(ifMatch: "\"x\"", ifUnmodifiedSince: after), 412),
            // Step 1-2 before step 3-4: a failed precondition is 412 even where 304 would follow.
            ("412 before 304", rep, RequestConditions(ifNoneMatch: "\"v1\"", ifMatch: "\"x\""), 412),
            ("If-Match holds, then 304", rep, RequestConditions(ifNoneMatch: "\"v1\"", ifMatch: "\"v1\""), 304),
            ("date holds, then If-Modified-Since 304", rep, RequestConditions(ifModifiedSince: modified, ifUnmodifiedSince: after), 304),
            // Then If-Range (step 5).
            ("If-Match holds, If-Range fails", rep, RequestConditions(range: "bytes=0-9", ifRange: "\"v0\"", ifMatch: "\"v1\""), 200),
            ("If-Match holds, If-Range holds", rep, RequestConditions(range: "bytes=0-9", ifRange: "\"v1\"", ifMatch: "\"v1\""), 206),
        ]
        for (label, representation, conditions, status) in cases {
            let plan = ResponsePlanner.plan(representation, conditions)
            XCTAssertEqual(plan.status, status, label)
            if status == 412 {
                XCTAssertEqual(plan.header("Content-Type"), "text/plain; charset=utf-8", label)
                XCTAssertEqual(plan.header("Content-Length"), plan.contentLength.map(String.init), label)
                XCTAssertNil(plan.header("Content-Range"), label)
            }
        }
    }

    func testEntityTagLists() {
        XCTAssertEqual(EntityTagList("\"a\", W/\"b\" ,\"c,d\"").tags, ["\"a\"", "W/\"b\"", "\"c,d\""])
        XCTAssertEqual(EntityTagList("*").any, true)
        XCTAssertEqual(EntityTagList("\"a\", *").any, true)
        XCTAssertEqual(EntityTagList("junk, \"a\"").tags, ["\"a\""])
        XCTAssertEqual(EntityTagList("\"unterminated").tags, [])
        XCTAssertEqual(EntityTagList("").tags, [])
    }
}
