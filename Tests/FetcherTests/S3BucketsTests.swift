import CacheCore
import Foundation
import XCTest

/// The buckets of one process (`S3Buckets`): each signed with the keys it was named with, one set
/// of keys per bucket, and its entries keyed by those keys' identity. Pure: no server.
final class S3BucketsTests: XCTestCase {
    let keysA = SigV4.Credentials(accessKeyID: "AKIDA", secretAccessKey: "secret-a")
    let keysB = SigV4.Credentials(accessKeyID: "AKIDB", secretAccessKey: "secret-b")

    private func endpoint(_ keys: SigV4.Credentials?, region: String = "eu-west-1") throws -> S3Endpoint {
        try S3Endpoint.parse(endpoint: "http://127.0.0.1:9000", region: region, credentials: keys)
    }

    func testABucketNamedAgainWithOtherKeysOrRegionIsRefusedAndWithTheSameOnesIsNoChange() throws {
        let buckets = S3Buckets()
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)))
        XCTAssertNoThrow(try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA))))
        XCTAssertThrowsError(try buckets.register(.init(bucket: "media", endpoint: endpoint(keysB)))) {
            XCTAssertEqual($0 as? S3Buckets.Conflict, S3Buckets.Conflict(root: "http://127.0.0.1:9000/media/"))
        }
        XCTAssertThrowsError(try buckets.register(.init(bucket: "media", endpoint: endpoint(nil))), "unsigned beside signed: refused too")
        XCTAssertThrowsError(try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA, region: "us-east-1"))))
        XCTAssertNoThrow(try buckets.register(.init(bucket: "other", endpoint: endpoint(keysB))), "another bucket, other keys")
        XCTAssertEqual(buckets.bucket(of: "http://127.0.0.1:9000/other/x.mp4")?.endpoint.credentials, keysB)
        XCTAssertEqual(buckets.bucket(of: "http://127.0.0.1:9000/media?list-type=2&prefix=a")?.endpoint.credentials, keysA, "its listing")
        XCTAssertNil(buckets.bucket(of: "http://127.0.0.1:9000/mediaX/x.mp4"))
        XCTAssertNil(buckets.bucket(of: "http://127.0.0.1:9001/media/x.mp4"), "another port is another endpoint")
    }

    func testOnlyARegisteredBucketsRequestsAreSignedAndWithItsKeys() throws {
        let buckets = S3Buckets()
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)))
        try buckets.register(.init(bucket: "public", endpoint: endpoint(nil)))
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        let signed = buckets.signedHeaders(method: "GET", url: "http://127.0.0.1:9000/media/a.mp4", date: date)
        XCTAssertTrue(signed.contains { $0.hasPrefix("Authorization: AWS4-HMAC-SHA256 Credential=AKIDA/") }, "\(signed)")
        XCTAssertEqual(buckets.signedHeaders(method: "GET", url: "http://127.0.0.1:9000/public/a.mp4", date: date), [])
        XCTAssertEqual(buckets.signedHeaders(method: "GET", url: "http://127.0.0.1:9000/unnamed/a.mp4", date: date), [])
    }

    /// `RequestTimeTooSkewed`: later signatures carry the server's time, learnt once.
    func testTheServersTimeIsLearntOnceAndSignaturesCarryIt() throws {
        let buckets = S3Buckets()
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        XCTAssertTrue(buckets.learnServerTime(now.addingTimeInterval(3600), now: now))
        XCTAssertFalse(buckets.learnServerTime(now.addingTimeInterval(3610), now: now.addingTimeInterval(5)), "the same skew: said once")
        let headers = buckets.signedHeaders(method: "GET", url: "http://127.0.0.1:9000/media/a.mp4", date: now)
        XCTAssertTrue(headers.contains("x-amz-date: \(SigV4.timestamp(now.addingTimeInterval(3600)))"), "\(headers)")
    }

    /// Endpoint, bucket and key are in the URL; the keys' identity joins them in the cache key,
    /// so two accounts never share bytes and an unsigned (public) bucket's entries are plain.
    func testTheCacheKeyOfASignedBucketsObjectCarriesItsKeysIdentity() throws {
        let buckets = S3Buckets()
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)))
        try buckets.register(.init(bucket: "public", endpoint: endpoint(nil)))
        var rules = KeyRules()
        rules.credentialKey = Array(repeating: 7, count: 32)
        rules.s3Buckets = buckets
        let signed = try rules.key(for: "http://127.0.0.1:9000/media/a.mp4").string
        XCTAssertTrue(signed.hasPrefix("http://127.0.0.1:9000/media/a.mp4#cred-"), signed)
        XCTAssertFalse(signed.contains("AKIDA") || signed.contains("secret-a"), "hashed, never the keys themselves")
        XCTAssertEqual(try rules.key(for: "http://127.0.0.1:9000/public/a.mp4").string, "http://127.0.0.1:9000/public/a.mp4")

        let other = S3Buckets()
        try other.register(.init(bucket: "media", endpoint: endpoint(keysB)))
        var rulesB = rules
        rulesB.s3Buckets = other
        XCTAssertNotEqual(try rulesB.key(for: "http://127.0.0.1:9000/media/a.mp4"), try rules.key(for: "http://127.0.0.1:9000/media/a.mp4"),
                          "another account's bytes are another entry")
        // Temporary keys from one source (credential_process) keep one identity across renewals.
        var renewed = try endpoint(SigV4.Credentials(accessKeyID: "ASIA1", secretAccessKey: "s1", sessionToken: "t1"))
        renewed.credentialSource = "credential_process /usr/bin/creds"
        var later = renewed
        later.credentials = SigV4.Credentials(accessKeyID: "ASIA2", secretAccessKey: "s2", sessionToken: "t2")
        XCTAssertEqual(renewed.credentialIdentity, later.credentialIdentity)
    }

    /// A daemon's bucket lasts as long as the mounts that named it: when the last of them ends,
    /// the bucket and its keys leave (nothing is signed with them), a later mount may name it
    /// with other keys, and the generation a memo of keys checks has moved.
    func testABucketLeavesWithTheLastMountThatNamedItAndMayThenBeNamedWithOtherKeys() throws {
        let buckets = S3Buckets()
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)), holder: "/mnt/a")
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)), holder: "/mnt/b")
        try buckets.register(.init(bucket: "other", endpoint: endpoint(keysB)), holder: "/mnt/c")
        let before = buckets.generation
        XCTAssertEqual(buckets.release(holder: "/mnt/a"), [], "/mnt/b still names it")
        XCTAssertEqual(buckets.generation, before, "nothing changed")
        XCTAssertEqual(buckets.bucket(of: "http://127.0.0.1:9000/media/a.mp4")?.endpoint.credentials, keysA)
        XCTAssertThrowsError(try buckets.register(.init(bucket: "media", endpoint: endpoint(keysB)), holder: "/mnt/d"))

        XCTAssertEqual(buckets.release(holder: "/mnt/b"), ["http://127.0.0.1:9000/media/"])
        XCTAssertNotEqual(buckets.generation, before)
        XCTAssertNil(buckets.bucket(of: "http://127.0.0.1:9000/media/a.mp4"))
        XCTAssertEqual(buckets.signedHeaders(method: "GET", url: "http://127.0.0.1:9000/media/a.mp4", date: Date()), [], "its keys are gone")
        XCTAssertNotNil(buckets.bucket(of: "http://127.0.0.1:9000/other/a.mp4"), "another mount's bucket stays")
        XCTAssertNoThrow(try buckets.register(.init(bucket: "media", endpoint: endpoint(keysB)), holder: "/mnt/d"), "named anew with other keys")
        XCTAssertEqual(buckets.bucket(of: "http://127.0.0.1:9000/media/a.mp4")?.endpoint.credentials, keysB)

        try buckets.register(.init(bucket: "cmd", endpoint: endpoint(keysA)))
        XCTAssertEqual(buckets.release(holder: "/mnt/c"), ["http://127.0.0.1:9000/other/"])
        XCTAssertNotNil(buckets.bucket(of: "http://127.0.0.1:9000/cmd/a.mp4"), "a command's bucket lasts the process")
    }

    /// The memo of cache keys follows the buckets: after a bucket left and came back with other
    /// keys, a URL's key is the new keys' one, never the memorised old one.
    func testAMemoOfKeysUnderAnOldGenerationIsNotServed() throws {
        let buckets = S3Buckets()
        var rules = KeyRules()
        rules.credentialKey = Array(repeating: 7, count: 32)
        rules.s3Buckets = buckets
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)), holder: "/mnt/a")
        let memo = RecentResults<CacheKey>()
        let url = "http://127.0.0.1:9000/media/a.mp4"
        let first = try memo.value(for: url, generation: buckets.generation) { try rules.key(for: $0) }
        buckets.release(holder: "/mnt/a")
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysB)), holder: "/mnt/b")
        let second = try memo.value(for: url, generation: buckets.generation) { try rules.key(for: $0) }
        XCTAssertNotEqual(first, second)
        XCTAssertEqual(second, try rules.key(for: url))
    }

    /// `cache info` / `cache rm` from a process without the keys: an entry is found by its URL
    /// whatever credentials read it, and names them by their hash only.
    func testAnEntryIsFoundByItsURLAcrossCredentials() throws {
        let buckets = S3Buckets()
        try buckets.register(.init(bucket: "media", endpoint: endpoint(keysA)))
        var rules = KeyRules()
        rules.credentialKey = Array(repeating: 7, count: 32)
        rules.s3Buckets = buckets
        let url = "http://127.0.0.1:9000/media/a%20film.mp4"
        let signed = try rules.key(for: url)
        let plain = try KeyRules().plainKey(for: url)
        XCTAssertEqual(try rules.plainKey(for: url), plain, "no credential in a plain key")
        XCTAssertTrue(signed.names(plain))
        XCTAssertTrue(plain.names(plain))
        XCTAssertFalse(try rules.key(for: "http://127.0.0.1:9000/media/a%20film.mp4.part").names(plain), "another URL with the same start")
        XCTAssertEqual(signed.credentialHash?.count, 32)
        XCTAssertNil(plain.credentialHash)
    }
}
