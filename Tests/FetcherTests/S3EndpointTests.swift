@testable import CoreTypes
import Foundation
import XCTest

/// How s3:// URLs map to HTTP URLs at an endpoint, and which requests are signed (only the
/// endpoint's, so the keys go nowhere else).
final class S3EndpointTests: XCTestCase {
    private let keys = SigV4.Credentials(accessKeyID: "AKID", secretAccessKey: "SECRET")

    func testS3URLsMapToTheEndpointsURLs() throws {
        let local = try S3Endpoint.parse(endpoint: "http://127.0.0.1:9000/", region: "us-east-1", credentials: keys)
        let aws = S3Endpoint.aws(region: "eu-west-1", credentials: keys)
        let table: [(S3Endpoint, String, String)] = [
            (local, "s3://media/films/", "http://127.0.0.1:9000/media/films/"),
            (local, "s3://media", "http://127.0.0.1:9000/media/"),
            (local, "s3://media/a film+1.mp4", "http://127.0.0.1:9000/media/a%20film%2B1.mp4"),
            (aws, "s3://media/films/a.mp4", "https://media.s3.eu-west-1.amazonaws.com/films/a.mp4"),
            // Dots: AWS's wildcard certificate covers one label only.
            (aws, "s3://my.media/a.mp4", "https://s3.eu-west-1.amazonaws.com/my.media/a.mp4"),
        ]
        for (endpoint, s3, http) in table {
            let (bucket, key) = try XCTUnwrap(try S3Endpoint.split(s3))
            XCTAssertEqual(endpoint.url(bucket: bucket, key: key), http, s3)
        }
        XCTAssertEqual(local.listingBase(bucket: "media"), "http://127.0.0.1:9000/media")
        XCTAssertEqual(try S3Endpoint.parse(endpoint: "HTTP://Minio.Local:80", region: "us-east-1", credentials: nil).root(bucket: "media"),
                       "http://minio.local/media/", "spelled as the tree spells URLs: lowercase, no default port")
        XCTAssertEqual(try S3Endpoint.parse(endpoint: "https://[::1]:443", region: "us-east-1", credentials: nil).authority, "[::1]")
        XCTAssertEqual(aws.listingBase(bucket: "media"), "https://media.s3.eu-west-1.amazonaws.com/")
        XCTAssertNil(try S3Endpoint.split("https://host/x"))
        XCTAssertThrowsError(try S3Endpoint.split("s3://a/x"))
        XCTAssertThrowsError(try S3Endpoint.split("s3://bad bucket/x"))
        XCTAssertThrowsError(try S3Endpoint.split("s3://media/a\u{1}b"))
        for bad in ["127.0.0.1:9000", "ftp://host", "http://host/path", "http://user:pw@host", "http://"] {
            XCTAssertThrowsError(try S3Endpoint.parse(endpoint: bad, region: "us-east-1", credentials: nil), bad)
        }
    }

    func testOnlyTheEndpointsRequestsAreSigned() throws {
        let local = try S3Endpoint.parse(endpoint: "http://127.0.0.1:9000", region: "us-east-1", credentials: keys)
        let aws = S3Endpoint.aws(region: "us-east-1", credentials: keys)
        let table: [(S3Endpoint, String, Bool)] = [
            (local, "http://127.0.0.1:9000/media/a.mp4", true),
            (local, "HTTP://127.0.0.1:9000/media?list-type=2", true),
            (local, "http://127.0.0.1:9001/media/a.mp4", false),
            (local, "https://127.0.0.1:9000/media/a.mp4", false),
            (local, "http://127.0.0.1/media/a.mp4", false),
            (local, "http://evil@127.0.0.1:9000/media/a.mp4", false),
            (aws, "https://media.s3.us-east-1.amazonaws.com/a.mp4", true),
            (aws, "https://s3.us-east-1.amazonaws.com/my.media/a.mp4", true),
            (aws, "https://a.b.s3.us-east-1.amazonaws.com/a.mp4", false),
            (aws, "https://evils3.us-east-1.amazonaws.com/a.mp4", false),
            (aws, "https://s3.us-east-1.amazonaws.com.evil.example/a.mp4", false),
            (aws, "http://media.s3.us-east-1.amazonaws.com/a.mp4", false),
        ]
        for (endpoint, url, signs) in table {
            XCTAssertEqual(endpoint.signs(url), signs, url)
            XCTAssertEqual(!endpoint.signedHeaders(method: "GET", url: url, date: Date()).isEmpty, signs, url)
        }
        var anonymous = local
        anonymous.credentials = nil
        XCTAssertEqual(anonymous.signedHeaders(method: "GET", url: "http://127.0.0.1:9000/media/a.mp4", date: Date()), [],
                       "no keys: unsigned (a public bucket)")
    }

    func testISO8601DatesAsS3ListsThem() {
        XCTAssertEqual(HTTPDate.parseISO8601("2009-10-12T17:50:30.000Z"), Date(timeIntervalSince1970: 1_255_369_830))
        XCTAssertEqual(HTTPDate.parseISO8601("2009-10-12T17:50:30Z"), Date(timeIntervalSince1970: 1_255_369_830))
        for bad in ["", "2009-10-12", "2009-13-12T17:50:30Z", "2009-02-30T17:50:30Z", "2009-10-12T17:50:30+01:00", "2009-10-12T17:50:30.Z"] {
            XCTAssertNil(HTTPDate.parseISO8601(bad), bad)
        }
    }
}

