import CacheCore
@testable import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// `TierRangeSource` against a fake tier node (a second in-process origin, or a socket that
/// answers garbage): good answers are taken from the node; a 502, garbage, a wrong
/// Content-Range or another version's ETag is refused, the node backs off, and the same bytes
/// come from the origin, byte-exact. The real nginx tier is in the end-to-end `FleetTests`.
///
/// The nodes are asked through libcurl here and through the SwiftNIO node client in
/// `NodeSourceTierTests`, which runs every test of this class again.
class TierSourceTests: XCTestCase {
    var origin: OriginServer!
    var node: OriginServer!
    var originSource: CurlRangeSource!
    var tierSource: RangeSource!
    private var stops: [() -> Void] = []
    var now = Locked(100.0)
    let data: [UInt8] = OriginServer.generatedBytes(seed: 21, offset: 0, count: 300_000)

    override func setUpWithError() throws {
        origin = try OriginServer()
        node = try OriginServer()
        origin.setFile("/f.bin", data: data, etag: etag)
        node.setFile("/f.bin", data: data, etag: etag)
        let config = FetcherConfiguration(clock: .realTime, userAgent: "tier-tests", connectTimeout: 5, lowSpeedTime: 10,
                                          maxRetries: 2, retryBaseDelay: 0.01)
        var tierConfig = config
        tierConfig.maxRetries = 0
        originSource = CurlRangeSource(configuration: config, logger: Logger(label: "tier-tests"))
        tierSource = nodeSource(tierConfig)
    }

    /// The source the nodes are asked through (stopped at the test's end).
    func makeNodeSource(_ configuration: FetcherConfiguration) -> (RangeSource, () -> Void) {
        let curl = CurlRangeSource(configuration: configuration, logger: Logger(label: "tier-tests"))
        return (curl, { curl.shutdown() })
    }

    func nodeSource(_ configuration: FetcherConfiguration) -> RangeSource {
        let (source, stop) = makeNodeSource(configuration)
        stops.append(stop)
        return source
    }

    override func tearDown() {
        originSource?.shutdown()
        for stop in stops { stop() }
        stops = []
        origin?.stop()
        node?.stop()
    }

    let etag = "\"v1\""

    private func makeTier(nodes: [String], slice: Int64 = 100_000) -> TierRangeSource {
        let spec = TierSpec(scheme: "http", host: "127.0.0.1", port: origin.port, nodes: nodes, sliceSize: slice)
        let clock = now
        return TierRangeSource(origin: originSource, tier: tierSource, tiers: [spec],
                               state: TierState(health: TierHealth(baseDelay: 30, maxDelay: 60), clock: { clock.value }))
    }

    private func fetch(_ tier: TierRangeSource, _ start: Int64, _ end: Int64?, version: String? = nil,
                       probe: Bool = false) -> RecordingSink {
        var request = FetchRequest(url: origin.url("/f.bin"), start: start, end: end, ifRange: version ?? etag)
        request.expectedLength = Int64(data.count)
        request.isProbe = probe
        let sink = RecordingSink()
        _ = tier.start(request, sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.violations, [])
        return sink
    }

