import XCTest
@testable import CacheCore

/// Bytes fetched with credentials are keyed by them: another request, with none or with other
/// ones, is another entry. The key never holds the credentials themselves.
final class CredentialKeyTests: XCTestCase {
    private let secret = [UInt8](repeating: 7, count: 32)

    private func key(_ url: String, _ tweak: (inout KeyRules) -> Void = { _ in }) throws -> String {
        var rules = KeyRules()
        rules.credentialKey = secret
        tweak(&rules)
        return try rules.key(for: url).string
    }

    func testAURLsUserInfoIsPartOfItsKeyButNeverInIt() throws {
        let plain = try key("http://example.com/a.mp4")
        let alice = try key("http://alice:secret1@example.com/a.mp4")
        XCTAssertEqual(plain, "http://example.com/a.mp4", "without credentials, as before")
        XCTAssertNotEqual(alice, plain)
        XCTAssertEqual(alice, try key("http://alice:secret1@EXAMPLE.com:80/a.mp4#x"), "the same credentials, the same entry")
        XCTAssertNotEqual(alice, try key("http://alice:wrong@example.com/a.mp4"))
        XCTAssertNotEqual(alice, try key("http://bob:secret1@example.com/a.mp4"))
        XCTAssertFalse(alice.contains("secret1") || alice.contains("alice"), alice)
        XCTAssertTrue(alice.hasPrefix("http://example.com/a.mp4#cred-"))
    }

    func testTheHashIsKeyedWithTheCachesSecret() throws {
        let a = try key("http://alice:pw@example.com/a.mp4")
        let b = try key("http://alice:pw@example.com/a.mp4") { $0.credentialKey = [UInt8](repeating: 8, count: 32) }
        XCTAssertNotEqual(a, b)
    }

    func testDaemonWideCredentialsKeyEveryURL() throws {
        let plain = try key("http://example.com/a.mp4")
        let withUser = try key("http://example.com/a.mp4") { $0.sharedLogin = "user carol:pw" }
        let withCookie = try key("http://example.com/a.mp4") { $0.sharedCredentials = ["header Cookie: s=1"] }
        XCTAssertNotEqual(withUser, plain)
        XCTAssertNotEqual(withCookie, plain)
        XCTAssertNotEqual(withUser, withCookie)
        // A URL's own user-info replaces --user, as it does in the request.
        XCTAssertEqual(try key("http://dave:x@example.com/a.mp4") { $0.sharedLogin = "user carol:pw" },
                       try key("http://dave:x@example.com/a.mp4"))
    }

    func testANetrcLoginKeysOnlyTheHostsItHasAnEntryFor() throws {
        let netrc: (inout KeyRules) -> Void = { $0.netrcFile = "/home/u/.netrc"; $0.netrcHosts = ["media.example"] }
        XCTAssertEqual(try key("http://example.com/a.mp4", netrc), "http://example.com/a.mp4")
        XCTAssertNotEqual(try key("http://media.example/a.mp4", netrc), "http://media.example/a.mp4")
        XCTAssertNotEqual(try key("http://example.com/a.mp4") { $0.netrcFile = "/n"; $0.netrcHosts = ["*"] },
                          "http://example.com/a.mp4", "a default entry logs in everywhere")
    }

    func testTheSecretIsMadeOncePrivateAndKept() throws {
        let dir = NSTemporaryDirectory() + "httpcachefs-credkey-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = CredentialKey.load(directory: dir)
        XCTAssertEqual(first.count, 32)
        XCTAssertEqual(CredentialKey.load(directory: dir), first)
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/credential.key")[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
    }
}
