import CacheCore
@testable import Fetcher
import XCTest

/// Redirects as `TransferState` follows them, hop by hop, with no curl and no sockets: which
/// answers are followed, which fail the request and how, and where credentials may go.
final class TransferStateRedirectTests: XCTestCase {
    let url = "http://origin.test/f"
    let policy = RetryPolicy(maxRetries: 2, baseDelay: 0.5, maxDelay: 30)

    private func block(_ status: Int, location: String?) -> ResponseHeaderBlock {
        ResponseHeaderBlock(status: status, fields: location.map { [("location", $0)] } ?? [], complete: true)
    }

    private let partial = ResponseHeaderBlock(status: 206, fields: [
        ("content-range", "bytes 0-9/100"), ("content-length", "10"), ("etag", "\"v1\""),
    ], complete: true)

    /// Runs one hop that answers `status` with `location` (resolved against the hop's URL, as
    /// `CurlTransfer` does); returns the head action and what the attempt's end says.
    private func hop(_ s: inout TransferState, _ status: Int, _ location: String?) -> (TransferState.HeadAction, TransferState.Next) {
        _ = s.beginAttempt()
        let resolved = location.flatMap { URLOrigin.resolve($0, against: s.url) }
        let action = s.receiveHead(block(status, location: location), finalURL: s.url, location: resolved)
        return (action, s.attemptEnded(.ok))
    }

    private func state(_ request: FetchRequest? = nil, allowed: [String] = []) -> TransferState {
        TransferState(request: request ?? FetchRequest(url: url, start: 0, end: 10), policy: policy,
                      redirects: RedirectRules(allowedHosts: allowed.map(HostPattern.init)))
    }

    func testEveryRedirectStatusWithALocationIsFollowedToItsAbsoluteTarget() {
        let table: [(status: Int, location: String, target: String)] = [
            (301, "/g", "http://origin.test/g"),
            (302, "g?x=1", "http://origin.test/g?x=1"),
            (303, "http://cdn.test/a", "http://cdn.test/a"),
            (307, "//cdn.test:8080/b", "http://cdn.test:8080/b"),
            (308, "https://cdn.test/c d", "https://cdn.test/c%20d"),
        ]
        for c in table {
            var s = state()
            let (action, next) = hop(&s, c.status, c.location)
            XCTAssertEqual(action, .redirect(to: c.target), "\(c.status) \(c.location)")
            XCTAssertEqual(next, .redirect(to: c.target), "\(c.status) \(c.location)")
            XCTAssertEqual(s.upcomingURL, c.target)
            let (range, _) = s.beginAttempt()
            XCTAssertEqual(s.url, c.target)
            XCTAssertEqual(range, "bytes=0-9", "the hop asks for the same range")
            XCTAssertEqual(s.attempts, 1, "a hop is part of its attempt")
        }
    }

    func testAnswersThatAreNotRedirectsAreNotFollowed() {
        // 304 has no body to follow; a 3xx without Location is an error status.
        for (status, location) in [(304, "/g"), (302, nil)] as [(Int, String?)] {
            var s = state()
            let (action, next) = hop(&s, status, location)
            XCTAssertEqual(action, .abort)
            XCTAssertEqual(next, .finish(.http(status: status, url: url)))
        }
        var never = TransferState(request: FetchRequest(url: url, start: 0, end: 10), policy: policy, redirects: .never)
        XCTAssertEqual(hop(&never, 302, "/g").1, .finish(.http(status: 302, url: url)), "a tier node's redirect is its error")
    }

    func testARedirectThatCannotBeFollowedFailsThatRequestWithAClearError() {
        let table: [(location: String, error: FetchError)] = [
            ("file:///etc/passwd", .refusedAddress(url: "file:///etc/passwd", reason:
                "http://origin.test/f redirected there: only http and https redirects are followed")),
            ("ftp://files.test/f", .refusedAddress(url: "ftp://files.test/f", reason:
                "http://origin.test/f redirected there: only http and https redirects are followed")),
            ("http://", .invalidResponse(url: url, message: "a 302 redirect to 'http://', which is not a usable URL")),
            ("/f", .invalidResponse(url: url, message: "a redirect loop: http://origin.test/f was asked before in this chain")),
        ]
        for c in table {
            var s = state()
            let (action, next) = hop(&s, 302, c.location)
            XCTAssertEqual(action, .abort, c.location)
            XCTAssertEqual(next, .finish(c.error), c.location)
        }
    }

    func testALongerLoopAndTooManyHopsAreErrors() {
        var s = state()
        XCTAssertEqual(hop(&s, 302, "/a").1, .redirect(to: "http://origin.test/a"))
        XCTAssertEqual(hop(&s, 302, "/b").1, .redirect(to: "http://origin.test/b"))
        XCTAssertEqual(hop(&s, 302, "/a").1, .finish(.invalidResponse(url: "http://origin.test/b", message:
            "a redirect loop: http://origin.test/a was asked before in this chain")))

        var chain = state()
        for n in 1...FetcherConfiguration.maxRedirects {
            XCTAssertEqual(hop(&chain, 302, "/\(n)").1, .redirect(to: "http://origin.test/\(n)"))
        }
        XCTAssertEqual(hop(&chain, 302, "/next").1, .finish(.invalidResponse(url: "http://origin.test/10", message:
            "more than 10 redirects (the last to http://origin.test/next)")))
    }

