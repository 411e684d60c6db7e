import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// Credentials and trust against the in-process origin, which logs every request's headers:
/// `--user`/`--password-file`, a netrc file, URL user-info, and a private CA over TLS.
final class OriginAccessTests: XCTestCase {
    var origin: OriginServer!
    var sources: [CurlRangeSource] = []
    let data: [UInt8] = OriginServer.generatedBytes(seed: 5, offset: 0, count: 50_000)
    let files = TemporaryDirectory(prefix: "httpcachefs-access")

    override func setUpWithError() throws {
        origin = try OriginServer()
        origin.setFile("/f.bin", data: data)
    }

    override func tearDown() {
        sources.forEach { $0.shutdown() }
        sources = []
        origin?.stop()
        origin = nil
        files.remove()
    }

    private func fetch(_ url: String, _ tweak: (inout FetcherConfiguration) -> Void) -> RecordingSink {
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 10, maxRetries: 0)
        tweak(&c)
        let source = CurlRangeSource(configuration: c, logger: Logger(label: "origin-access-tests"))
        sources.append(source)
        let sink = RecordingSink()
        _ = source.start(FetchRequest(url: url, start: 0, end: 1000), sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.violations, [])
        return sink
    }

    private func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    func testUserAndPasswordGoAsBasicAuth() {
        let sink = fetch(origin.url("/f.bin")) {
            $0.access = OriginAccess(user: "alice", password: Secret("s3cret pw"), scope: CredentialScope(urls: [origin.url("/")]))
        }
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, Array(data[0..<1000]))
        XCTAssertEqual(origin.requests.last?.header("authorization"), basic("alice", "s3cret pw"))
    }

    func testCredentialsInTheURLWinOverTheUser() throws {
        let url = origin.url("/f.bin").replacingOccurrences(of: "http://", with: "http://bob:hunter2@")
        let sink = fetch(url) { $0.access = OriginAccess(user: "alice", password: Secret("s3cret"), scope: CredentialScope(urls: [url])) }
        XCTAssertNil(sink.result())
        XCTAssertEqual(origin.requests.last?.header("authorization"), basic("bob", "hunter2"))
    }

    func testANetrcEntryIsSentToItsHostOnly() throws {
        let netrc = files.appending("netrc")
        try "machine 127.0.0.1 login carol password from-netrc\n".write(toFile: netrc, atomically: true, encoding: .utf8)
        let sink = fetch(origin.url("/f.bin")) { $0.access.netrcFile = netrc }
        XCTAssertNil(sink.result())
        XCTAssertEqual(origin.requests.last?.header("authorization"), basic("carol", "from-netrc"))

        // The same origin under another name: the entry for 127.0.0.1 is not this host's.
        let other = fetch("http://other.test:\(origin.port)/f.bin") {
            $0.access.netrcFile = netrc
            $0.pinnedAddresses = ["other.test:\(origin.port):127.0.0.1"]
        }
        XCTAssertNil(other.result())
        XCTAssertEqual(origin.requests.count, 2)
        XCTAssertNil(origin.requests.last?.header("authorization"))
    }

    func testNoCredentialsAreSentUnlessConfigured() {
        XCTAssertNil(fetch(origin.url("/f.bin")) { _ in }.result())
        XCTAssertNil(origin.requests.last?.header("authorization"))
    }

    func testAPrivateCAVerifiesAnHTTPSOriginThatIsRefusedWithoutIt() throws {
        let front: TLSFront
        do { front = try TLSFront(origin: origin) } catch let e as TLSFront.Unavailable {
            throw XCTSkip("SKIPPED LOUDLY: no TLS origin for this test: \(e)")
        }
        defer { front.stop() }

        let refused = fetch(front.url("/f.bin")) { _ in }
        guard case let .network(_, message)? = refused.result() else {
            return XCTFail("an origin signed by an unknown CA must be refused, got \(String(describing: refused.finishes))")
        }
        XCTAssertTrue(message.lowercased().contains("certificate"), "the error names the cause: \(message)")
        XCTAssertEqual(origin.requests.count, 0, "no request went through an unverified connection")

        let trusted = fetch(front.url("/f.bin")) { $0.access.caCertificate = front.caCertificate }
        XCTAssertNil(trusted.result())
        XCTAssertEqual(trusted.body, Array(data[0..<1000]))
        XCTAssertEqual(origin.requests.last?.range, "bytes=0-999")
        XCTAssertEqual(origin.requests.last?.header("host"), "127.0.0.1:\(front.port)")
    }
}
