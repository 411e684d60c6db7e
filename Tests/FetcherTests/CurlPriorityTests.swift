import CacheCore
@testable import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// Priorities in the libcurl source, through a real origin: read-ahead yields to a read that is
/// behind, on a link shared by every connection and under `--bwlimit`, and every byte still
/// arrives once and in order. Asserts on byte counts taken at the waiting transfer's first and
/// last bytes, never on time: held, read-ahead takes nothing from the link meanwhile.
final class CurlPriorityTests: XCTestCase {
    var origin: OriginServer!
    let length: Int64 = 8 << 20

    override func setUpWithError() throws {
        origin = try OriginServer()
        origin.setGeneratedFile("/film", length: length, seed: 11)
    }
    override func tearDown() { origin?.stop(); origin = nil }

    private func source(_ tweak: (inout FetcherConfiguration) -> Void) -> CurlRangeSource {
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 30,
                                     maxRetries: 4, retryBaseDelay: 0.01)
        tweak(&c)
        return CurlRangeSource(configuration: c, logger: Logger(label: "fetcher-tests"))
    }

    /// Starts read-ahead of the whole file, then, once it flows, a waiting read of 2 MiB from
    /// 4 MiB; returns how many bytes the read-ahead received while the read ran.
    private func readAheadBytesDuringAWaitingRead(_ source: CurlRangeSource) throws -> Int {
        let ahead = RecordingSink()
        let flowing = expectation(description: "read-ahead flows")
        let once = OnceFlag()
        ahead.onBody = { n in if n >= 256 << 10, once.set() { flowing.fulfill() } }
        // From byte 1: a range (206), as the engine's read-ahead always is.
        _ = source.start(FetchRequest(url: origin.url("/film"), start: 1, priority: .far, owner: 1), sink: ahead)
        wait(for: [flowing], timeout: 30)

        let read = RecordingSink()
        let atFirst = Counter()
        read.onBody = { _ in if atFirst.value < 0 { atFirst.value = ahead.body.count } }
        _ = source.start(FetchRequest(url: origin.url("/film"), start: 4 << 20, end: 6 << 20, priority: .waiting, owner: 2),
                         sink: read)
        wait(for: [read.finished], timeout: 30)
        let atLast = ahead.body.count
        XCTAssertEqual(ahead.finishes.count, 0, "the read was done before the read-ahead")
        XCTAssertNil(read.result())
        XCTAssertTrue(read.body == OriginServer.generatedBytes(seed: 11, offset: 4 << 20, count: 2 << 20))

        wait(for: [ahead.finished], timeout: 60)
        XCTAssertNil(ahead.result())
        XCTAssertTrue(ahead.body == OriginServer.generatedBytes(seed: 11, offset: 1, count: Int(length) - 1),
                      "held and let go, read-ahead still gets every byte once and in order")
        XCTAssertEqual(ahead.violations + read.violations, [])
        return atLast - atFirst.value
    }

    func testReadAheadYieldsOnASharedLinkToAReadThatIsBehind() throws {
        origin.emulateLink(.milliseconds(2, perConnectionMbit: 0, sharedMbit: 32))   // 4 MB/s for all
        let source = source { $0.yieldAfter = 0 }
        defer { source.shutdown() }
        let taken = try readAheadBytesDuringAWaitingRead(source)
        XCTAssertLessThanOrEqual(taken, 256 << 10, "held while the read ran (it shared the link half and half before)")
    }

    func testReadAheadKeepsItsShareWhileNoReadIsBehind() throws {
        origin.emulateLink(.milliseconds(2, perConnectionMbit: 0, sharedMbit: 32))
        let source = source { $0.yieldAfter = 3600 }
        defer { source.shutdown() }
        let taken = try readAheadBytesDuringAWaitingRead(source)
        XCTAssertGreaterThan(taken, 512 << 10, "the link is shared round-robin: about 2 MiB went to read-ahead")
    }

    func testAWaitingReadTakesTheLastConnectionFromReadAhead() throws {
        origin.emulateLink(.milliseconds(2, perConnectionMbit: 0, sharedMbit: 32))
        let source = source {
            $0.maxConnections = 1
            $0.maxTotalConnections = 1
            $0.yieldAfter = 3600
        }
        defer { source.shutdown() }
        let taken = try readAheadBytesDuringAWaitingRead(source)
        XCTAssertLessThanOrEqual(taken, 256 << 10, "read-ahead gave its connection up while the read ran")
        XCTAssertEqual(origin.requestCount(path: "/film"), 3, "read-ahead resumed where it was, with one more request")
        XCTAssertEqual(source.peakAttachedTransfers, 1)
    }

    func testASlowOriginWithManyTransfersQueuedDoesNotKeepAnotherOriginWaiting() throws {
        origin.setGeneratedFile("/slow", length: 1000, seed: 3)
        origin.setFaults("/slow", Faults(delayBeforeHeaders: 0.3))
        let other = try OriginServer()
        defer { other.stop() }
        other.setGeneratedFile("/fast", length: 1000, seed: 4)
        let source = source {
            $0.maxConnections = 2
            $0.maxTotalConnections = 2
        }
        defer { source.shutdown() }
        let slow = (0..<8).map { _ in RecordingSink() }
        for sink in slow { _ = source.start(FetchRequest(url: origin.url("/slow")), sink: sink) }
        let fast = RecordingSink()
        let slowDoneAtFast = Counter()
        fast.onBody = { _ in slowDoneAtFast.value = slow.filter { !$0.finishes.isEmpty }.count }
        _ = source.start(FetchRequest(url: other.url("/fast")), sink: fast)
        wait(for: [fast.finished], timeout: 30)
        XCTAssertNil(fast.result())
        XCTAssertLessThanOrEqual(slowDoneAtFast.value, 2, "it took the first connection that came free, not the ninth")
        wait(for: slow.map(\.finished), timeout: 30)
    }

    func testUnderABandwidthLimitAWaitingReadTakesTheTokensFirst() throws {
        let source = source {
            $0.maxBytesPerSecond = 4 << 20
            $0.yieldAfter = 3600   // the limit alone orders them
        }
        defer { source.shutdown() }
        let taken = try readAheadBytesDuringAWaitingRead(source)
        XCTAssertLessThanOrEqual(taken, 256 << 10, "read-ahead got no token while the read waited for one")
    }
}

/// True the first time only.
final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    func set() -> Bool { lock.withLock { defer { done = true }; return !done } }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var v = -1
    var value: Int {
        get { lock.withLock { v } }
        set { lock.withLock { v = newValue } }
    }
}
