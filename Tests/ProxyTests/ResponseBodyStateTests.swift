@testable import Proxy
import XCTest

/// A response body's progress, with no channel: what is read and sent, in order.
final class ResponseBodyStateTests: XCTestCase {
    func testAMultipartBodyInterleavesFramingAndRangesInChunks() {
        var body = ResponseBodyState(.parts([.literal([1]), .bytes(0..<100_000), .literal([2])]))
        XCTAssertEqual(body.next(writable: true), .literal([1]))
        XCTAssertEqual(body.next(writable: true), .read(offset: 0, length: ResponseBodyState.firstChunk),
                       "a small first chunk: the head waits for it")
        XCTAssertEqual(body.next(writable: true), .none, "one read at a time")
        XCTAssertEqual(body.didRead(count: ResponseBodyState.firstChunk), .send)
        XCTAssertEqual(body.next(writable: true), .read(offset: Int64(ResponseBodyState.firstChunk),
                                                       length: 100_000 - ResponseBodyState.firstChunk))
        XCTAssertEqual(body.didRead(count: 100_000 - ResponseBodyState.firstChunk), .send)
        XCTAssertEqual(body.next(writable: true), .literal([2]))
        XCTAssertEqual(body.next(writable: true), .finish)
        XCTAssertEqual(body.bodyBytesSent, 100_000)
    }

    func testAFullChannelPausesReadsUntilItDrains() {
        var body = ResponseBodyState(.parts([.bytes(0..<10)]))
        XCTAssertEqual(body.next(writable: false), .waitForWritable)
        XCTAssertTrue(body.waitingForWritable)
        XCTAssertTrue(body.writable())
        XCTAssertEqual(body.next(writable: true), .read(offset: 0, length: 10))
    }

    func testTheEndOfTheFileEndsAnOpenEndedBodyButFailsAnAnnouncedOne() {
        var open = ResponseBodyState(.untilEnd)
        XCTAssertEqual(open.next(writable: true), .read(offset: 0, length: ResponseBodyState.firstChunk))
        XCTAssertEqual(open.didRead(count: 0), .finish)

        var announced = ResponseBodyState(.parts([.bytes(0..<10)]))
        _ = announced.next(writable: true)
        XCTAssertEqual(announced.didRead(count: 0), .fail("the file ended before its announced length"))
        XCTAssertTrue(announced.isDone)
    }
}
