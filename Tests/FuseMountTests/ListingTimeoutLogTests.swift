import CacheCore
import Foundation
import TestSupport
import XCTest
@testable import FuseMount

/// A listing whose fetch timed out (a stalled origin fails before the read timeout) is logged
/// with the time it really waited, not the read timeout: the log and what a user waited agree.
final class ListingTimeoutLogTests: XCTestCase {
    func testATimedOutListingLogsTheWaitItHadNotTheReadTimeout() throws {
        let backend = FakeBackend()
        backend.readTimeout = 60
        backend.setError("http://o/a/", .timeout(url: "http://o/a/"))
        let tree = try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("a = http://o/a/")])
        let log = RecordedLog()
        let c = CoreCalls(backend: backend, tree: tree, options: MountOptions(revalidateAfter: 600, listingTTL: 600), logger: log.logger)
        let a = try c.lookup("a").get().ino
        XCTAssertEqual(try c.list(a).map(\.count), .failure(FSErrno(EIO)))
        let line = try XCTUnwrap(log.lines.first { $0.contains("directory listing failed") }, "\(log.lines)")
        XCTAssertTrue(line.contains("http://o/a/: timed out after "), line)
        XCTAssertFalse(line.contains("after 60"), "the fetch gave up long before the 60 s read timeout: \(line)")
    }
}
