import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// A network that answers every request with a login page (a captive portal) must not replace
/// a cached file: the revalidation failed, the cached copy is served as for an origin that is down.
final class PortalTests: XCTestCase {
    private func expected(_ seed: UInt64, _ length: Int64) -> [UInt8] {
        OriginServer.generatedBytes(seed: seed, offset: 0, count: Int(length))
    }

    private func checkCachedCopySurvives(pageType: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let length: Int64 = 3 << 20
        let m = try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                                cache: { $0.revalidateAfter = 0 },
                                setup: { $0.setGeneratedFile("/v.bin", length: length, seed: 21) })
        defer { m.stop() }
        XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == expected(21, length), file: file, line: line)   // all cached

        m.origin.setResponse("/v.bin", status: 200, headers: [("Content-Type", pageType)],
                             body: Array("<html><body>Please log in</body></html>\n".utf8))
        m.origin.resetLog()
        let fd = try POSIX.open(m.path("v.bin"))
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
        let again = try withinBound(60, "read after the portal") { try POSIX.readAll(m.path("v.bin")) }
        XCTAssertGreaterThan(m.origin.requests.count, 0, "the opens revalidated", file: file, line: line)
        XCTAssertEqual(again.count, Int(length), "the cached film, not the page", file: file, line: line)
        XCTAssertTrue(again == expected(21, length), "the cached bytes", file: file, line: line)
        XCTAssertEqual(try POSIX.stat(m.path("v.bin")).st_size, Int(length), file: file, line: line)
        let status = try XCTUnwrap(m.engine.status(url: m.origin.url("/v.bin")), file: file, line: line)
        XCTAssertEqual(status.cachedBytes, length, "nothing dropped", file: file, line: line)
        XCTAssertTrue(status.recentErrors.contains { $0.contains("captive portal") },
                      "the entry's recent errors say so: \(status.recentErrors)", file: file, line: line)
    }

    func testALoginPageOfAnotherTypeDoesNotReplaceACachedFile() throws {
        try checkCachedCopySurvives(pageType: "text/html; charset=utf-8")
    }

    func testAWholeBodyWithoutValidatorsToARangeOfARangesOriginDoesNotReplaceACachedFile() throws {
        try checkCachedCopySurvives(pageType: "application/octet-stream")
    }
}
