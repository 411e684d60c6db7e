import CacheCore
@testable import Fetcher
import Foundation
import XCTest

/// `OriginHealth` as a table: events at given times in, actions and states out. No clock, no sockets.
final class OriginHealthTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    func at(_ s: TimeInterval) -> Date { t0.addingTimeInterval(s) }

    enum Event {
        case unreachable(TimeInterval, String)
        case reached(TimeInterval)
        case probeDue(TimeInterval)
        case probeFailed(TimeInterval, String)
    }

    func run(_ h: inout OriginHealth, _ event: Event) -> OriginHealth.Action {
        switch event {
        case let .unreachable(t, e): return h.unreachable(e, now: at(t))
        case let .reached(t): return h.reached(now: at(t))
        case let .probeDue(t): return h.probeDue(now: at(t))
        case let .probeFailed(t, e): return h.probeFailed(e, now: at(t))
        }
    }

    func testTheFirstFailureMarksItDownAndProbesBackOffUntilItAnswers() {
        var h = OriginHealth(firstProbeDelay: 1, maxProbeDelay: 4)
        let table: [(Event, OriginHealth.Action, Bool)] = [
            (.reached(0), .none, false),
            (.unreachable(10, "Connection refused"), .wentDown(probeAt: at(11)), true),
            // Requests admitted before it went down fail the same way: nothing new to do.
            (.unreachable(10.5, "Connection refused"), .none, true),
            (.probeDue(10.9), .probeLater(at: at(11)), true),
            (.probeDue(11), .sendProbe, true),
            // One probe at a time.
            (.probeDue(11.1), .none, true),
            (.probeFailed(11.2, "Connection refused"), .probeLater(at: at(13.2)), true),
            (.probeDue(13.2), .sendProbe, true),
            (.probeFailed(13.3, "Connection refused"), .probeLater(at: at(17.3)), true),
            (.probeDue(17.3), .sendProbe, true),
            // The delay stops growing at its cap.
            (.probeFailed(17.4, "timed out"), .probeLater(at: at(21.4)), true),
            (.reached(20), .cameBack(downSince: at(10)), false),
            (.reached(21), .none, false),
            (.probeDue(22), .none, false),
            (.probeFailed(22, "late"), .none, false),
        ]
        for (i, (event, action, down)) in table.enumerated() {
            XCTAssertEqual(run(&h, event), action, "row \(i): \(event)")
            XCTAssertEqual(h.isDown, down, "row \(i): \(event)")
            XCTAssertEqual(h.admitsRequests, !down, "row \(i)")
        }
    }

    func testTheStateSaysSinceWhenAndTheLastError() {
        var h = OriginHealth()
        _ = h.unreachable("Could not resolve host: media.invalid", now: at(5))
        _ = h.probeDue(now: at(6))
        _ = h.probeFailed("Connection timed out", now: at(7))
        XCTAssertEqual(h.state, .down(since: at(5), lastError: "Connection timed out", failures: 2, nextProbe: at(9), probing: false))
    }

    func testAnAnswerWhileAProbeRunsBringsItUpAndTheProbesEndIsIgnored() {
        var h = OriginHealth()
        _ = h.unreachable("refused", now: at(0))
        XCTAssertEqual(h.probeDue(now: at(1)), .sendProbe)
        XCTAssertEqual(h.reached(now: at(1.5)), .cameBack(downSince: at(0)))
        XCTAssertEqual(h.probeFailed("refused", now: at(2)), .none)
        XCTAssertEqual(h.state, .up)
    }

    func testOnlyEvidenceAboutTheOriginItselfMarksItDown() {
        let url = "http://origin.test/f"
        let refused = FetchError.network(url: url, message: "Failed to connect to origin.test port 80: Connection refused")
        let table: [(String, FetchError?, answered: Bool, probe: Bool, elsewhere: Bool, OriginHealth.Evidence)] = [
            ("no connection", refused, false, false, false, .unreachable),
            ("a timeout, even after the head", .timeout(url: url), true, false, false, .unreachable),
            ("a dropped connection mid-body", refused, true, false, false, .none),
            ("an error status", .http(status: 503, url: url), false, false, false, .reached),
            ("a malformed URL (a raw space)", .refusedAddress(url: "http://origin.test/a b", reason: "not a valid URL"), false, false, false, .none),
            ("a redirect to file://", .refusedAddress(url: "file:///etc/passwd", reason: "only http and https"), false, false, false, .none),
            ("a redirect to a closed port", .network(url: "http://origin.test:9/x", message: "Connection refused"), false, false, true, .reached),
            ("a redirect to a host that times out", .timeout(url: "http://cdn.test/x"), false, false, true, .reached),
            ("too many redirects", .invalidResponse(url: url, message: "more than 10 redirects"), false, false, false, .reached),
            ("a probe refused", refused, false, true, false, .unreachable),
            ("a probe redirected to a closed port", .network(url: "http://cdn.test/x", message: "refused"), false, true, true, .reached),
            ("a probe of a URL now refused by policy", .refusedAddress(url: url, reason: "x"), false, true, false, .unreachable),
        ]
        for (what, error, answered, probe, elsewhere, expected) in table {
            XCTAssertEqual(OriginHealth.evidence(of: error, answered: answered, isProbe: probe, failedElsewhere: elsewhere), expected, what)
        }
    }
}
