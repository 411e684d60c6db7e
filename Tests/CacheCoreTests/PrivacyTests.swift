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
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, sliceSize: 1 << 20, engineClock: .realTime),
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
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, engineClock: .realTime), source: ScriptedSource())
        cache.shutdown()
        XCTAssertEqual(mode(dir), 0o700)
    }

    /// Issue 46 item 1: a cache directory of another user is never opened for writing, root's
    /// commands included (its user controls every name in it): refused, nothing made in it.
    func testAnotherUsersCacheDirectoryIsRefused() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root, to hand a directory to another uid") }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        XCTAssertEqual(chown(dir, 65534, 65534), 0)
        XCTAssertThrowsError(try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, engineClock: .realTime), source: ScriptedSource())) {
            XCTAssertTrue("\($0)".contains("belongs to uid 65534"), "\($0)")
        }
        XCTAssertThrowsError(try CacheSnapshot(configuration: CacheConfiguration(directory: dir, engineClock: .realTime))) {
            XCTAssertTrue("\($0)".contains("belongs to uid 65534"), "\($0)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), [], "files were made in another user's directory")
    }

    /// A snapshot (`cache ls` while a daemon holds the cache) changes nothing: the index read
    /// only, no reserve set aside, no `credential.key` made; an index that is a symlink is not
    /// opened at all (SQLite would follow it, and write beside its target).
    func testASnapshotWritesNothingAndFollowsNoSymlink() throws {
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, engineClock: .realTime), source: ScriptedSource())
        cache.shutdown()
        for name in ["credential.key", "index.reserve"] { XCTAssertEqual(unlink(dir + "/" + name), 0, name) }
        let before = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        _ = try CacheSnapshot(configuration: CacheConfiguration(directory: dir, engineClock: .realTime))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir).sorted().filter { !$0.hasPrefix("index.sqlite-") },
                       before.filter { !$0.hasPrefix("index.sqlite-") }, "the snapshot made files")

        let elsewhere = (dir as NSString).deletingLastPathComponent + "/other.db"
        XCTAssertTrue(FileManager.default.createFile(atPath: elsewhere, contents: Data()))
        XCTAssertEqual(unlink(dir + "/index.sqlite"), 0)
        XCTAssertEqual(symlink(elsewhere, dir + "/index.sqlite"), 0)
        XCTAssertThrowsError(try CacheSnapshot(configuration: CacheConfiguration(directory: dir, engineClock: .realTime))) {
            XCTAssertTrue("\($0)".contains("symbolic link"), "\($0)")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: elsewhere), Data(), "the symlink's target was written")
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
