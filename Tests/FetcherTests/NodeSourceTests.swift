import CacheCore
@testable import Fetcher
import Foundation
import Logging
import NIOPosix
import TestSupport
import XCTest

/// Every `TierSourceTests` case again, with the nodes asked through the SwiftNIO node client.
/// (Each is named here: test discovery on Linux finds a class's own methods, not inherited ones.)
final class NodeSourceTierTests: TierSourceTests {
    override func makeNodeSource(_ configuration: FetcherConfiguration) -> (RangeSource, () -> Void) {
        let source = NodeRangeSource(configuration: configuration, logger: Logger(label: "node-tests"))
        return (source, { source.shutdown() })
    }

    override func testAGoodNodeServesSliceAlignedPiecesCarryingTheVersion() throws { try super.testAGoodNodeServesSliceAlignedPiecesCarryingTheVersion() }
    override func testProbesAndFetchesOfAnUnknownVersionGoToTheOrigin() { super.testProbesAndFetchesOfAnUnknownVersionGoToTheOrigin() }
    override func testBytesTakenWithTheirFetchsStopAreCountedForTheirNodeAndTheOrigin() { super.testBytesTakenWithTheirFetchsStopAreCountedForTheirNodeAndTheOrigin() }
    override func testAnOpenCheckOfAChangedFileCostsTheOriginOnlyItsRange() { super.testAnOpenCheckOfAChangedFileCostsTheOriginOnlyItsRange() }
    override func testA502FromTheNodeIsServedByTheOrigin() { super.testA502FromTheNodeIsServedByTheOrigin() }
    override func testAnotherVersionOnTheNodeIsNeverServed() { super.testAnotherVersionOnTheNodeIsNeverServed() }
    override func testAWrongContentRangeFromTheNodeIsRefused() { super.testAWrongContentRangeFromTheNodeIsRefused() }
    override func testAWholeBodyFromTheNodeIsRefused() { super.testAWholeBodyFromTheNodeIsRefused() }
    override func testGarbageFromTheNodeIsRefused() throws { try super.testGarbageFromTheNodeIsRefused() }
    override func testATricklingNodeIsGivenUpAndBackedOff() throws { try super.testATricklingNodeIsGivenUpAndBackedOff() }
    override func testANodeThatDiesMidPieceIsResumedFromTheNextByteElsewhere() throws { try super.testANodeThatDiesMidPieceIsResumedFromTheNextByteElsewhere() }
    override func testAPieceResumedOnANodeCarriesNoIfRange() throws { try super.testAPieceResumedOnANodeCarriesNoIfRange() }
    override func testTheNextNodeInTheSlicesOrderIsTriedBeforeTheOrigin() throws { try super.testTheNextNodeInTheSlicesOrderIsTriedBeforeTheOrigin() }
    override func testTheOriginsOwnNewVersionEndsTheFetchAsAChange() { super.testTheOriginsOwnNewVersionEndsTheFetchAsAChange() }
}

/// The SwiftNIO node client on its own, against an in-process node: what it sends, kept
/// connections, a sink that pauses, a cancel, the cap on requests per node, and which
/// configurations it leaves to libcurl.
final class NodeSourceTests: XCTestCase {
    var node: OriginServer!
    var source: NodeRangeSource!
    let data: [UInt8] = OriginServer.generatedBytes(seed: 33, offset: 0, count: 1_000_000)

    override func setUpWithError() throws {
        node = try OriginServer()
        node.setFile("/f.bin", data: data, etag: "\"v1\"")
    }

    override func tearDown() {
        source?.shutdown()
        node?.stop()
    }

    private func makeSource(_ configuration: FetcherConfiguration = FetcherConfiguration(clock: .realTime, userAgent: "node-tests", connectTimeout: 5,
                                                                                        lowSpeedTime: 10, maxRetries: 0)) -> NodeRangeSource {
        let s = NodeRangeSource(configuration: configuration, logger: Logger(label: "node-tests"))
        source = s
        return s
    }

