import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// `--egress-budget` at the proxy: past the budget a request that needs the origin gets 503 at
/// once, without a request to the origin; what is cached is served as ever.
final class EgressBudgetProxyTests: XCTestCase {
    func testPastTheBudgetTheProxyAnswers503AndServesWhatIsCached() throws {
        let ledger = EgressLedger(rules: .init(everyOrigin: EgressBudget(bytes: 100_000, period: .day)), file: nil,
                                  logger: Logger(label: "test"), clock: EngineClock.realTime.wall)
        var fetcher = FetcherConfiguration(clock: .realTime, lowSpeedTime: 2, maxRetries: 0)
        fetcher.egressLedger = ledger
        let h = try ProxyHarness(cache: { dir in
            var c = CacheConfiguration(directory: dir, engineClock: .realTime)
            c.egressLedger = ledger
            return c
        }, fetcher: fetcher)
        defer { h.shutdown() }
        h.origin.setGeneratedFile("/a", length: 60_000, seed: 1)
        h.origin.setGeneratedFile("/b", length: 60_000, seed: 2)
        h.origin.setGeneratedFile("/c", length: 10_000, seed: 3)
        XCTAssertEqual(try h.get(h.path("/a")).status, 200)
        XCTAssertEqual(try h.get(h.path("/b")).status, 200, "started within the budget: passed by one request")
        let refused = try h.get(h.path("/c"))
        XCTAssertEqual(refused.status, 503, String(decoding: refused.body, as: UTF8.self))
        XCTAssertTrue(String(decoding: refused.body, as: UTF8.self).contains("egress budget spent"))
        XCTAssertEqual(h.origin.requestCount(path: "/c"), 0, "without a request to the origin")
        let retryAfter = try XCTUnwrap(refused.header("Retry-After").flatMap(Int.init), "the 503 says when to come back")
        XCTAssertTrue((1...86_400).contains(retryAfter), "within the day's period: \(retryAfter)")
        let cached = try h.get(h.path("/a"))
        XCTAssertEqual(cached.status, 200)
        XCTAssertTrue(cached.body == OriginServer.generatedBytes(seed: 1, offset: 0, count: 60_000), "cached bytes are served as ever")

        // The status page, in Chromium: a banner at the top names the origin and when it resets.
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING the budget banner's browser check: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        let profile = TemporaryDirectory(prefix: "httpcachefs-chromium")
        defer { profile.remove() }
        let dom = try ExternalTool.run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                                  "--user-data-dir=\(profile.path)", "--virtual-time-budget=5000", "--dump-dom",
                                                  "http://127.0.0.1:\(h.port)/.httpcachefs/?key=\(h.configuration.controlKey)"],
                                       timeout: 120).stdout
        XCTAssertTrue(dom.contains("<div class=\"banner errors budget\""), String(dom.prefix(4000)))
        XCTAssertTrue(dom.contains("Egress budget spent: " + h.origin.url("")), String(dom.prefix(4000)))
        XCTAssertTrue(dom.contains("reads that need the origin fail until"), String(dom.prefix(4000)))
    }
}
