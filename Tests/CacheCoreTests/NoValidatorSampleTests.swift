import XCTest
@testable import CacheCore
import TestSupport

/// Issue 46, item 8: an origin with neither ETag nor Last-Modified. A seek past an uncached
/// stretch asked for bytes with no held neighbour to compare, so one open read the old version,
/// then the new one (8 MiB of each). Such a fetch now also asks for a sample of the cached bytes
/// (the first cached 4 KiB, in a second small request) and holds its bytes back until the sample
/// compares equal; a change starts a new version, and the next open reads it whole.
final class NoValidatorSampleTests: VersionCheckTestCase {
    private let url = "http://origin.test/media/plain.bin"

    /// The file changes (same length, then another length) between a read of its head and a
    /// seek past an uncached stretch: the seek's read fails, never answers with the new bytes
    /// after the old; the next open reads the new version whole, with no error.
    func testASeekPastAnUncachedStretchNeverMixesAndTheNextOpenReadsTheNewVersion() async throws {
        let old = randomBytes(4 << 20, seed: 91)
        for newLength in [4 << 20, 5 << 20] {
            try? FileManager.default.removeItem(atPath: dir)
            let new = randomBytes(newLength, seed: 92)
            let source = ScriptedSource()
            source.set(url, .init(bytes: old, etag: nil, lastModified: nil))
            let cache = try engine(source)
            let info = try await cache.open(url: url)
            XCTAssertNil(info.etag)
            XCTAssertNil(info.lastModified)
            let reader = cache.makeReader(for: info)
            let head = try await read(reader, 0..<(1 << 20))
            XCTAssertEqual(head, Array(old[0..<(1 << 20)]))
            cache.core.writes.waitIdle()

            source.set(url, .init(bytes: new, etag: nil, lastModified: nil))
            do {
                let far = try await read(reader, (3 << 20)..<((3 << 20) + (256 << 10)))
                XCTFail("read \(far.count) bytes of the new version (length \(newLength)) after the old head: \(far.elementsEqual(new[(3 << 20)..<((3 << 20) + (256 << 10))]) ? "new" : "other")")
            } catch {
                XCTAssertTrue(isRemoteChanged(error), "\(error)")
            }
            reader.close()
            cache.core.writes.waitIdle()
            XCTAssertEqual(cache.status(url: url)?.cachedBytes ?? 0, 0, "length \(newLength): the old version's slices went")

            // The next open reads the new version, whole, and with no error.
            let again = try await cache.open(url: url)
            XCTAssertEqual(again.length, Int64(newLength))
            let fresh = cache.makeReader(for: again)
            var got: [UInt8] = []
            while got.count < newLength {
                got += try await read(fresh, got.count..<min(got.count + (1 << 20), newLength))
            }
            XCTAssertEqual(got, new, "length \(newLength)")
            fresh.close()
            cache.shutdown()
        }
    }

    /// Unchanged: the seek reads its bytes; it cost one small request of the cached head beside
    /// its own, and a read next to cached bytes costs none.
    func testAnUnchangedFileCostsOneSmallRequestPerSeekAwayFromCachedBytes() async throws {
        let bytes = randomBytes(4 << 20, seed: 93)
        let source = ScriptedSource()
        source.set(url, .init(bytes: bytes, etag: nil, lastModified: nil))
        let cache = try engine(source)
        defer { cache.shutdown() }
        let reader = cache.makeReader(for: try await cache.open(url: url))
        defer { reader.close() }
        let head = try await read(reader, 0..<(1 << 20))
        XCTAssertEqual(head, Array(bytes[0..<(1 << 20)]))
        cache.core.writes.waitIdle()

        source.resetCounters()
        let far = try await read(reader, (3 << 20)..<(4 << 20))
        XCTAssertEqual(far, Array(bytes[(3 << 20)..<(4 << 20)]))
        let asked = source.requestLog.map { "\($0.start)-\($0.end.map(String.init) ?? "")" }.sorted()
        XCTAssertEqual(asked, ["0-4096", "\((3 << 20) - 4096)-\(4 << 20)"])
        cache.core.writes.waitIdle()

        source.resetCounters()
        let next = try await read(reader, (1 << 20)..<(2 << 20))
        XCTAssertEqual(next, Array(bytes[(1 << 20)..<(2 << 20)]))
        XCTAssertEqual(source.requestLog.map(\.start), [(1 << 20) - 4096], "next to cached bytes: compared there, no sample")
    }
}