    private func fetch(_ source: RangeSource, _ start: Int64, _ end: Int64, headers: [String] = [],
                       sink: RecordingSink = RecordingSink()) -> RecordingSink {
        var request = FetchRequest(url: node.url("/f.bin"), start: start, end: end, requireRange: true)
        request.sendsIfRange = false
        request.headers = headers
        let handle = source.start(request, sink: sink)
        sink.pausing?.set(handle)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.violations, [])
        return sink
    }

    func testItSendsWhatLibcurlSendsToANode() throws {
        var configuration = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs/9", extraHeaders: ["X-Team: a", "User-Agent: mine"])
        configuration.via = "1.1 httpcachefs-test"
        configuration.access = OriginAccess(user: "ann", password: Secret("pw"))
        let sink = fetch(makeSource(configuration), 10, 20, headers: ["X-Httpcachefs-Version: \"v1\" 1000000"])
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[10..<20]))
        let request = try XCTUnwrap(node.requests.first)
        XCTAssertEqual(request.range, "bytes=10-19")
        XCTAssertNil(request.ifRange)
        XCTAssertEqual(request.header("user-agent"), "mine", "a --header replaces the default")
        XCTAssertEqual(request.header("x-team"), "a")
        XCTAssertEqual(request.header("accept-encoding"), "identity")
        XCTAssertEqual(request.header("via"), "1.1 httpcachefs-test")
        XCTAssertEqual(request.header("authorization"), "Basic " + Data("ann:pw".utf8).base64EncodedString())
        XCTAssertEqual(request.header("x-httpcachefs-version"), "\"v1\" 1000000")
        XCTAssertEqual(request.header("host"), "127.0.0.1:\(node.port)")
    }

    /// Credentials go to nodes by design (a node forwards them to the tier's origin), so a node's
    /// redirect is never followed, by either node client: it is that node's error.
    func testANodesRedirectIsItsErrorAndNoCredentialLeavesTheNode() throws {
        let canary = try OriginServer()
        defer { canary.stop() }
        canary.setFile("/f.bin", data: data)
        node.setFaults("/f.bin", Faults(redirectTo: canary.url("/f.bin")))
        var configuration = FetcherConfiguration(clock: .realTime, userAgent: "node-tests", extraHeaders: ["X-Api-Key: key-1"], connectTimeout: 5,
                                                 lowSpeedTime: 10, maxRetries: 0)
        configuration.access = OriginAccess(user: "ann", password: Secret("pw"))
        let nodes = configuration.forTierNodes()
        let curl = CurlRangeSource(configuration: nodes, logger: Logger(label: "node-tests"))
        defer { curl.shutdown() }
        for source in [makeSource(nodes), curl] as [RangeSource] {
            XCTAssertEqual(fetch(source, 0, 10).result(), .http(status: 302, url: node.url("/f.bin")), "\(type(of: source))")
        }
        XCTAssertEqual(canary.requests.count, 0, "nothing followed the node's redirect")
        XCTAssertEqual(node.requests.count, 2)
        for request in node.requests {
            XCTAssertEqual(request.header("authorization"), "Basic " + Data("ann:pw".utf8).base64EncodedString())
            XCTAssertEqual(request.header("x-api-key"), "key-1")
        }
    }

    func testRequestsOneAfterAnotherShareOneKeptConnection() {
        let source = makeSource()
        for (start, end) in [(0, 1000), (1000, 300_000), (300_000, 1_000_000)] as [(Int64, Int64)] {
            let sink = fetch(source, start, end)
            XCTAssertNil(sink.result())
            XCTAssertEqual(sink.body, Array(data[Int(start)..<Int(end)]))
        }
        XCTAssertEqual(node.requests.count, 3)
        XCTAssertEqual(node.connectionsAccepted, 1)
    }

    /// The kept connection holds bytes of no answer (the node sent them after a body): the next
    /// request on it fails before any answer and is asked again at once on a new connection,
    /// not failed (which would send the piece to the next node or the origin).
    func testBytesAfterABodyCostTheNextRequestItsKeptConnectionNotItsAnswer() {
        var faults = Faults()
        faults.garbageAfterBody = Array("GARBAGE GARBAGE\r\n\r\n".utf8)
        node.setFaults("/f.bin", faults)
        let source = makeSource()
        for (start, end) in [(0, 1000), (1000, 50_000), (50_000, 100_000)] as [(Int64, Int64)] {
            let sink = fetch(source, start, end)
            XCTAssertNil(sink.result(), "\(start)-\(end)")
            XCTAssertEqual(sink.body, Array(data[Int(start)..<Int(end)]))
        }
    }

    /// A sink that pauses every other offer gets every byte once, in order: the paused bytes are
    /// offered again after `resume()`, and nothing more is read from the node meanwhile.
    func testASinkThatPausesGetsEveryByteOnceInOrder() {
        let sink = RecordingSink()
        sink.pausing = ResumeBox()
        let result = fetch(makeSource(), 0, 1_000_000, sink: sink)
        XCTAssertNil(result.result())
        XCTAssertEqual(result.body, data)
        XCTAssertGreaterThan(result.pauses, 0)
    }

    func testACancelEndsTheTransferOnceWithCancelled() {
        node.setFaults("/f.bin", Faults(bytesPerSecond: 50_000))
        let source = makeSource()
        let sink = RecordingSink()
        let started = expectation(description: "bytes arrived")
        let once = Locked(false)
        sink.onBody = { _ in
            let first = once.mutate { seen in
                defer { seen = true }
                return !seen
            }
            if first { started.fulfill() }
        }
        let handle = source.start(FetchRequest(url: node.url("/f.bin"), start: 0, end: 1_000_000), sink: sink)
        wait(for: [started], timeout: 30)
        handle.cancel()
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.result(), .cancelled)
        XCTAssertEqual(sink.violations, [])
        XCTAssertEqual(source.liveCount, 0)
    }

    /// `--max-connections` requests to one node at once; the rest wait and go in turn.
    func testRequestsToANodeBeyondItsCapWaitTheirTurn() {
        let source = makeSource(FetcherConfiguration(clock: .realTime, userAgent: "node-tests", connectTimeout: 5, lowSpeedTime: 10,
                                                     maxRetries: 0, maxConnections: 2))
        let sinks = (0..<6).map { _ in RecordingSink() }
        for (i, sink) in sinks.enumerated() {
            _ = source.start(FetchRequest(url: node.url("/f.bin"), start: Int64(i) * 100_000, end: Int64(i + 1) * 100_000), sink: sink)
        }
        wait(for: sinks.map(\.finished), timeout: 30)
        for (i, sink) in sinks.enumerated() {
            XCTAssertNil(sink.result())
            XCTAssertEqual(sink.body, Array(data[i * 100_000..<(i + 1) * 100_000]))
        }
        XCTAssertLessThanOrEqual(node.peakConnections, 2)
        XCTAssertEqual(source.slots.counts.active, 0, "every slot came back")
    }

    func testANodeThatRefusesConnectionsIsANetworkError() throws {
        let port = try LoopbackPort.free()
        let sink = RecordingSink()
        _ = makeSource().start(FetchRequest(url: "http://127.0.0.1:\(port)/f.bin", start: 0, end: 10), sink: sink)
        wait(for: [sink.finished], timeout: 30)
        guard case let .network(_, message)? = sink.result() else { return XCTFail("\(String(describing: sink.finishes))") }
        XCTAssertTrue(message.contains("cannot connect"), message)
    }

    func testAfterShutdownAStartFinishesCancelled() {
        let source = makeSource()
        source.shutdown()
        let sink = RecordingSink()
        _ = source.start(FetchRequest(url: node.url("/f.bin"), start: 0, end: 10), sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.result(), .cancelled)
    }

    /// What the client does itself, and what it leaves to libcurl: TLS nodes, proxies, netrc.
    func testItServesPlainHTTPNodesWithoutProxiesOnly() {
        let plain = FetcherConfiguration(clock: .realTime)
        XCTAssertTrue(NodeRangeSource.canServe(nodes: ["http://10.0.0.5:8080", "http://[::1]:9000", "http://n"], configuration: plain, environment: [:]))
        XCTAssertFalse(NodeRangeSource.canServe(nodes: ["https://10.0.0.5"], configuration: plain, environment: [:]))
        XCTAssertFalse(NodeRangeSource.canServe(nodes: ["http://n:1"], configuration: plain, environment: ["http_proxy": "http://p:3128"]))
        XCTAssertFalse(NodeRangeSource.canServe(nodes: ["http://n:1"], configuration: plain, environment: ["ALL_PROXY": "socks5://p"]))
        XCTAssertTrue(NodeRangeSource.canServe(nodes: ["http://n:1"], configuration: plain, environment: ["https_proxy": "http://p:3128"]),
                      "libcurl would not use an https proxy for http://")
        var proxied = plain
        proxied.upstreamProxy = "http://p:3128"
        XCTAssertFalse(NodeRangeSource.canServe(nodes: ["http://n:1"], configuration: proxied, environment: [:]))
        var netrc = plain
        netrc.access = OriginAccess(netrcFile: "/root/.netrc")
        XCTAssertFalse(NodeRangeSource.canServe(nodes: ["http://n:1"], configuration: netrc, environment: [:]))
    }

    func testNodeURLsAreParsedOnceIntoHostPortAndPath() {
        let cases: [(String, NodeTarget?)] = [
            ("http://10.0.0.5:8080/lib/a.mkv?t=1", NodeTarget(node: "http://10.0.0.5:8080", host: "10.0.0.5", port: 8080,
                                                            authority: "10.0.0.5:8080", pathAndQuery: "/lib/a.mkv?t=1")),
            ("http://n/a", NodeTarget(node: "http://n", host: "n", port: 80, authority: "n", pathAndQuery: "/a")),
            ("http://[::1]:9000/a", NodeTarget(node: "http://[::1]:9000", host: "::1", port: 9000, authority: "[::1]:9000", pathAndQuery: "/a")),
            ("http://n:1?q", NodeTarget(node: "http://n:1", host: "n", port: 1, authority: "n:1", pathAndQuery: "/?q")),
            ("HTTP://n/a#frag", NodeTarget(node: "http://n", host: "n", port: 80, authority: "n", pathAndQuery: "/a")),
            ("https://n/a", nil), ("http://u@n/a", nil), ("http://n:0/a", nil), ("http://n:70000/a", nil),
            ("http://[::1/a", nil), ("http:///a", nil), ("http://n:x/a", nil),
        ]
        for (url, want) in cases { XCTAssertEqual(NodeTarget(url: url), want, url) }
    }
}