    func testAGoodNodeServesSliceAlignedPiecesCarryingTheVersion() throws {
        let tier = makeTier(nodes: ["http://127.0.0.1:\(node.port)"])
        let sink = fetch(tier, 50_000, 250_000)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[50_000..<250_000]))
        XCTAssertEqual(sink.heads.first?.bodyStart, 50_000)
        XCTAssertEqual(sink.heads.first?.totalLength, 300_000)
        XCTAssertEqual(origin.requests.count, 0, "nothing from the origin")
        XCTAssertEqual(node.requests.map(\.range), ["bytes=50000-99999", "bytes=100000-199999", "bytes=200000-249999"])
        let first = try XCTUnwrap(node.requests.first)
        XCTAssertEqual(first.header("x-httpcachefs-version"), "\(etag) 300000")
        XCTAssertEqual(first.header("x-httpcachefs-key"), origin.url("/f.bin"))
        XCTAssertNil(first.header("if-range"), "the version travels in its own header, not as If-Range")
        XCTAssertEqual(tier.tierStatus().nodes.first?.bytes, 200_000)
        XCTAssertEqual(tier.tierStatus().originBytes, 0)
    }

    func testProbesAndFetchesOfAnUnknownVersionGoToTheOrigin() {
        let tier = makeTier(nodes: ["http://127.0.0.1:\(node.port)"])
        XCTAssertNil(fetch(tier, 0, 1, probe: true).result())
        var request = FetchRequest(url: origin.url("/f.bin"), start: 0, end: 1000)
        request.expectedLength = nil
        let sink = RecordingSink()
        _ = tier.start(request, sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertNil(sink.result())
        XCTAssertEqual(node.requests.count, 0)
        XCTAssertEqual(origin.requests.count, 2)
        XCTAssertEqual(tier.tierStatus().originBytes, 1001)
    }

    /// The engine takes a fetch's last bytes with `.stop`: they count where they came from too
    /// (`cache info` showed a tiered file short of its length, and its check's byte nowhere).
    func testBytesTakenWithTheirFetchsStopAreCountedForTheirNodeAndTheOrigin() {
        let tier = makeTier(nodes: ["http://127.0.0.1:\(node.port)"])
        func run(_ start: Int64, _ end: Int64, probe: Bool) {
            var request = FetchRequest(url: origin.url("/f.bin"), start: start, end: end, ifRange: etag)
            request.expectedLength = Int64(data.count)
            request.isProbe = probe
            let sink = RecordingSink()
            sink.stopAfterBytes = Int(end - start)
            _ = tier.start(request, sink: sink)
            wait(for: [sink.finished], timeout: 30)
            XCTAssertEqual(sink.body.count, Int(end - start))
        }
        run(0, 1, probe: true)
        run(50_000, 250_000, probe: false)
        let split = tier.tierSplit(ofKey: origin.url("/f.bin"))
        XCTAssertEqual(split?.origin, 1, "the check's byte")
        XCTAssertEqual(split?.tier, 200_000, "every byte the node sent, the last piece's last ones too")
    }

    func testAnOpenCheckOfAChangedFileCostsTheOriginOnlyItsRange() {
        let tier = makeTier(nodes: ["http://127.0.0.1:\(node.port)"])
        // The cache holds "v0"; the origin has moved on to `etag`.
        let sink = fetch(tier, 0, 1, version: "\"v0\"", probe: true)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.heads.first?.status, 206, "the range, not the whole new body")
        XCTAssertEqual(sink.heads.first?.etag, etag, "with the new version's validators")
        XCTAssertEqual(sink.body, [data[0]])
        XCTAssertEqual(origin.requests.map(\.range), ["bytes=0-0"])
        XCTAssertEqual(origin.requests.map(\.ifRange), [nil], "no If-Range on the open-time check")
        XCTAssertEqual(node.requests.count, 0)
    }

    /// Each bad answer: the bytes still arrive exactly, from the origin, and the node is skipped
    /// next time (in back-off) until the clock passes its delay.
    private func checkRefused(_ what: String, file: StaticString = #filePath, line: UInt = #line,
                              nodeURL: String? = nil) {
        let tier = makeTier(nodes: [nodeURL ?? "http://127.0.0.1:\(node.port)"])
        let sink = fetch(tier, 120_000, 180_000)
        XCTAssertNil(sink.result(), what, file: file, line: line)
        XCTAssertEqual(sink.body, Array(data[120_000..<180_000]), what, file: file, line: line)
        XCTAssertEqual(origin.requests.map(\.range), ["bytes=120000-179999"], what, file: file, line: line)
        let status = tier.tierStatus()
        XCTAssertEqual(status.nodes.first?.errors, 1, what, file: file, line: line)
        XCTAssertEqual(status.nodes.first?.backedOff, true, what, file: file, line: line)
        XCTAssertEqual(status.nodes.first?.bytes, 0, what, file: file, line: line)
        XCTAssertEqual(status.originBytes, 60_000, what, file: file, line: line)
        // In back-off: straight to the origin, the node not even asked.
        let nodeAsked = node.requests.count
        XCTAssertNil(fetch(tier, 0, 10_000).result())
        XCTAssertEqual(node.requests.count, nodeAsked, what, file: file, line: line)
        XCTAssertEqual(tier.tierStatus().nodes.first?.errors, 1, what, file: file, line: line)
    }

    func testA502FromTheNodeIsServedByTheOrigin() {
        node.setFaults("/f.bin", Faults(status: 502))
        checkRefused("502")
    }

    func testAnotherVersionOnTheNodeIsNeverServed() {
        var other = data
        other[130_000] ^= 0xFF
        node.setFile("/f.bin", data: other, etag: "\"v2\"")
        checkRefused("another ETag")
    }

    func testAWrongContentRangeFromTheNodeIsRefused() {
        node.setLengthClaim("/f.bin", .contentRangeTotal("300000"))
        checkRefused("wrong Content-Range")
    }

    func testAWholeBodyFromTheNodeIsRefused() {
        node.setFaults("/f.bin", Faults(ignoreRange: true))
        checkRefused("200 to a range")
    }

    func testGarbageFromTheNodeIsRefused() throws {
        let garbage = try GarbageServer()
        defer { garbage.stop() }
        checkRefused("garbage", nodeURL: "http://127.0.0.1:\(garbage.port)")
    }

    /// A node that trickles (a few KiB a second: above libcurl's old 1 byte/s floor) is given up
    /// within the node's window, backed off, and the piece goes on at the origin from the same
    /// byte. Before, every read of its slices waited for `--read-timeout` and failed, and the
    /// node, never counted as failed, was asked again by the next read.
    func testATricklingNodeIsGivenUpAndBackedOff() throws {
        node.setFaults("/f.bin", Faults(bytesPerSecond: 2_000))
        let nodeSource = nodeSource(FetcherConfiguration(clock: .realTime, userAgent: "tier-tests", connectTimeout: 5, lowSpeedTime: 2).forTierNodes())
        let spec = TierSpec(scheme: "http", host: "127.0.0.1", port: origin.port, nodes: ["http://127.0.0.1:\(node.port)"],
                            sliceSize: 100_000)
        let clock = now
        let tier = TierRangeSource(origin: originSource, tier: nodeSource, tiers: [spec],
                                   state: TierState(health: TierHealth(baseDelay: 30, maxDelay: 60), clock: { clock.value }))
        let sink = fetch(tier, 0, 100_000)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[0..<100_000]), "byte-exact across the switch")
        let status = tier.tierStatus()
        XCTAssertEqual(status.nodes.first?.errors, 1)
        XCTAssertEqual(status.nodes.first?.backedOff, true)
        XCTAssertEqual(origin.requests.count, 1, "the origin served the rest of the piece")
        XCTAssertEqual(FetcherConfiguration(clock: .realTime, lowSpeedTime: 60).forTierNodes().lowSpeedTime, 5)
        XCTAssertEqual(FetcherConfiguration(clock: .realTime, lowSpeedTime: 4).forTierNodes().lowSpeedTime, 2, "under --read-timeout")
    }

    func testANodeThatDiesMidPieceIsResumedFromTheNextByteElsewhere() throws {
        node.setFaults("/f.bin", Faults(dropAfterBytes: 30_000))
        let tier = makeTier(nodes: ["http://127.0.0.1:\(node.port)"])
        let sink = fetch(tier, 0, 300_000)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, data, "byte-exact across the switch")
        XCTAssertEqual(origin.requests.first?.range, "bytes=30000-99999", "the origin resumes where the node stopped")
        XCTAssertGreaterThan(tier.tierStatus().nodes[0].bytes, 0)
    }

    /// A piece resumed on the same node (a retry, or a connection handed to a waiting read) asks
    /// for the rest with no `If-Range`: with one, nginx's slice module starts at the file's first
    /// slice, and the node read or fetched every slice before the piece (seen in the fleet bench
    /// as a slice the origin sent twice).
    func testAPieceResumedOnANodeCarriesNoIfRange() throws {
        node.setFaults("/f.bin", Faults(dropAfterBytes: 30_000, dropCount: 1))
        let retrying = nodeSource(FetcherConfiguration(clock: .realTime, userAgent: "tier-tests", connectTimeout: 5, lowSpeedTime: 10,
                                                       maxRetries: 1, retryBaseDelay: 0.01))
        let spec = TierSpec(scheme: "http", host: "127.0.0.1", port: origin.port, nodes: ["http://127.0.0.1:\(node.port)"], sliceSize: 100_000)
        let tier = TierRangeSource(origin: originSource, tier: retrying, tiers: [spec], state: TierState(clock: { EngineClock.realTime.uptime }))
        let sink = fetch(tier, 0, 100_000)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[0..<100_000]), "byte-exact across the resume")
        XCTAssertEqual(node.requests.map(\.range), ["bytes=0-99999", "bytes=30000-99999"], "resumed on the node")
        XCTAssertEqual(node.requests.map(\.ifRange), [nil, nil], "never an If-Range to a node")
        XCTAssertEqual(origin.requests.count, 0)
    }

    func testTheNextNodeInTheSlicesOrderIsTriedBeforeTheOrigin() throws {
        let second = try OriginServer()
        defer { second.stop() }
        second.setFile("/f.bin", data: data, etag: etag)
        let bad = "http://127.0.0.1:\(node.port)", good = "http://127.0.0.1:\(second.port)"
        node.setFaults("/f.bin", Faults(status: 503))
        let tier = makeTier(nodes: [bad, good])
        let sink = fetch(tier, 0, 300_000)
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, data)
        XCTAssertEqual(origin.requests.count, 0, "a node down costs the origin nothing while another answers")
        XCTAssertEqual(tier.tierStatus().nodes.first { $0.node == good }?.bytes, 300_000)
    }

    func testTheOriginsOwnNewVersionEndsTheFetchAsAChange() {
        node.setFaults("/f.bin", Faults(status: 502))
        var other = data
        other[0] ^= 1
        origin.setFile("/f.bin", data: other, etag: "\"v2\"")
        let tier = makeTier(nodes: ["http://127.0.0.1:\(node.port)"])
        let sink = fetch(tier, 1000, 2000)
        guard case .remoteChanged = sink.result() else { return XCTFail("\(String(describing: sink.finishes))") }
        XCTAssertTrue(sink.body.isEmpty, "not one byte of the other version")
    }
}


