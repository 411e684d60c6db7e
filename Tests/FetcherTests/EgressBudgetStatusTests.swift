import CacheCore
import Fetcher
import Foundation
import Logging
import MetricsExport
import TestSupport
import XCTest

/// `--egress-budget` as the status document (`budgets`) and /metrics show it, from the ledger
/// the engine is given: used, left, the reset, whether it is spent and who yields.
final class EgressBudgetStatusTests: XCTestCase {
    func testTheStatusDocumentAndMetricsShowEachOriginsBudget() throws {
        let dir = NSTemporaryDirectory() + "httpcachefs-budget-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = MovableClock()   // 2030-03-17T17:46:40Z
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let origin = "https://cdn.example:443"
        let ledger = EgressLedger(rules: .init(origins: [origin: EgressBudget(bytes: 1000, period: .month(resetDay: 1))]),
                                  file: nil, calendar: utc, logger: Logger(label: "test"), clock: { clock.now })
        ledger.add(origin, bytes: 850)
        var configuration = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20, engineClock: .realTime)
        configuration.egressLedger = ledger
        let export = PrometheusExport()
        let cache = try CacheEngine(configuration: configuration, source: GatedSource(), metricsFactory: export.factory,
                                    layers: FetchLayers.standard(probes: Scheduler.manual()))
        defer { cache.shutdown() }

        let document = cache.statusDocument(version: "test", showDirectory: false)
        let budget = try XCTUnwrap(document.budgets?.first)
        XCTAssertEqual(budget.origin, origin)
        XCTAssertEqual(budget.budget, "1000/month")
        XCTAssertEqual(budget.usedBytes, 850)
        XCTAssertEqual(budget.leftBytes, 150)
        XCTAssertEqual(budget.resetsAt, ISO8601DateFormatter().date(from: "2030-04-01T00:00:00Z"))
        XCTAssertFalse(budget.spent)
        XCTAssertEqual(budget.yielding, "background")
        let json = String(decoding: try JSONEncoder().encode(document), as: UTF8.self)
        XCTAssertTrue(json.contains("\"budgets\""), json)

        let text = export.text(for: cache)
        for line in ["httpcachefs_egress_budget_used_bytes{origin=\"\(origin)\"} 850",
                     "httpcachefs_egress_budget_left_bytes{origin=\"\(origin)\"} 150",
                     "httpcachefs_egress_budget_bytes{origin=\"\(origin)\"} 1000"] {
            XCTAssertTrue(text.contains(line), "\(line) in\n\(text)")
        }
        XCTAssertTrue(text.contains("httpcachefs_egress_budget_reset_timestamp_seconds{origin=\"\(origin)\"}"), text)

        var plain = CacheConfiguration(directory: dir + "-none", capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20, engineClock: .realTime)
        plain.egressLedger = nil
        let none = try CacheEngine(configuration: plain, source: GatedSource())
        defer { none.shutdown(); try? FileManager.default.removeItem(atPath: dir + "-none") }
        XCTAssertNil(none.statusDocument(version: "test", showDirectory: false).budgets, "absent without a budget")
    }
}