    func testARetryStartsAgainFromTheRequestsURL() {
        var s = state()
        _ = hop(&s, 302, "http://cdn.test/signed?1")
        _ = s.beginAttempt()
        XCTAssertEqual(s.url, "http://cdn.test/signed?1")
        XCTAssertEqual(s.attemptEnded(.failed(message: "reset", retryable: true)), .retry(after: 0.5))
        XCTAssertEqual(s.upcomingURL, url, "an origin's redirect may change (a new signature)")
        _ = s.beginAttempt()
        XCTAssertEqual(s.url, url)
        XCTAssertEqual(s.hops, 0)
        XCTAssertTrue(s.atRequestOrigin)
    }

    func testAllowHostPatternsHoldForEveryHopToAnotherOrigin() {
        let table: [(allowed: [String], location: String, followed: Bool)] = [
            ([], "http://elsewhere.test/x", true),
            (["origin.test"], "/same-origin", true),
            (["origin.test"], "http://elsewhere.test/x", false),
            (["origin.test:80"], "http://origin.test:8080/x", false),
            (["*.cdn.test"], "http://a.cdn.test/x", true),
            (["origin.test", "cdn.test:443"], "https://cdn.test/x", true),
            (["origin.test", "cdn.test:443"], "http://cdn.test/x", false),
        ]
        for c in table {
            var s = state(allowed: c.allowed)
            let (_, next) = hop(&s, 302, c.location)
            if c.followed {
                guard case .redirect = next else { return XCTFail("\(c): \(next)") }
            } else {
                guard case let .finish(.refusedAddress(_, reason)?) = next else { return XCTFail("\(c): \(next)") }
                XCTAssertTrue(reason.contains("which --allow-host does not allow"), reason)
            }
        }
    }

    func testOnlyAHopAtTheRequestsOwnOriginMayCarryCredentials() {
        let table: [(location: String, sameOrigin: Bool)] = [
            ("/g", true),
            ("http://ORIGIN.test:80/g", true),
            ("https://origin.test/g", false),     // another scheme
            ("http://origin.test:8080/g", false), // another port
            ("http://cdn.test/g", false),
        ]
        for c in table {
            var s = state()
            _ = s.beginAttempt()
            XCTAssertTrue(s.atRequestOrigin)
            _ = s.receiveHead(block(302, location: c.location), finalURL: url, location: URLOrigin.resolve(c.location, against: url))
            _ = s.attemptEnded(.ok)
            _ = s.beginAttempt()
            XCTAssertEqual(s.atRequestOrigin, c.sameOrigin, c.location)
        }
    }

    func testARedirectsBodyIsDroppedAndTheFinalAnswerIsTheHead() {
        var s = state()
        _ = s.beginAttempt()
        _ = s.receiveHead(block(302, location: "/g"), finalURL: url, location: "http://origin.test/g")
        XCTAssertEqual(s.receiveBody(count: 20).length, 0, "the redirect's page is nobody's bytes")
        XCTAssertFalse(s.redirectBodyTooLong)
        XCTAssertEqual(s.receiveBody(count: Int(TransferState.maxRedirectBody)).length, 0)
        XCTAssertTrue(s.redirectBodyTooLong, "a long one is cut: the target is known")
        XCTAssertEqual(s.attemptEnded(.failed(message: "aborted", retryable: false)), .redirect(to: "http://origin.test/g"))
        _ = s.beginAttempt()
        guard case let .deliver(head) = s.receiveHead(partial, finalURL: s.url) else { return XCTFail("no head") }
        XCTAssertEqual(head.finalURL, "http://origin.test/g")
        XCTAssertEqual(s.receiveBody(count: 10).length, 10)
        XCTAssertEqual(s.attemptEnded(.ok), .finish(nil))
    }

    func testASeeOtherTurnsAPropfindIntoAGetAndTheOthersKeepIt() {
        for (status, keeps) in [(301, true), (302, true), (303, false), (307, true), (308, true)] {
            var request = FetchRequest(url: url)
            request.method = "PROPFIND"
            request.body = Array("<propfind/>".utf8)
            var s = state(request)
            _ = hop(&s, status, "/dir/")
            _ = s.beginAttempt()
            XCTAssertEqual(s.method, keeps ? "PROPFIND" : nil, "\(status)")
            XCTAssertEqual(s.body, keeps ? request.body : nil, "\(status)")
        }
    }

    func testAFailureAtAnotherOriginNamesThatOriginNotTheRequests() {
        var s = state()
        _ = hop(&s, 302, "http://127.0.0.1:9/closed")
        _ = s.beginAttempt()
        XCTAssertFalse(s.atRequestOrigin)
        XCTAssertEqual(s.attemptEnded(.failed(message: "Couldn't connect", retryable: false)),
                       .finish(.network(url: "http://127.0.0.1:9/closed", message: "Couldn't connect")))
    }
}
