import Foundation
import XCTest
@testable import CacheCore
#if canImport(Glibc)
import Glibc
#endif

/// A file of a cache that may be another user's is read only as a regular file of the expected
/// owner, within a bound (`OwnedFile`): the rule as a table, then each refusal on real files.
final class OwnedFileTests: XCTestCase {
    func testTheRule() {
        let me: uid_t = 1000
        let cases: [(mode_t, uid_t, Int64, OwnedFile.Refusal?)] = [
            (S_IFREG | 0o600, me, 100, nil),
            (S_IFREG | 0o644, me, 1 << 20, nil),
            (S_IFLNK | 0o777, me, 10, .symlink),
            (S_IFIFO | 0o600, me, 0, .notRegular),
            (S_IFDIR | 0o700, me, 4096, .notRegular),
            (S_IFREG | 0o600, 0, 100, .wrongOwner(uid: 0, expected: me)),
            (S_IFREG | 0o600, me, (1 << 20) + 1, .tooLarge(bytes: (1 << 20) + 1, limit: 1 << 20)),
        ]
        for (mode, uid, size, expected) in cases {
            XCTAssertEqual(OwnedFile.check(mode: mode, uid: uid, size: size, owner: me, maxBytes: 1 << 20), expected, "\(String(mode, radix: 8)) \(uid) \(size)")
        }
    }

    func testRealFiles() throws {
        let dir = NSTemporaryDirectory() + "owned-file-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/plain", contents: Data("hello".utf8)))
        XCTAssertEqual(symlink(dir + "/plain", dir + "/link"), 0)
        XCTAssertEqual(mkfifo(dir + "/fifo", 0o600), 0)
        XCTAssertEqual(try OwnedFile.read(dir + "/plain").get(), Array("hello".utf8))
        XCTAssertEqual(OwnedFile.read(dir + "/link").failure, .symlink, "a symlink is not followed")
        XCTAssertEqual(OwnedFile.read(dir + "/fifo").failure, .notRegular, "a FIFO is refused, not waited on")
        XCTAssertEqual(OwnedFile.read(dir + "/missing").failure, .missing)
        XCTAssertEqual(OwnedFile.read(dir + "/plain", maxBytes: 4).failure, .tooLarge(bytes: 5, limit: 4))
        XCTAssertEqual(OwnedFile.read(dir + "/plain", owner: geteuid() + 1).failure, .wrongOwner(uid: geteuid(), expected: geteuid() + 1))
    }
}

private extension Result {
    var failure: Failure? { if case let .failure(f) = self { return f }; return nil }
}
