import CacheCore
@testable import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// A file with no ETag (its Last-Modified kept: a same-second replacement) replaced by another
/// of the same length while one transfer's connection is down: the resume compares the bytes
/// before its resume point and the transfer ends with `remoteChanged` before a byte of the new
/// version reaches the sink; unchanged, it resumes byte-exact (issue 36, item 5). Through
/// libcurl, the SwiftNIO node client, and a tier transfer that goes on at the origin.
final class ResumeOverlapOverHTTPTests: XCTestCase {
    var origin: OriginServer!
    var node: OriginServer!
    var stops: [() -> Void] = []
    let data: [UInt8] = OriginServer.generatedBytes(seed: 5, offset: 0, count: 100_000)
    var other: [UInt8] { data.map { $0 ^ 0xa5 } }
    let config = FetcherConfiguration(clock: .realTime, userAgent: "overlap-tests", connectTimeout: 5, lowSpeedTime: 10,
                                      maxRetries: 2, retryBaseDelay: 0.01)

    override func setUpWithError() throws {
        origin = try OriginServer()
        node = try OriginServer()
        origin.setFile("/f.bin", data: data, etag: "")
        node.setFile("/f.bin", data: data, etag: "")
    }

    override func tearDown() {
        for stop in stops { stop() }
        stops = []
        origin?.stop()
        node?.stop()
    }

    private func curl(_ configuration: FetcherConfiguration) -> CurlRangeSource {
        let source = CurlRangeSource(configuration: configuration, logger: Logger(label: "overlap-tests"))
        stops.append { source.shutdown() }
        return source
    }

    /// A sink that replaces `path` on `server` with `other` once it has `after` bytes: before
    /// the dropped transfer's resume is asked (curl hands over every byte before it sees the end).
    private func replacing(_ path: String, on server: OriginServer, after: Int, replace: Bool) -> RecordingSink {
        let sink = RecordingSink()
        let replaced = Locked(false)
        let other = self.other
        sink.onBody = { total in
            guard replace, total >= after, !replaced.value else { return }
            replaced.value = true
            server.setFile(path, data: other, etag: "")
        }
        return sink
    }

