import XCTest
@testable import CacheCore
import TestSupport

/// Issue 36, item 5: an origin with no ETag and no Last-Modified (or an unchanged one) replaced
/// a file with another of the same size while one open read it: the reads mixed the versions,
/// and the mixed slices stayed cached. Without a strong validator, a range request past byte 0
/// now also asks for the 4 KiB before it and compares them with the cached bytes
/// (`VersionOverlap`); an open's probe compares the cached head. A difference is a new version:
/// the read fails with `remoteChanged`, the old slices go, nothing mixed is kept.
final class OverlapCheckTests: VersionCheckTestCase {
    private let url = "http://origin.test/media/big.bin"
    private let date = "Mon, 01 Jan 2024 00:00:00 GMT"

    func testAFileReplacedDuringAnOpenFailsTheReadAndKeepsNothingMixed() async throws {
        let old = randomBytes(3 << 20, seed: 71), new = randomBytes(3 << 20, seed: 72)
        for validator in [nil, date] as [String?] {
            try? FileManager.default.removeItem(atPath: dir)
            let source = ScriptedSource()
            source.set(url, .init(bytes: old, etag: nil, lastModified: validator))
            let cache = try engine(source)
            let info = try await cache.open(url: url)
            let reader = cache.makeReader(for: info)
            let head = try await read(reader, 0..<(1 << 20))
            XCTAssertEqual(head, Array(old[0..<(1 << 20)]))
            cache.core.writes.waitIdle()

            source.set(url, .init(bytes: new, etag: nil, lastModified: validator))   // same size, same date
            source.resetCounters()
            do {
                let mixed = try await read(reader, (1 << 20)..<(2 << 20))
                XCTFail("read \(mixed.count) bytes of the new version after the old one (validator: \(validator ?? "none"))")
            } catch {
                XCTAssertTrue(isRemoteChanged(error), "\(error)")
            }
            XCTAssertEqual(source.requestLog.first?.start, (1 << 20) - 4096, "the 4 KiB before the range came too")
            reader.close()
            XCTAssertEqual(cache.status(url: url)?.cachedBytes ?? 0, 0, "the old version's slices went")

            // A new open reads the new version, whole, and that is what stays.
            let again = try await cache.open(url: url)
            let fresh = cache.makeReader(for: again)
            let whole = try await read(fresh, 0..<new.count)
            XCTAssertEqual(whole, new)
            fresh.close()
            cache.core.writes.waitIdle()
            let cached = cache.makeReader(for: again)
            let kept = try await read(cached, 0..<new.count)
            XCTAssertEqual(kept, new, "nothing of the old version is kept")
            cached.close()
            cache.shutdown()
        }
    }

    func testAFileReplacedBetweenOpensIsSeenByTheNextOpensProbe() async throws {
        let old = randomBytes(2 << 20, seed: 73), new = randomBytes(2 << 20, seed: 74)
        let source = ScriptedSource()
        source.set(url, .init(bytes: old, etag: nil, lastModified: date))
        let cache = try engine(source)
        defer { cache.shutdown() }
        let first = cache.makeReader(for: try await cache.open(url: url))
        let whole = try await read(first, 0..<old.count)
        XCTAssertEqual(whole, old)
        first.close()
        cache.core.writes.waitIdle()

        source.set(url, .init(bytes: new, etag: nil, lastModified: date))
        // The revalidating open's probe samples the cached head first (issue 46, item 8: the
        // open was answered with the old version at the probe's head, and all its reads failed
        // once its first bytes differed): the sample differs, and the open gets the new version.
        let reopened = try await cache.open(url: url, maxAge: 0)
        let reader = cache.makeReader(for: reopened)
        let got = try await read(reader, 0..<old.count)
        XCTAssertEqual(got, new, "the revalidating open reads the new version whole, no read failing")
        reader.close()
        let next = cache.makeReader(for: try await cache.open(url: url))
        let now = try await read(next, 0..<new.count)
        XCTAssertEqual(now, new, "the next open has the new version, whole")
        next.close()
    }

    func testAnUnchangedFileAndAStrongETagCostNothingMore() async throws {
        let bytes = randomBytes(3 << 20, seed: 75)
        // No validator, nothing changed: the overlap matches, the reads go on.
        let source = ScriptedSource()
        source.set(url, .init(bytes: bytes, etag: nil))
        var cache = try engine(source)
        var reader = cache.makeReader(for: try await cache.open(url: url))
        for part in stride(from: 0, to: bytes.count, by: 1 << 20) {
            let got = try await read(reader, part..<(part + (1 << 20)))
            XCTAssertEqual(got, Array(bytes[part..<(part + (1 << 20))]))
            cache.core.writes.waitIdle()
        }
        reader.close()
        cache.shutdown()

        // A strong ETag: requests start where their range does.
        try FileManager.default.removeItem(atPath: dir)
        source.set(url, .init(bytes: bytes, etag: "\"v1\""))
        cache = try engine(source)
        defer { cache.shutdown() }
        reader = cache.makeReader(for: try await cache.open(url: url))
        _ = try await read(reader, 0..<(1 << 20))
        cache.core.writes.waitIdle()
        source.resetCounters()
        let got = try await read(reader, (1 << 20)..<(2 << 20))
        XCTAssertEqual(got, Array(bytes[(1 << 20)..<(2 << 20)]))
        XCTAssertEqual(source.requestLog.map(\.start), [1 << 20])
        reader.close()
    }

    /// Two streams of one file, the later from the new version: parallel read-ahead, or a
    /// reader that read the middle first. The stream that ends where held bytes begin asks for
    /// their first 4 KiB too, and compares.
    func testAStreamThatEndsWhereHeldBytesBeginIsComparedThere() async throws {
        let old = randomBytes(3 << 20, seed: 76), new = randomBytes(3 << 20, seed: 77)
        let source = ScriptedSource()
        source.set(url, .init(bytes: old, etag: nil, lastModified: date))
        let cache = try engine(source)
        defer { cache.shutdown() }
        let reader = cache.makeReader(for: try await cache.open(url: url, takeFirstBytes: false))
        let middle = try await read(reader, (1 << 20)..<(2 << 20))
        XCTAssertEqual(middle, Array(old[(1 << 20)..<(2 << 20)]))
        cache.core.writes.waitIdle()

        source.set(url, .init(bytes: new, etag: nil, lastModified: date))
        source.resetCounters()
        do {
            let first = try await read(reader, 0..<(1 << 20))
            XCTFail("read \(first.count) bytes of the new version before the old middle")
        } catch {
            XCTAssertTrue(isRemoteChanged(error), "\(error)")
        }
        let asked = try XCTUnwrap(source.requestLog.first)
        XCTAssertEqual(asked.start, 0)
        XCTAssertEqual(asked.end, (1 << 20) + 4096, "the 4 KiB after the range came too")
        XCTAssertEqual(cache.status(url: url)?.cachedBytes ?? 0, 0, "the old middle went")
        reader.close()
    }
}
