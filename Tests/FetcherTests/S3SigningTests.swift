@testable import CoreTypes
import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// The fetcher's S3 signing, against loopback origins that record every header: each attempt to
/// the endpoint carries a signature that matches the request as sent (host with its port, path,
/// time of that attempt), a retry is signed anew, and a redirect to another origin gets none.
final class S3SigningTests: XCTestCase {
    var endpoint: OriginServer!
    var elsewhere: OriginServer!
    var sources: [CurlRangeSource] = []
    let data: [UInt8] = OriginServer.generatedBytes(seed: 8, offset: 0, count: 50_000)
    let keys = SigV4.Credentials(accessKeyID: "AKIDTEST", secretAccessKey: "secret/key+1", sessionToken: "tok")

    override func setUpWithError() throws {
        endpoint = try OriginServer()
        elsewhere = try OriginServer()
        endpoint.setFile("/media/films/a%20b.bin", data: data)
        elsewhere.setFile("/f.bin", data: data)
    }

    override func tearDown() {
        sources.forEach { $0.shutdown() }
        endpoint?.stop()
        elsewhere?.stop()
    }

    /// `buckets`: signing by bucket (as the executable does) rather than by endpoint.
    private func fetch(_ url: String, retries: Int = 0, buckets: S3Buckets? = nil, ifRange: String? = nil) throws -> RecordingSink {
        var c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", extraHeaders: [], connectTimeout: 5, lowSpeedTime: 10, maxRetries: retries)
        c.retryBaseDelay = 0
        if let buckets { c.s3Buckets = buckets } else {
            c.s3 = try S3Endpoint.parse(endpoint: endpoint.url(""), region: "eu-west-1", credentials: keys)
        }
        let source = CurlRangeSource(configuration: c, logger: Logger(label: "s3-signing-tests"))
        sources.append(source)
        let sink = RecordingSink()
        _ = source.start(FetchRequest(url: url, start: 0, end: Int64(data.count), ifRange: ifRange), sink: sink)
        wait(for: [sink.finished], timeout: 30)
        return sink
    }

    /// The Authorization header `r` should carry, signed at its own `x-amz-date`.
    private func expectedAuthorization(_ r: RequestRecord) throws -> String {
        let stamp = try XCTUnwrap(r.header("x-amz-date"))
        var parts = DateComponents()
        parts.year = Int(stamp.prefix(4)); parts.month = Int(stamp.dropFirst(4).prefix(2)); parts.day = Int(stamp.dropFirst(6).prefix(2))
        parts.hour = Int(stamp.dropFirst(9).prefix(2)); parts.minute = Int(stamp.dropFirst(11).prefix(2)); parts.second = Int(stamp.dropFirst(13).prefix(2))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let date = try XCTUnwrap(calendar.date(from: parts))
        let lines = try XCTUnwrap(SigV4.headers(method: r.method, url: endpoint.url(r.path), credentials: keys, region: "eu-west-1", date: date))
        return String(try XCTUnwrap(lines.first { $0.hasPrefix("Authorization: ") }).dropFirst("Authorization: ".count))
    }

    func testEveryAttemptToTheEndpointIsSignedForWhatItSendsAndRetriesAnew() throws {
        endpoint.setFaults("/media/films/a%20b.bin", Faults(dropAfterBytes: 20_000, dropCount: 1))
        let sink = try fetch(endpoint.url("/media/films/a%20b.bin"), retries: 2)
        XCTAssertTrue(sink.body == data, "got \(sink.body.count) bytes, \(sink.finishes)")
        let requests = endpoint.requests
        XCTAssertEqual(requests.count, 2, "the first answer was cut, the second resumed")
        for r in requests {
            XCTAssertEqual(r.header("x-amz-content-sha256"), "UNSIGNED-PAYLOAD")
            XCTAssertEqual(r.header("x-amz-security-token"), "tok")
            XCTAssertEqual(r.header("authorization"), try expectedAuthorization(r), "signed for this request: \(r.path) \(r.range ?? "")")
        }
        XCTAssertNotEqual(requests[0].range, requests[1].range, "the resume asked for the rest, and is signed for it")
    }

    func testARedirectToAnotherOriginCarriesNoSignature() throws {
        endpoint.setFaults("/media/go", Faults(redirectTo: elsewhere.url("/f.bin")))
        let sink = try fetch(endpoint.url("/media/go"))
        XCTAssertTrue(sink.body == data, "got \(sink.body.count) bytes, \(sink.finishes)")
        XCTAssertNotNil(endpoint.requests.first?.header("authorization"))
        XCTAssertFalse(elsewhere.requests.isEmpty)
        for r in elsewhere.requests {
            for name in ["authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"] {
                XCTAssertNil(r.header(name), "\(name) went to another origin")
            }
        }
    }

    func testAnS3ErrorDocumentIsReadAndNoted() throws {
        endpoint.setResponse("/media/denied", status: 403, headers: [("Content-Type", "application/xml")],
                             body: Array("<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>".utf8))
        let sink = try fetch(endpoint.url("/media/denied"))
        XCTAssertEqual(sink.body, [])
        XCTAssertEqual(S3ErrorLog.last(url: endpoint.url("/media/denied")), S3ErrorDocument(code: "AccessDenied", message: "Access Denied"))
    }