    private func run(_ source: RangeSource, _ request: FetchRequest, _ sink: RecordingSink) {
        let handle = source.start(request, sink: sink)
        sink.pausing?.set(handle)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.violations, [])
    }

    // MARK: libcurl

    func testAFileReplacedBetweenTheDropAndTheResumeFailsTheTransferWithNoByteOfTheNewVersion() {
        for ignoreRange in [false, true] {
            origin.setFile("/f.bin", data: data, etag: "")
            origin.resetLog()
            origin.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1, ignoreRange: ignoreRange))
            let sink = replacing("/f.bin", on: origin, after: 30_000, replace: true)
            run(curl(config), FetchRequest(url: origin.url("/f.bin")), sink)
            XCTAssertEqual(sink.result(), .remoteChanged(url: origin.url("/f.bin")), "ranges ignored: \(ignoreRange)")
            XCTAssertEqual(sink.body, Array(data[0..<30_000]), "ranges ignored: \(ignoreRange): nothing of the new version")
            XCTAssertEqual(origin.requests.map(\.range), [nil, "bytes=25904-99999"],
                           "the resume asked again for the last 4 KiB delivered")
            XCTAssertEqual(origin.requests.last?.ifRange, "Mon, 01 Jan 2024 00:00:00 GMT",
                           "the Last-Modified matched: only the bytes showed the change")
        }
    }

    func testAnUnchangedFileResumesByteExact() {
        origin.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1))
        let sink = replacing("/f.bin", on: origin, after: 30_000, replace: false)
        run(curl(config), FetchRequest(url: origin.url("/f.bin"), start: 1000, end: 90_000), sink)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[1000..<90_000]))
        XCTAssertEqual(origin.requests.map(\.range), ["bytes=1000-89999", "bytes=26904-89999"])
    }

    /// A sink that pauses every other offer gets every byte offered twice: the compared bytes
    /// are compared again with them, never taken as new ones.
    func testASinkThatPausesChangesNothing() {
        for replace in [false, true] {
            origin.setFile("/f.bin", data: data, etag: "")
            origin.resetLog()
            origin.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1))
            let sink = replacing("/f.bin", on: origin, after: 30_000, replace: replace)
            sink.pausing = ResumeBox()
            run(curl(config), FetchRequest(url: origin.url("/f.bin")), sink)
            XCTAssertGreaterThan(sink.pauses, 0)
            if replace {
                XCTAssertEqual(sink.result(), .remoteChanged(url: origin.url("/f.bin")))
                XCTAssertEqual(sink.body, Array(data[0..<30_000]))
            } else {
                XCTAssertNil(sink.result())
                XCTAssertEqual(sink.body, data)
            }
        }
    }

    func testAStrongETagResumeAsksForNoByteTwice() {
        origin.setFile("/f.bin", data: data, etag: "\"v1\"")
        origin.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1))
        let sink = replacing("/f.bin", on: origin, after: 30_000, replace: false)
        run(curl(config), FetchRequest(url: origin.url("/f.bin"), start: 1000, end: 90_000), sink)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[1000..<90_000]))
        XCTAssertEqual(origin.requests.map(\.range), ["bytes=1000-89999", "bytes=31000-89999"])
        XCTAssertEqual(origin.bytesServed(path: "/f.bin"), 89_000, "not one byte asked twice")
    }

    // MARK: The SwiftNIO node client

    func testANodeTransferResumedOnAReplacedFileFailsAndOnAnUnchangedOneIsExact() {
        for replace in [true, false] {
            node.setFile("/f.bin", data: data, etag: "")
            node.resetLog()
            node.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1))
            let source = NodeRangeSource(configuration: config, logger: Logger(label: "overlap-tests"))
            stops.append { source.shutdown() }
            var request = FetchRequest(url: node.url("/f.bin"), start: 0, end: 100_000, requireRange: true)
            request.sendsIfRange = false
            let sink = replacing("/f.bin", on: node, after: 30_000, replace: replace)
            run(source, request, sink)
            XCTAssertEqual(node.requests.map(\.range), ["bytes=0-99999", "bytes=25904-99999"], "replaced: \(replace)")
            if replace {
                XCTAssertEqual(sink.result(), .remoteChanged(url: node.url("/f.bin")))
                XCTAssertEqual(sink.body, Array(data[0..<30_000]), "nothing of the new version")
            } else {
                XCTAssertNil(sink.result())
                XCTAssertEqual(sink.body, data)
            }
        }
    }

    // MARK: A tier transfer going on at the origin

    /// A node that dies mid-piece: the piece goes on at the origin, which asks again for the last
    /// bytes the node passed on, for a version known by its Last-Modified alone.
    func testATierPieceGoingOnAtTheOriginComparesTheBytesBeforeIt() {
        for replace in [true, false] {
            origin.setFile("/f.bin", data: data, etag: "")
            origin.resetLog()
            node.resetLog()
            node.setFaults("/f.bin", Faults(dropAfterBytes: 30_000))
            var nodeConfig = config
            nodeConfig.maxRetries = 0
            let spec = TierSpec(scheme: "http", host: "127.0.0.1", port: origin.port,
                                nodes: ["http://127.0.0.1:\(node.port)"], sliceSize: 100_000)
            let tier = TierRangeSource(origin: curl(config), tier: curl(nodeConfig), tiers: [spec], state: TierState(clock: { EngineClock.realTime.uptime }))
            var request = FetchRequest(url: origin.url("/f.bin"), start: 0, end: 100_000, ifRange: "Mon, 01 Jan 2024 00:00:00 GMT")
            request.expectedLength = 100_000
            let sink = replacing("/f.bin", on: origin, after: 30_000, replace: replace)
            run(tier, request, sink)
            XCTAssertEqual(node.requests.first?.range, "bytes=0-99999")
            XCTAssertEqual(origin.requests.map(\.range), ["bytes=25904-99999"], "replaced: \(replace)")
            if replace {
                XCTAssertEqual(sink.result()?.isRemoteChange, true, "\(String(describing: sink.finishes))")
                XCTAssertEqual(sink.body, Array(data[0..<30_000]), "nothing of the new version")
            } else {
                XCTAssertNil(sink.result())
                XCTAssertEqual(sink.body, data)
            }
        }
    }

    /// A node that dies mid-piece, and the next node in the slice's order holding other bytes under
    /// the same Last-Modified: that node is refused before it passes a byte on, and the origin
    /// serves the rest, byte-exact.
    func testANextNodeWithOtherBytesBeforeTheResumePointIsRefused() throws {
        let second = try OriginServer()
        defer { second.stop() }
        let nodes = ["http://127.0.0.1:\(node.port)", "http://127.0.0.1:\(second.port)"]
        let router = TierRouter(nodes: nodes, sliceSize: 100_000)
        let order = router.order(key: origin.url("/f.bin"), slice: 0).map { [node!, second][$0] }
        order[0].setFile("/f.bin", data: data, etag: "")
        order[0].setFaults("/f.bin", Faults(dropAfterBytes: 30_000))
        order[1].setFile("/f.bin", data: other, etag: "")
        var nodeConfig = config
        nodeConfig.maxRetries = 0
        let spec = TierSpec(scheme: "http", host: "127.0.0.1", port: origin.port, nodes: nodes, sliceSize: 100_000)
        let tier = TierRangeSource(origin: curl(config), tier: curl(nodeConfig), tiers: [spec], state: TierState(clock: { EngineClock.realTime.uptime }))
        var request = FetchRequest(url: origin.url("/f.bin"), start: 0, end: 100_000, ifRange: "Mon, 01 Jan 2024 00:00:00 GMT")
        request.expectedLength = 100_000
        let sink = RecordingSink()
        run(tier, request, sink)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, data, "nothing of the other node's bytes")
        XCTAssertEqual(order[1].requests.map(\.range), ["bytes=25904-99999"], "the next node was asked from the same slice")
        XCTAssertEqual(origin.requests.map(\.range), ["bytes=25904-99999"], "the origin served the rest")
        let refused = nodes[order[1] === node ? 0 : 1]
        XCTAssertEqual(tier.tierStatus().nodes.first { $0.node == refused }?.backedOff, true, "the refused node backs off")
    }
}

private extension FetchError {
    var isRemoteChange: Bool {
        if case .remoteChanged = self { return true }
        return false
    }
}
