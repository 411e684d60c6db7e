import XCTest
@testable import CacheCore
import TestSupport

/// What the tests of version changes without validators share (`OverlapCheckTests`,
/// `NoValidatorSampleTests`): a cache directory per test, an engine with no read-ahead, so each
/// read fetches exactly its range and the test says which request comes, and the reads' helpers.
class VersionCheckTestCase: XCTestCase {
    var dir: String!
    let slice: Int64 = 1 << 20

    override func setUp() { dir = NSTemporaryDirectory() + "httpcachefs-version-\(UUID().uuidString)" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func engine(_ source: ScriptedSource) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 64 << 20, freeSpaceFloor: 0, sliceSize: slice,
                                                          readTimeout: 10, initialReadAhead: 0, maxReadAhead: 0, engineClock: .realTime),
                        source: source)
    }

    func read(_ reader: CacheReader, _ range: Range<Int>) async throws -> [UInt8] {
        try await reader.read(offset: Int64(range.lowerBound), length: range.count)
    }

    func isRemoteChanged(_ error: Error) -> Bool {
        if case .remoteChanged = error as? CacheError { return true }
        return false
    }
}
