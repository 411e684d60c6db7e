@testable import CoreTypes
import Foundation
import XCTest

/// AWS Signature Version 4 against AWS's published S3 examples ("Signature Calculations for the
/// Authorization Header", key AKIAIOSFODNN7EXAMPLE, 24 May 2013, bucket examplebucket), and the
/// canonical forms the fetcher's signed requests depend on.
final class SigV4Tests: XCTestCase {
    private let keys = SigV4.Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    private let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// 2013-05-24T00:00:00Z.
    private let exampleDate = Date(timeIntervalSince1970: 1_369_353_600)

    private func authorization(_ lines: [String]?) -> String? {
        lines?.first { $0.hasPrefix("Authorization: ") }.map { String($0.dropFirst("Authorization: ".count)) }
    }

    func testAWSExamples() {
        // (url, extra signed headers, expected signature)
        let table: [(String, [(String, String)], String, String)] = [
            ("https://examplebucket.s3.amazonaws.com/test.txt", [("Range", "bytes=0-9")],
             "host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
            ("https://examplebucket.s3.amazonaws.com/?lifecycle", [],
             "host;x-amz-content-sha256;x-amz-date", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
            ("https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", [],
             "host;x-amz-content-sha256;x-amz-date", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
        ]
        for (url, extra, signedNames, signature) in table {
            let lines = SigV4.headers(method: "GET", url: url, signedHeaders: extra, payloadHash: emptyHash,
                                      credentials: keys, region: "us-east-1", date: exampleDate)
            XCTAssertEqual(authorization(lines),
                           "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=\(signedNames), Signature=\(signature)", url)
            XCTAssertEqual(lines?.first, "x-amz-date: 20130524T000000Z")
            XCTAssertTrue(lines?.contains("x-amz-content-sha256: \(emptyHash)") ?? false)
        }
    }

    func testUnsignedPayloadAndSessionTokenAreSignedAndSent() throws {
        var temporary = keys
        temporary.sessionToken = "token/with+signs="
        let lines = try XCTUnwrap(SigV4.headers(method: "GET", url: "http://127.0.0.1:9000/bucket/films/a.mp4",
                                                credentials: temporary, region: "eu-west-1", date: exampleDate))
        XCTAssertTrue(lines.contains("x-amz-content-sha256: UNSIGNED-PAYLOAD"))
        XCTAssertTrue(lines.contains("x-amz-security-token: token/with+signs="))
        let auth = try XCTUnwrap(authorization(lines))
        XCTAssertTrue(auth.contains("/20130524/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "), auth)
        // The token changes the signature; the secret never appears.
        let plain = authorization(SigV4.headers(method: "GET", url: "http://127.0.0.1:9000/bucket/films/a.mp4",
                                                credentials: keys, region: "eu-west-1", date: exampleDate))
        XCTAssertNotEqual(plain, auth)
        XCTAssertFalse(lines.joined().contains(keys.secretAccessKey))
        XCTAssertFalse("\(keys)".contains(keys.secretAccessKey))
    }

    func testCanonicalForms() {
        XCTAssertEqual(SigV4.canonicalURI(""), "/")
        XCTAssertEqual(SigV4.canonicalURI("/bucket/a%20b/c+d/%E2%82%AC~x"), "/bucket/a%20b/c%2Bd/%E2%82%AC~x")
        XCTAssertEqual(SigV4.canonicalURI("/bucket/100%/x"), "/bucket/100%25/x")
        XCTAssertEqual(SigV4.canonicalQuery("prefix=films/&list-type=2&delimiter=%2F&continuation-token=a+b%3D"),
                       "continuation-token=a%2Bb%3D&delimiter=%2F&list-type=2&prefix=films%2F")
        XCTAssertEqual(SigV4.canonicalQuery("lifecycle"), "lifecycle=")
        XCTAssertEqual(SigV4.URLParts("http://127.0.0.1:80/b/k")?.host, "127.0.0.1")
        XCTAssertEqual(SigV4.URLParts("HTTP://Example.com:9000/b/k?x=1")?.host, "example.com:9000")
        XCTAssertEqual(SigV4.URLParts("https://[::1]:443/b")?.host, "[::1]")
        XCTAssertEqual(SigV4.URLParts("https://[::1]/b")?.host, "[::1]")
        XCTAssertNil(SigV4.URLParts("s3://bucket/key"))
        XCTAssertEqual(SigV4.timestamp(Date(timeIntervalSince1970: 1_764_398_096)), "20251129T063456Z")
        XCTAssertEqual(SigV4.trimmed("  bytes=0-9   x "), "bytes=0-9 x")
    }
}
