import CacheCore
@testable import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// `--egress-budget` in the libcurl loop against a real (loopback) origin that counts requests:
/// a class past its share is not sent, a running transfer is stopped once its class's share is
/// used, and a player's read gets the rest. Bytes and request counts, never time.
final class EgressBudgetOverHTTPTests: XCTestCase {
    var origin: OriginServer!

    override func setUpWithError() throws { origin = try OriginServer() }
    override func tearDown() { origin?.stop(); origin = nil }

    func testClassesStopInOrderAndTheBudgetIsPassedByAtMostOneTurn() throws {
        let budget: Int64 = 1 << 20
        origin.setGeneratedFile("/big", length: 4 << 20, seed: 11)
        origin.setFaults("/big", Faults(bytesPerSecond: 4 << 20))   // many turns of the loop
        origin.setGeneratedFile("/small", length: 50_000, seed: 12)
        let clock = MovableClock()
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let ledger = EgressLedger(rules: .init(everyOrigin: EgressBudget(bytes: budget, period: .day)), file: nil,
                                  calendar: utc, logger: Logger(label: "test"), clock: { clock.now })
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 10, maxRetries: 0)
        c.egressLedger = ledger
        let source = CurlRangeSource(configuration: c, logger: Logger(label: "fetcher-tests"))
        defer { source.shutdown() }
        func fetch(_ path: String, _ priority: FetchPriority) -> RecordingSink {
            let sink = RecordingSink()
            var request = FetchRequest(url: origin.url(path))
            request.priority = priority
            _ = source.start(request, sink: sink)
            wait(for: [sink.finished], timeout: 30)
            return sink
        }
        let key = try XCTUnwrap(EgressLedger.originKey(of: origin.url("/")))
        func used() -> Int64 { ledger.status().first { $0.origin == key }?.usedBytes ?? 0 }

        let warmUp = fetch("/big", .preload)
        XCTAssertEqual(warmUp.result(), .budgetSpent(url: origin.url("/big")), "warm-up stops at 80 %")
        XCTAssertGreaterThanOrEqual(used(), budget / 10 * 8)
        XCTAssertLessThan(used(), budget, "and left the rest to players")
        XCTAssertTrue(warmUp.body == OriginServer.generatedBytes(seed: 11, offset: 0, count: warmUp.body.count), "what came is right")

        let next = fetch("/small", .preload)
        XCTAssertEqual(next.result(), .budgetSpent(url: origin.url("/small")))
        XCTAssertEqual(origin.requestCount(path: "/small"), 0, "warm-up past its share is not sent")

        let player = fetch("/small", .waiting)
        XCTAssertNil(player.result(), "a player's read gets the rest")
        XCTAssertEqual(player.body.count, 50_000)

        let film = fetch("/big", .far)
        XCTAssertEqual(film.result(), .budgetSpent(url: origin.url("/big")), "read-ahead stops once the budget is spent")
        XCTAssertGreaterThanOrEqual(used(), budget)
        XCTAssertLessThan(used() - budget, 1 << 20, "passed by at most what one turn of the loop brought")
        let requests = origin.requestCount(path: "/big")
        XCTAssertEqual(fetch("/big", .waiting).result(), .budgetSpent(url: origin.url("/big")))
        XCTAssertEqual(origin.requestCount(path: "/big"), requests, "spent: not even a waiting read is sent")
        XCTAssertEqual(CacheError(.budgetSpent(url: "u"), url: "u"), .budgetSpent(url: "u"))
        XCTAssertEqual(CacheError(.http(status: 509, url: "u"), url: "u"), .httpStatus(url: "u", status: 509),
                       "an origin's own 509 is its answer, not our budget")
    }
}