    /// One version per read: the validator of the version the open saw goes as `If-Match`; a
    /// replaced object is answered 412 (none of its bytes), and asked again without the condition,
    /// so that the engine sees the new version's head and takes it as a change.
    func testARangeOfAReplacedObjectIsRefused412AndAskedAgainWithoutTheCondition() throws {
        let sink = try fetch(endpoint.url("/media/films/a%20b.bin"), ifRange: "\"the-old-version\"")
        XCTAssertTrue(sink.body == data, "got \(sink.body.count) bytes, \(sink.finishes)")
        let requests = endpoint.requests
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(requests.first?.header("if-match"), "\"the-old-version\"")
        XCTAssertNil(requests.first?.header("if-range"), "S3 does not read If-Range: the condition goes as If-Match")
        XCTAssertNil(requests.last?.header("if-match"), "after the 412, asked without the condition")
        XCTAssertNotEqual(sink.heads.first?.etag, "\"the-old-version\"", "the new version's head reaches the engine")
    }

    func testARangeOfTheVersionOpenedCarriesIfMatchAndIsServed() throws {
        let first = try fetch(endpoint.url("/media/films/a%20b.bin"))
        let etag = try XCTUnwrap(first.heads.first?.etag)
        let again = try fetch(endpoint.url("/media/films/a%20b.bin"), ifRange: etag)
        XCTAssertTrue(again.body == data)
        XCTAssertEqual(endpoint.requests.last?.header("if-match"), etag)
        XCTAssertEqual(endpoint.requests.count, 2, "no 412, no second request")
    }

    /// Keys go to the buckets named with them: a mount's keys sign its bucket's requests, and
    /// another bucket at the same endpoint, named by nobody with keys, gets none.
    func testEachBucketIsSignedWithItsOwnKeysAndAnUnnamedBucketWithNone() throws {
        endpoint.setFile("/other/f.bin", data: data)
        let buckets = S3Buckets()
        let at = try S3Endpoint.parse(endpoint: endpoint.url(""), region: "eu-west-1", credentials: keys)
        try buckets.register(S3Buckets.Bucket(bucket: "media", endpoint: at))
        _ = try fetch(endpoint.url("/media/films/a%20b.bin"), buckets: buckets)
        let signed = try XCTUnwrap(endpoint.requests.last)
        XCTAssertEqual(signed.header("authorization"), try expectedAuthorization(signed))
        _ = try fetch(endpoint.url("/other/f.bin"), buckets: buckets)
        let other = try XCTUnwrap(endpoint.requests.last)
        XCTAssertEqual(other.path, "/other/f.bin")
        XCTAssertNil(other.header("authorization"), "the keys went to a bucket they were not given for")
        XCTAssertNil(other.header("x-amz-security-token"))
    }

    /// `RequestTimeTooSkewed`: the signer learns the server's time from the refusal and the
    /// attempt is made again at once, signed with it; a server that still refuses ends the
    /// transfer (one retry, no loop).
    func testASkewedClockIsCorrectedFromTheServersTimeAndTheRequestSignedAgain() throws {
        let server = Date().addingTimeInterval(2 * 3600)
        let stamp = SigV4.timestamp(server)
        let iso = "\(stamp.prefix(4))-\(stamp.dropFirst(4).prefix(2))-\(stamp.dropFirst(6).prefix(2))T\(stamp.dropFirst(9).prefix(2)):\(stamp.dropFirst(11).prefix(2)):\(stamp.dropFirst(13).prefix(2))Z"
        endpoint.setResponse("/media/skewed", status: 403, headers: [("Content-Type", "application/xml")],
                             body: Array("<Error><Code>RequestTimeTooSkewed</Code><Message>The difference between the request time and the current time is too large.</Message><ServerTime>\(iso)</ServerTime></Error>".utf8))
        let buckets = S3Buckets()
        try buckets.register(S3Buckets.Bucket(bucket: "media", endpoint: try S3Endpoint.parse(endpoint: endpoint.url(""), region: "eu-west-1", credentials: keys)))
        _ = try fetch(endpoint.url("/media/skewed"), buckets: buckets)
        let requests = endpoint.requests
        XCTAssertEqual(requests.count, 2, "asked again once, not in a loop")
        let second = try XCTUnwrap(requests.last?.header("x-amz-date"))
        let signedAt = try XCTUnwrap(HTTPDate.parseISO8601("\(second.prefix(4))-\(second.dropFirst(4).prefix(2))-\(second.dropFirst(6).prefix(2))T\(second.dropFirst(9).prefix(2)):\(second.dropFirst(11).prefix(2)):\(second.dropFirst(13).prefix(2))Z"))
        XCTAssertLessThan(abs(signedAt.timeIntervalSince(server)), 600, "signed with the server's time: \(second) vs \(stamp)")
        XCTAssertGreaterThan(buckets.skew, 3600)
    }
}
