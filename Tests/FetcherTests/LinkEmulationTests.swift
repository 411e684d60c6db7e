import Foundation
@testable import TestSupport
import XCTest

/// Pins the origin's link emulation: the pacing arithmetic on an injected clock (no sleeps, no
/// measured times), and that an emulated link changes when bytes arrive, never which bytes.
final class LinkEmulationTests: XCTestCase {
    private let ms: UInt64 = 1_000_000

    /// Sends `bytes` through `pacer` starting at `start`, jumping the clock to every departure;
    /// returns the time the last byte left.
    private func drain(_ pacer: LinkPacer, bytes: Int64, from start: UInt64) -> UInt64 {
        var now = start, left = bytes
        while left > 0 {
            switch pacer.admit(left, now: now) {
            case let .send(n): left -= n
            case let .wait(until):
                XCTAssertGreaterThan(until, now, "a wait lies in the future")
                now = until
            }
        }
        return now
    }

    func testOneConnectionTakesItsBytesOverItsRateWithNoHeadStart() {
        let link = SharedLink(LinkEmulation(oneWayDelay: 0, bytesPerSecondPerConnection: 1_000_000, bytesPerSecondShared: nil))
        let start: UInt64 = 1_000 * ms
        let pacer = LinkPacer(link: link, now: start)
        XCTAssertEqual(pacer.admit(65536, now: start), .wait(until: start + UInt64(link.quantum) * 1000),
                       "the first quantum pays its transfer time before it leaves: an idle link has no burst")
        XCTAssertEqual(drain(pacer, bytes: 400_000, from: start), start + 400 * ms, "400 kB at 1 MB/s take 400 ms")
    }

    func testParallelConnectionsShareTheSharedRateRoundRobin() {
        let link = SharedLink(LinkEmulation(oneWayDelay: 0, bytesPerSecondPerConnection: 1_000_000, bytesPerSecondShared: 2_000_000))
        let start: UInt64 = 1_000 * ms
        let pacers = (0..<4).map { _ in LinkPacer(link: link, now: start) }
        var left = [Int64](repeating: 200_000, count: 4)
        var next = [UInt64](repeating: start, count: 4)
        var finished = [UInt64](repeating: 0, count: 4)
        // An event loop in miniature: always serve the connection whose wait ends first.
        while let i = (0..<4).filter({ left[$0] > 0 }).min(by: { next[$0] < next[$1] }) {
            switch pacers[i].admit(left[i], now: next[i]) {
            case let .send(n):
                left[i] -= n
                if left[i] == 0 { finished[i] = next[i] }
            case let .wait(until): next[i] = until
            }
        }
        // 800 kB over a 2 MB/s shared link: 400 ms, though each connection alone could do 1 MB/s.
        let last = finished.max()!, first = finished.min()!
        // The first quantum waits for its connection's rate (4 ms), then the shared link is busy.
        XCTAssertEqual(Double(last - start) / Double(ms), 402, accuracy: 2)
        XCTAssertLessThanOrEqual(last - first, 4 * UInt64(link.quantum) * 1000 / 2,
                                 "fair: all finish within one round of quanta of each other")
    }

    func testALateTimerCatchesUpWithinTheSlack() {
        let link = SharedLink(LinkEmulation(oneWayDelay: 0, bytesPerSecondPerConnection: 1_000_000, bytesPerSecondShared: nil))
        let start: UInt64 = 1_000 * ms
        let pacer = LinkPacer(link: link, now: start)
        guard case let .wait(first) = pacer.admit(1 << 20, now: start) else { return XCTFail("an idle link waits first") }
        // The timer fires 5 ms late: the quantum due then and those due in the 5 ms missed go at once.
        let late = first + 5 * ms
        var sent: Int64 = 0
        while case let .send(n) = pacer.admit(1 << 20, now: late) { sent += n }
        XCTAssertEqual(sent, link.quantum * (1 + Int64(5 * ms / (UInt64(link.quantum) * 1000))))
    }

    func testAnEmulatedLinkDelaysBytesButNeverChangesThem() throws {
        let origin = try OriginServer()
        defer { origin.stop() }
        origin.setGeneratedFile("/g.bin", length: 300_000, seed: 7)
        origin.emulateLink(.milliseconds(1, perConnectionMbit: 800, sharedMbit: 1600))
        let range = try RawHTTP.request(port: origin.port, method: "GET", path: "/g.bin", headers: [("Range", "bytes=1000-250999")])
        XCTAssertEqual(range.status, 206)
        XCTAssertEqual(range.body, OriginServer.generatedBytes(seed: 7, offset: 1000, count: 250_000))
        origin.emulateLink(nil)
        XCTAssertEqual(try RawHTTP.request(port: origin.port, method: "GET", path: "/g.bin", headers: []).body.count, 300_000)
    }
}
