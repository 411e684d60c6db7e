import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// An origin whose ETag differs on every answer while the length and Last-Modified stay (load-
/// balanced Apache with inode ETags): the file is the same, and readable.
final class RotatingETagTests: XCTestCase {
    private let lastModified = "Mon, 01 Jan 2024 00:00:00 GMT"

    private func rotatingMount(ignoreETag: Bool) throws -> EngineMount {
        try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                        cache: { $0.revalidateAfter = 0; $0.ignoreETag = ignoreETag },
                        setup: {
                            $0.setGeneratedFile("/v.bin", length: 6 << 20, seed: 31)
                            var faults = Faults()
                            faults.rotateETag = true
                            $0.setFaults("/v.bin", faults)
                        })
    }

    func testAFileWhoseETagChangesOnEveryAnswerIsReadableAndKeptOnce() throws {
        let length: Int64 = 6 << 20
        let m = try rotatingMount(ignoreETag: false)
        defer { m.stop() }
        let bytes = try withinBound(60, "read of a rotating-ETag file") { try POSIX.readAll(m.path("v.bin")) }
        XCTAssertEqual(bytes.count, Int(length))
        XCTAssertTrue(bytes == OriginServer.generatedBytes(seed: 31, offset: 0, count: Int(length)))
        XCTAssertTrue(m.origin.requests.allSatisfy { $0.ifRange == nil || $0.ifRange == lastModified || $0.ifRange!.hasPrefix("\"rot-") })
        XCTAssertTrue(m.origin.requests.contains { $0.ifRange == lastModified },
                      "once noticed, If-Range carries Last-Modified: \(m.origin.requests.map { $0.ifRange ?? "-" })")
        // Opened again (revalidated with another ETag): still the same version, from the cache.
        m.origin.resetLog()
        let fd = try POSIX.open(m.path("v.bin"))
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
        XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == bytes)
        XCTAssertLessThan(m.origin.bytesServed(path: "/v.bin"), 1 << 20, "the cached bytes were kept")
        XCTAssertEqual(m.engine.status(url: m.origin.url("/v.bin"))?.cachedBytes, length)
    }

    func testWithIgnoreETagNoETagIsSentOrCompared() throws {
        let length: Int64 = 6 << 20
        let m = try rotatingMount(ignoreETag: true)
        defer { m.stop() }
        let bytes = try withinBound(60, "read with --ignore-etag") { try POSIX.readAll(m.path("v.bin")) }
        XCTAssertTrue(bytes == OriginServer.generatedBytes(seed: 31, offset: 0, count: Int(length)))
        XCTAssertTrue(m.origin.requests.contains { $0.ifRange != nil }, "ranges were asked with If-Range")
        for r in m.origin.requests where r.ifRange != nil {
            XCTAssertEqual(r.ifRange, lastModified, "Last-Modified as If-Range, never an ETag")
        }
        XCTAssertEqual(m.origin.requests.filter { $0.status == 200 }.count, 0, "every range answered with a 206")
    }
}
