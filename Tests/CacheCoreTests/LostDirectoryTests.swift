import Foundation
import Logging
import TestSupport
import XCTest
@testable import CacheCore

/// A cache directory deleted or replaced under a running daemon is said, once, as an error.
final class LostDirectoryTests: XCTestCase {
    private func engine(_ dir: String, log: RecordedLog) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, engineClock: .realTime),
                        source: ScriptedSource(), logger: log.logger)
    }

    func testADeletedCacheDirectoryIsReportedOnce() throws {
        let dir = NSTemporaryDirectory() + "httpcachefs-lost-\(UUID().uuidString)"
        let log = RecordedLog()
        let cache = try engine(dir, log: log)
        defer { cache.shutdown() }
        XCTAssertNil(cache.core.maintenance.checkDirectory(), "in place")
        try FileManager.default.removeItem(atPath: dir)
        XCTAssertEqual(cache.core.maintenance.checkDirectory(), "its lock file was deleted")
        XCTAssertNotNil(cache.core.maintenance.checkDirectory())
        XCTAssertEqual(log.lines.filter { $0.contains("cache directory was deleted or replaced") }.count, 1, "said once")
    }

    func testAReplacedCacheDirectoryIsReported() throws {
        let dir = NSTemporaryDirectory() + "httpcachefs-lost-\(UUID().uuidString)"
        let cache = try engine(dir, log: RecordedLog())
        defer { cache.shutdown() }
        try FileManager.default.moveItem(atPath: dir, toPath: dir + ".old")
        defer { try? FileManager.default.removeItem(atPath: dir + ".old") }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertNotNil(FileManager.default.createFile(atPath: dir + "/lock", contents: Data()))
        XCTAssertEqual(cache.core.maintenance.checkDirectory(), "another lock file took its place")
    }
}
