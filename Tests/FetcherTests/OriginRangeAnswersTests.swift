import CacheCore
@testable import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// Issue 46 item 9: the fetcher's record of answers to required ranges by origin
/// (`OriginRangeAnswers`): where an origin served most of its ranges lately, 200s in a row to one
/// transfer are asked again longer before the whole file is taken.
final class OriginRangeAnswersTests: XCTestCase {
    /// Answers oldest first ("2" a 200, "6" a 206) and whether the origin served its ranges lately.
    func testRange200WhenAnOriginServedItsRangesLately() {
        let table: [(answers: String, served: Bool, why: String)] = [
            ("", false, "nothing heard: no record"),
            (String(repeating: "6", count: 15), false, "15 good answers: not yet half a window"),
            (String(repeating: "6", count: 16), true, "16: half a window"),
            (String(repeating: "6", count: 28) + "2222", true, "a run of 200s after many 206s: bad luck"),
            (String(repeating: "6", count: 16) + String(repeating: "2", count: 17), false, "the window filled with 200s: it stopped"),
            (String(repeating: "2666666666", count: 4), true, "one in ten"),
        ]
        for row in table {
            let r = OriginRangeAnswers()
            for c in row.answers { r.note(origin: "http://a:80", ignored: c == "2") }
            XCTAssertEqual(r.servedLately(origin: "http://a:80"), row.served, row.why)
            XCTAssertFalse(r.servedLately(origin: "http://b:80"), "per origin")
        }
    }

    func testRange200TheRecordKeepsTheLatestOrigins() {
        let r = OriginRangeAnswers()
        for i in 0...OriginRangeAnswers.maxOrigins {
            for _ in 0..<16 { r.note(origin: "http://o\(i):80", ignored: false) }
        }
        XCTAssertFalse(r.servedLately(origin: "http://o0:80"), "the oldest origin was dropped")
        XCTAssertTrue(r.servedLately(origin: "http://o1:80"))
        XCTAssertTrue(r.servedLately(origin: "http://o\(OriginRangeAnswers.maxOrigins):80"))
    }

    /// Over HTTP: an origin that answered 20 required ranges with 206 and then answers every range
    /// with 200 gets four cut 200s before the fifth is taken as the whole file; a fetcher without
    /// that history takes the third, as before.
    func testRange200AnOriginThatServedItsRangesGetsMoreTriesBeforeTheWholeFile() throws {
        let origin = try OriginServer()
        defer { origin.stop() }
        let length: Int64 = 8 << 20, far: Int64 = 4 << 20
        origin.setGeneratedFile("/f.bin", length: length, seed: 9)
        func source() -> CurlRangeSource {
            CurlRangeSource(configuration: FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 10,
                                                                maxRetries: 4, retryBaseDelay: 0.01),
                            logger: Logger(label: "fetcher-tests"))
        }
        func fetch(_ source: CurlRangeSource) throws -> ResponseHead {
            let sink = RecordingSink()
            let handle = source.start(FetchRequest(url: origin.url("/f.bin"), start: far, end: far + 1000, requireRange: true), sink: sink)
            wait(for: [sink.finished], timeout: 30)
            handle.cancel()
            return try XCTUnwrap(sink.heads.first)
        }
        let known = source(), fresh = source()
        defer { known.shutdown(); fresh.shutdown() }
        for _ in 0..<20 { XCTAssertEqual(try fetch(known).status, 206) }
        origin.setFaults("/f.bin", Faults(ignoreRangeEvery: 1))
        for (source, answers, why) in [(known, 5, "four cut, the fifth taken"), (fresh, 3, "two cut, the third taken")] {
            origin.resetLog()
            let head = try fetch(source)
            XCTAssertEqual(head.status, 200, why)
            XCTAssertEqual(head.bodyStart, 0, "the whole file: \(why)")
            XCTAssertEqual(origin.requests.filter { $0.status == 200 }.count, answers, why)
        }
    }
}
