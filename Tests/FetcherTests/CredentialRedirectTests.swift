import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// Where the user's credentials go, against two loopback origins that record every header that
/// reaches them: `home`, a credential origin (a URL the user gave), and `canary`, another origin
/// (another port: curl's rule is scheme, host and port). Basic auth, a custom API key header and
/// a cookie header must reach `home` and never `canary`, directly or after a redirect.
final class CredentialRedirectTests: XCTestCase {
    var home: OriginServer!
    var canary: OriginServer!
    var sources: [CurlRangeSource] = []
    let data: [UInt8] = OriginServer.generatedBytes(seed: 7, offset: 0, count: 20_000)
    let secretHeaders = ["X-Api-Key: key-123", "Cookie: session=abc"]

    override func setUpWithError() throws {
        home = try OriginServer()
        canary = try OriginServer()
        home.setFile("/f.bin", data: data)
        canary.setFile("/f.bin", data: data)
    }

    override func tearDown() {
        sources.forEach { $0.shutdown() }
        sources = []
        home?.stop()
        canary?.stop()
    }

    private func fetch(_ url: String, method: String? = nil, logger: Logger = Logger(label: "credential-tests"),
                       _ tweak: (inout FetcherConfiguration) -> Void = { _ in }) -> RecordingSink {
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", extraHeaders: secretHeaders, connectTimeout: 5,
                                     lowSpeedTime: 10, maxRetries: 0)
        c.access = OriginAccess(user: "alice", password: Secret("pw"), scope: CredentialScope(urls: [home.url("/movies/a.mkv")]))
        c.via = "1.1 httpcachefs-test"
        tweak(&c)
        let source = CurlRangeSource(configuration: c, logger: logger)
        sources.append(source)
        let sink = RecordingSink()
        var request = FetchRequest(url: url, start: 0, end: 100)
        if let method {
            request = FetchRequest(url: url)
            request.method = method
            request.body = Array("<propfind/>".utf8)
        }
        _ = source.start(request, sink: sink)
        wait(for: [sink.finished], timeout: 30)
        return sink
    }

    private func assertNoCredentials(_ requests: [RequestRecord], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(requests.isEmpty, "\(what): the canary was asked", file: file, line: line)
        for r in requests {
            for name in ["authorization", "x-api-key", "cookie"] {
                XCTAssertNil(r.header(name), "\(what): \(name) reached \(r.path)", file: file, line: line)
            }
            XCTAssertEqual(r.header("via"), "1.1 httpcachefs-test", "\(what): the loop marker goes on every hop", file: file, line: line)
        }
    }

    private func assertCredentials(_ r: RequestRecord?, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r?.header("authorization"), "Basic " + Data("alice:pw".utf8).base64EncodedString(), what, file: file, line: line)
        XCTAssertEqual(r?.header("x-api-key"), "key-123", what, file: file, line: line)
        XCTAssertEqual(r?.header("cookie"), "session=abc", what, file: file, line: line)
    }

    func testACredentialOriginGetsBasicAuthAndTheHeadersAndAnyOtherOriginNothing() {
        XCTAssertNil(fetch(home.url("/f.bin")).result())
        assertCredentials(home.requests.last, "the origin of a URL the user gave, any path")

        let direct = fetch(canary.url("/f.bin"))
        XCTAssertNil(direct.result(), "the fetch itself works, without credentials")
        XCTAssertEqual(direct.body, Array(data[0..<100]))
        assertNoCredentials(canary.requests, "a direct fetch of an origin the user never gave (a proxy URL)")
    }

    /// Issue 46, item 3: a mount joining the daemon names its origins with the daemon's
    /// credentials only if it was given them. Table of grants and what each origin gets.
    func testAGrantWithoutCredentialsKeepsThemAndTheNetrcFileFromItsOrigins() throws {
        let a = "http://a.test/film.mkv", b = "http://b.test:8080/tv/ep.mkv", c = "https://c.test/x"
        let scope = CredentialScope(urls: [a], hosts: [HostPattern("*.given.test")])
        scope.grant(headers: false, netrc: false).add(urls: [b, "http://a.test/other.mkv", "http://x.given.test/y"])
        scope.grant(headers: true, netrc: true).add(urls: [c])
        let table: [(url: String, headers: Bool, netrc: Bool, why: String)] = [
            (a, true, true, "the daemon's own origin"),
            ("http://a.test/other.mkv", true, true, "the daemon's origin, named again by a mount without credentials"),
            (b, false, false, "an origin only a mount without credentials named"),
            ("http://b.test:8080/elsewhere", false, false, "any path of that origin"),
            ("http://b.test/tv/ep.mkv", false, true, "another port is another origin (a proxy URL: netrc goes to its machine)"),
            (c, true, true, "a mount given the credentials brings its origins"),
            ("http://x.given.test/y", true, true, "--credential-host still names its hosts"),
            ("http://unnamed.test/z", false, true, "an origin nobody named: no header, netrc to its machine"),
        ]
        for row in table {
            XCTAssertEqual(scope.covers(row.url), row.headers, "headers: \(row.why)")
            XCTAssertEqual(scope.allowsNetrc(row.url), row.netrc, "netrc: \(row.why)")
        }
        XCTAssertEqual(scope.netrcWithheld, [try XCTUnwrap(URLOrigin(b))])
    }

    /// Over the wire: the canary is an origin a mount given no credentials named; neither the
    /// headers, `--user` nor the netrc file's login for its host reach it.
    func testAnOriginNamedWithoutCredentialsGetsNoneOfThemNorTheNetrcLogin() throws {
        let netrc = FileManager.default.temporaryDirectory.appendingPathComponent("netrc-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: netrc) }
        try "machine 127.0.0.1 login carol password from-netrc\n".write(toFile: netrc, atomically: true, encoding: .utf8)
        let sink = fetch(canary.url("/f.bin")) {
            $0.access.netrcFile = netrc
            $0.access.user = nil
            $0.access.scope.grant(headers: false, netrc: false).add(urls: [self.canary.url("/f.bin")])
        }
        XCTAssertNil(sink.result())
        assertNoCredentials(canary.requests, "an origin named by a mount given no credentials")
        let before = canary.requests.count
        // The same netrc file reaches its machine where nobody withheld it (the home origin).
        XCTAssertNil(fetch(home.url("/f.bin")) { $0.access.netrcFile = netrc; $0.access.user = nil }.result())
        XCTAssertEqual(home.requests.last?.header("authorization"), "Basic " + Data("carol:from-netrc".utf8).base64EncodedString())
        XCTAssertEqual(canary.requests.count, before)
    }

    func testWithheldCredentialsAreLoggedOncePerOriginWithoutTheSecrets() {
        let log = RecordedLog()
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", extraHeaders: secretHeaders, connectTimeout: 5, maxRetries: 0)
        c.access = OriginAccess(user: "alice", password: Secret("pw"), scope: CredentialScope(urls: [home.url("/")]))
        let source = CurlRangeSource(configuration: c, logger: log.logger)
        sources.append(source)
        for url in [canary.url("/f.bin"), canary.url("/f.bin"), home.url("/f.bin")] {
            let sink = RecordingSink()
            _ = source.start(FetchRequest(url: url, start: 0, end: 10), sink: sink)
            wait(for: [sink.finished], timeout: 30)
        }
        let withheld = log.lines.filter { $0.contains("credentials withheld") }
        XCTAssertEqual(withheld.count, 1, "\(log.lines)")
        XCTAssertTrue(withheld.first?.hasPrefix("info ") ?? false, "\(withheld)")
        XCTAssertTrue(withheld.first?.contains("origin=http://127.0.0.1:\(canary.port)") ?? false, "\(withheld)")
        for line in log.lines { XCTAssertFalse(line.contains("key-123") || line.contains("session=abc") || line.contains("pw"), line) }
    }

    func testARedirectToAnotherOriginCarriesNoCredentialOfAnyKind() {
        home.setFaults("/go", Faults(redirectTo: canary.url("/f.bin")))
        let sink = fetch(home.url("/go"))
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[0..<100]))
        XCTAssertEqual(sink.heads.first?.finalURL, canary.url("/f.bin"))
        assertCredentials(home.requests.first, "the first hop is the credential origin")
        assertNoCredentials(canary.requests, "Authorization, Cookie and custom headers are all stripped off-origin")
        XCTAssertEqual(canary.requests.first?.range, "bytes=0-99", "the hop asks for the same range")
    }

    func testASameOriginRedirectKeepsTheCredentials() {
        home.setFaults("/old", Faults(redirectTo: "/f.bin"))
        XCTAssertNil(fetch(home.url("/old")).result())
        XCTAssertEqual(home.requests.map(\.path), ["/old", "/f.bin"])
        for r in home.requests { assertCredentials(r, "hop \(r.path)") }
    }

    func testACredentialHostGetsThemDirectlyButStillNotThroughAnotherOriginsRedirect() {
        let named: (inout FetcherConfiguration) -> Void = {
            $0.access.scope = CredentialScope(urls: [self.home.url("/")], hosts: [HostPattern("127.0.0.1:\(self.canary.port)")])
        }
        XCTAssertNil(fetch(canary.url("/f.bin"), named).result())
        assertCredentials(canary.requests.last, "--credential-host names it")

        canary.resetLog()
        home.setFaults("/go", Faults(redirectTo: canary.url("/f.bin")))
        XCTAssertNil(fetch(home.url("/go"), named).result())
        assertNoCredentials(canary.requests, "curl's rule: only a hop at the request's own origin")
    }

    func testAllowHostRefusesARedirectHopToAnotherHost() {
        home.setFaults("/go", Faults(redirectTo: canary.url("/f.bin")))
        let sink = fetch(home.url("/go")) { $0.allowedHosts = [HostPattern("127.0.0.1:\(self.home.port)")] }
        guard case let .refusedAddress(url, reason)? = sink.result() else {
            return XCTFail("the hop must be refused, got \(String(describing: sink.finishes))")
        }
        XCTAssertEqual(url, canary.url("/f.bin"))
        XCTAssertTrue(reason.contains("which --allow-host does not allow"), reason)
        guard case .refusedAddress = CacheError(sink.result()!, url: url) else { return XCTFail("the proxy answers it 403") }
        XCTAssertEqual(canary.requests.count, 0, "nothing reached the refused host")
        XCTAssertEqual(sink.heads, [])
    }

    func testRedirectsToAnotherSchemeOrAClosedPortFailThatRequestClearly() throws {
        home.setFaults("/file", Faults(redirectTo: "file:///etc/passwd"))
        guard case let .refusedAddress(_, reason)? = fetch(home.url("/file")).result() else { return XCTFail("file:// must be refused") }
        XCTAssertTrue(reason.contains("only http and https redirects are followed"), reason)

        let closed = try OriginServer()
        let closedURL = closed.url("/gone")
        closed.stop()
        home.setFaults("/closed", Faults(redirectTo: closedURL))
        guard case let .network(url, _)? = fetch(home.url("/closed")).result() else { return XCTFail("a closed port is a network error") }
        XCTAssertEqual(url, closedURL, "the error names the hop that failed, not the redirecting origin")
    }

    func testAMalformedURLFailsAsTheRequestsOwnFault() {
        guard case let .refusedAddress(_, reason)? = fetch(home.url("/a b.bin")).result() else { return XCTFail("a raw space is refused") }
        XCTAssertTrue(reason.hasPrefix("not a valid URL"), reason)
        XCTAssertEqual(home.requests.count, 0)
    }

    func testAPropfindRedirectedToTheFoldersSlashStaysAPropfindWithItsBody() {
        home.setFaults("/dav", Faults(redirectTo: "/dav/"))
        _ = fetch(home.url("/dav"), method: "PROPFIND")
        XCTAssertEqual(home.requests.map(\.method), ["PROPFIND", "PROPFIND"])
        XCTAssertEqual(home.requests.map(\.path), ["/dav", "/dav/"])
    }
}
