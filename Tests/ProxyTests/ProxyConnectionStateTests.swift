import NIOHTTP1
@testable import Proxy
import XCTest

/// The connection's decisions, with no channel: events in, actions out.
final class ProxyConnectionStateTests: XCTestCase {
    func testAKeepAliveConnectionServesOneRequestAfterAnother() {
        var c = ProxyConnectionState()
        let first = c.requestHead(version: .http1_1, keepAlive: true, isHead: false)
        XCTAssertTrue(c.isBusy)
        XCTAssertEqual(c.prepared(request: first.id), .proceed)
        XCTAssertEqual(c.streamEnded(request: first.id), .proceed)
        XCTAssertEqual(c.responseFinished(), .awaitNextHead)
        XCTAssertEqual(c.state, .idle)
        let second = c.requestHead(version: .http1_1, keepAlive: true, isHead: true)
        XCTAssertEqual(second.id, first.id + 1)
        XCTAssertTrue(second.isHead)
    }

    func testAnAnswerForARequestThatIsNoLongerCurrentIsDropped() {
        var c = ProxyConnectionState()
        let first = c.requestHead(version: .http1_1, keepAlive: true, isHead: false)
        c.channelClosed()   // the client went away while the cache was opening the file
        XCTAssertEqual(c.prepared(request: first.id), .none)
        XCTAssertEqual(c.streamEnded(request: first.id), .none)
    }

    func testIdleAndWriteTimeoutsCloseOnlyWhenTheyShould() {
        var c = ProxyConnectionState()
        let r = c.requestHead(version: .http1_1, keepAlive: true, isHead: false)
        XCTAssertEqual(c.idleTimeout(), .none, "a request under way is not idle")
        _ = c.prepared(request: r.id)
        XCTAssertEqual(c.writeTimeout(waitingForWritable: false), .none, "the client reads: nothing to do")
        XCTAssertEqual(c.writeTimeout(waitingForWritable: true), .close, "the client stopped reading")
        XCTAssertEqual(c.state, .closed)

        var idle = ProxyConnectionState()
        XCTAssertEqual(idle.idleTimeout(), .close, "no request head within the deadline")
    }

    func testAMalformedRequestOrAnAbortedBodyEndsTheConnection() {
        var c = ProxyConnectionState()
        _ = c.requestHead(version: .http1_1, keepAlive: true, isHead: false)
        c.closeAfterResponse()
        XCTAssertEqual(c.responseFinished(), .close)

        var d = ProxyConnectionState()
        let r = d.requestHead(version: .http1_0, keepAlive: true, isHead: false)
        _ = d.prepared(request: r.id)
        XCTAssertEqual(d.responseAborted(), .close, "a short body can only end with the connection")
        XCTAssertEqual(d.responseFinished(), .none)
    }
}