/// Accepts connections on loopback and answers each with bytes that are not HTTP.
final class GarbageServer: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let thread: Thread

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        guard bound == 0, listen(fd, 16) == 0 else { throw NSError(domain: "GarbageServer", code: Int(errno)) }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        port = Int(UInt16(bigEndian: addr.sin_port))
        let listener = fd
        thread = Thread {
            while true {
                let c = accept(listener, nil, nil)
                if c < 0 { return }
                var junk = Array("\u{1}\u{2}garbage, not HTTP\r\n\r\n".utf8)
                _ = write(c, &junk, junk.count)
                close(c)
            }
        }
        thread.start()
    }

    func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}

extension TierSourceTests {
    func testAReaderThatStopsEndsTheTransferOnNoOtherNode() {
        let tier = makeTier(nodes: ["http://127.0.0.1:\(node.port)"])
        var request = FetchRequest(url: origin.url("/f.bin"), start: 0, end: 300_000, ifRange: etag)
        request.expectedLength = Int64(data.count)
        let sink = RecordingSink()
        sink.stopAfterBytes = 150_000
        _ = tier.start(request, sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.result(), .cancelled)
        XCTAssertEqual(sink.violations, [])
        XCTAssertEqual(origin.requests.count, 0, "a reader's stop is not a node failure")
        XCTAssertEqual(tier.tierStatus().nodes.first?.errors, 0)
        XCTAssertEqual(Array(sink.body.prefix(150_000)), Array(data[0..<min(sink.body.count, 150_000)]))
    }
}
