import XCTest
@testable import CacheCore

/// The counters' own pieces: the ring of recent errors and the summary's slice count. The engine's
/// counters after scripted reads, with the layers that count transfers, are Fetcher's tests
/// (`TrackedEngineTests`).
final class CacheMetricsTests: XCTestCase {
    func testRecentErrorsKeepTheNewestInARing() {
        var ring = RecentErrors(capacity: 3)
        for i in 0..<5 {
            ring.append(ErrorRecord(time: Date(), url: "u\(i)", start: nil, end: nil, kind: "timeout", status: nil, cause: ""))
        }
        XCTAssertEqual(ring.newestFirst.map(\.url), ["u4", "u3", "u2"])
    }

    func testSlicesAreCountedOncePerSliceFile() {
        let config = CacheConfiguration(directory: "/nonexistent", sliceSize: 100, engineClock: .realTime)
        func entry(_ ranges: [Range<Int64>]) -> EntryStatus {
            let info = EntryInfo(key: CacheKey(rawValue: "k"), url: "http://a/b", finalURL: "http://a/b", length: 1000,
                                 contentType: nil, etag: nil, lastModified: nil, acceptsRanges: true, generation: 1,
                                 validatedAt: Date())
            return EntryStatus(info: info, cachedRanges: ranges, cachedBytes: 0, hits: 0, misses: 0, bytesFromCache: 0,
                               bytesFromOrigin: 0, lastAccess: Date(), recentErrors: [])
        }
        // Slices 0, 1 (two ranges in it), 2, and 5.
        let summary = CacheSummary(files: [entry([0..<150, 160..<250]), entry([500..<600])], configuration: config,
                                   showDirectory: false, totals: nil)
        XCTAssertEqual(summary.slices, 4)
    }

}
