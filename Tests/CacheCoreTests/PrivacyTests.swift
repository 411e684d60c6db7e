import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// The cache is its user's alone, and URL passwords are never shown.
final class PrivacyTests: XCTestCase {
    private var dir: String!

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-private-\(UUID().uuidString)/cache"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent)
    }

    private func mode(_ path: String) -> mode_t {
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0, path)
        return st.st_mode & 0o777
    }

    func testTheCacheDirectoryIsOwnerOnlyAndSoIsEveryFileInIt() async throws {
        let old = umask(0o022)
        defer { umask(old) }
        let url = "http://origin.test/private.mp4"
        let source = ScriptedSource()
        source.set(url, .init(bytes: randomBytes(10_000, seed: 5), etag: "\"p\""))
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, sliceSize: 1 << 20),
                                    source: source)
        let info = try await cache.open(url: url)
        _ = try await cache.makeReader(for: info).read(offset: 0, length: 10_000)
        cache.core.writes.waitIdle()
        XCTAssertEqual(mode(dir + "/index.sqlite-wal"), 0o600)
        cache.shutdown()

        XCTAssertEqual(mode(dir), 0o700)
        XCTAssertEqual(mode(dir + "/data"), 0o700)
        XCTAssertEqual(mode(dir + "/index.sqlite"), 0o600)
        XCTAssertEqual(mode(dir + "/lock"), 0o600)
        let files = try FileManager.default.subpathsOfDirectory(atPath: dir + "/data").filter { $0.hasSuffix(".data") }
        XCTAssertEqual(files.count, 1)
        for f in files {
            XCTAssertEqual(mode(dir + "/data/" + f), 0o600, f)
            XCTAssertEqual(mode(dir + "/data/" + (f as NSString).deletingLastPathComponent), 0o700, f)
        }
    }

    /// A cache made by an older version (0755) is made private at its next start.
    func testAnOlderCacheDirectoryIsMadePrivate() throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        XCTAssertEqual(mode(dir), 0o755)
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0), source: ScriptedSource())
        cache.shutdown()
        XCTAssertEqual(mode(dir), 0o700)
    }

    func testAURLPasswordIsMaskedForDisplay() {
        XCTAssertEqual(DisplayURL.redacted("https://alice:s3cret@media.example/a.mp4"), "https://alice:***@media.example/a.mp4")
        XCTAssertEqual(DisplayURL.redacted("http://alice:p%40ss:w@[::1]:8080/x?y=1"), "http://alice:***@[::1]:8080/x?y=1")
        XCTAssertEqual(DisplayURL.redacted("http://alice@media.example/a.mp4"), "http://alice@media.example/a.mp4")
        XCTAssertEqual(DisplayURL.redacted("http://media.example/a:b@c.mp4"), "http://media.example/a:b@c.mp4")
        XCTAssertEqual(DisplayURL.redacted("http://media.example/x"), "http://media.example/x")
        XCTAssertEqual(DisplayURL.redacted("http://:pw@h/"), "http://:***@h/")
        XCTAssertEqual(DisplayURL.redactingPasswords(in: "fetch failed url=\"http://a:b@h/1 2\" final=https://c:d@k/"),
                       "fetch failed url=\"http://a:***@h/1 2\" final=https://c:***@k/")
        XCTAssertEqual(DisplayURL.redactingPasswords(in: "no url here: a:b@c"), "no url here: a:b@c")
    }
}