/// S3's error documents as one line: code and message, bounded and cleaned.
final class S3ErrorDocumentTests: XCTestCase {
    func testCodeAndMessage() {
        let table: [(String, S3ErrorDocument?)] = [
            ("""
             <?xml version="1.0" encoding="UTF-8"?>
             <Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message><RequestId>1</RequestId></Error>
             """, S3ErrorDocument(code: "SignatureDoesNotMatch", message: "The request signature we calculated does not match")),
            ("<Error><Code>NoSuchKey</Code><Message>a &lt;b&gt; &amp; c\n\td</Message></Error>", S3ErrorDocument(code: "NoSuchKey", message: "a <b> & c  d")),
            ("<Error><Code>AccessDenied</Code></Error>", S3ErrorDocument(code: "AccessDenied", message: nil)),
            ("<Error><Message>no code</Message></Error>", nil),
            ("<html>503 Service Unavailable</html>", nil),
            ("", nil),
        ]
        for (text, expected) in table { XCTAssertEqual(S3ErrorDocument.parse(Array(text.utf8)), expected, text) }
        let long = S3ErrorDocument.parse(Array("<Error><Code>X</Code><Message>\(String(repeating: "m", count: 5000))</Message></Error>".utf8))
        XCTAssertEqual(long?.message?.count, S3ErrorDocument.maxText + 1)
        XCTAssertEqual(S3ErrorDocument(code: "NoSuchBucket", message: "gone").description, "NoSuchBucket: gone")
    }
}

/// `~/.aws/credentials` and `~/.aws/config` as the AWS CLI reads them.
final class AWSSharedFilesTests: XCTestCase {
    let credentials = """
        # keys
        [default]
        aws_access_key_id = AKIDDEFAULT
        aws_secret_access_key = secret/default

        [work]
        aws_access_key_id=AKIDWORK
        aws_secret_access_key=secret/work
        aws_session_token = tok
        """
    let config = """
        [default]
        region = eu-west-1
        ; a comment
        [profile work]
        region = us-west-2
        endpoint_url = http://127.0.0.1:9000
        [profile onlyconfig]
        aws_access_key_id = AKIDCONF
        aws_secret_access_key = secret/conf
        """

    func testProfiles() {
        XCTAssertEqual(AWSSharedFiles.profile("default", credentials: credentials, config: config),
                       .init(accessKeyID: "AKIDDEFAULT", secretAccessKey: "secret/default", sessionToken: nil, region: "eu-west-1", endpointURL: nil))
        XCTAssertEqual(AWSSharedFiles.profile("work", credentials: credentials, config: config),
                       .init(accessKeyID: "AKIDWORK", secretAccessKey: "secret/work", sessionToken: "tok", region: "us-west-2",
                             endpointURL: "http://127.0.0.1:9000"))
        XCTAssertEqual(AWSSharedFiles.profile("onlyconfig", credentials: credentials, config: config).accessKeyID, "AKIDCONF")
        XCTAssertEqual(AWSSharedFiles.profile("none", credentials: credentials, config: config),
                       .init(accessKeyID: nil, secretAccessKey: nil, sessionToken: nil, region: nil, endpointURL: nil))
        XCTAssertEqual(AWSSharedFiles.profile("default", credentials: nil, config: nil).accessKeyID, nil)
    }
}

/// A profile's other sources of keys: `credential_process` is read (its JSON output), SSO and
/// roles are named as unsupported (the mount says so, with the AWS CLI's way around it).
final class AWSProfileSourcesTests: XCTestCase {
    func testACredentialProcessAndTheSourcesHttpcachefsDoesNotReadAreTold() {
        let config = """
            [profile tool]
            credential_process = /usr/local/bin/creds --account 1
            [profile sso]
            sso_session = work
            sso_account_id = 123456789012
            [profile role]
            role_arn = arn:aws:iam::123456789012:role/reader
            source_profile = default
            """
        XCTAssertEqual(AWSSharedFiles.profile("tool", credentials: nil, config: config).credentialProcess, "/usr/local/bin/creds --account 1")
        XCTAssertNil(AWSSharedFiles.profile("tool", credentials: nil, config: config).unsupportedSource)
        XCTAssertEqual(AWSSharedFiles.profile("sso", credentials: nil, config: config).unsupportedSource, "AWS SSO (IAM Identity Center: sso_session / sso_start_url)")
        XCTAssertEqual(AWSSharedFiles.profile("role", credentials: nil, config: config).unsupportedSource, "an assumed role (role_arn)")
    }

    func testACredentialProcessOutputGivesKeysAndTheirExpiration() throws {
        let output = #"{"Version": 1, "AccessKeyId": "ASIAX", "SecretAccessKey": "s/k", "SessionToken": "tok", "Expiration": "2026-11-29T10:00:00+00:00"}"#
        let (keys, expiration) = try AWSSharedFiles.processCredentials(Array(output.utf8)).get()
        XCTAssertEqual(keys, SigV4.Credentials(accessKeyID: "ASIAX", secretAccessKey: "s/k", sessionToken: "tok"))
        XCTAssertEqual(expiration, HTTPDate.parseISO8601("2026-11-29T10:00:00Z"))
        let noSecret = AWSSharedFiles.processCredentials(Array(#"{"Version": 1, "AccessKeyId": "ASIAX"}"#.utf8))
        XCTAssertEqual(noSecret.failure, AWSSharedFiles.ProcessOutputError("its output lacks AccessKeyId or SecretAccessKey"))
        let notJSON = AWSSharedFiles.processCredentials(Array("AccessKeyId=ASIAX secret".utf8))
        XCTAssertEqual(notJSON.failure?.description, "its output is no JSON object", "the message never holds the output")
    }
}

private extension Result {
    var failure: Failure? { if case let .failure(f) = self { return f } else { return nil } }
}
