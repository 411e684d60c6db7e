import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// The overlap check (issue 36, item 5) through libcurl against the loopback origin: a file with
/// no ETag replaced by another of the same size and date during an open is found out at the next
/// request, and an unchanged one reads whole at the same cost plus a few KiB per request.
extension CacheOverHTTPTests {
    func testAFileWithoutETagReplacedDuringAnOpenIsFoundOutAndNothingMixedIsKept() async throws {
        let old = OriginServer.generatedBytes(seed: 81, offset: 0, count: 3 << 20)
        let new = OriginServer.generatedBytes(seed: 82, offset: 0, count: 3 << 20)
        origin.setFile("/v.bin", data: old, etag: "")   // Last-Modified: the same fixed date for both
        let cache = try makeCache(readAhead: 0, maxReadAhead: 0)
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/v.bin"))
        XCTAssertNil(info.etag)
        let reader = cache.makeReader(for: info)
        let head = try await reader.read(offset: 0, length: 1 << 20)
        XCTAssertEqual(head, Array(old[0..<(1 << 20)]))

        origin.setFile("/v.bin", data: new, etag: "")
        origin.resetLog()
        do {
            let mixed = try await reader.read(offset: 1 << 20, length: 1 << 20)
            XCTFail("read \(mixed.count) bytes of the new version after the old ones")
        } catch let error as CacheError {
            guard case .remoteChanged = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(servedRanges("/v.bin").first, "\((1 << 20) - 4096)-\((2 << 20) + 4096 - 1)", "4 KiB on each side")
        reader.close()

        let fresh = cache.makeReader(for: try await cache.open(url: origin.url("/v.bin")))
        let whole = try await fresh.read(offset: 0, length: new.count)
        XCTAssertEqual(whole, new, "the next open reads the new version whole")
        fresh.close()
    }

    /// Issue 46, item 8, through libcurl: an origin that names no version at all. A seek past an
    /// uncached stretch asks for a sample of the cached head first (in a request of its own,
    /// before its range, so that it needs no second connection while holding one: this origin
    /// gets one); the file changed, so the seek's read fails instead of answering with the new
    /// bytes after the old, and the next open reads the new version whole, with no error.
    func testASeekWithoutValidatorsSamplesTheCachedHeadFirstEvenOverOneConnection() async throws {
        let one = CurlRangeSource(configuration: FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs/test", lowSpeedTime: 5, maxRetries: 3,
                                                                      retryBaseDelay: 0.05, maxConnections: 1, maxTotalConnections: 1),
                                  logger: Logger(label: "test"))
        defer { one.shutdown() }
        let old = OriginServer.generatedBytes(seed: 84, offset: 0, count: 8 << 20)
        let new = OriginServer.generatedBytes(seed: 85, offset: 0, count: 8 << 20)
        origin.setFile("/plain.bin", data: old, etag: "")
        var faults = Faults()
        faults.noLastModified = true
        origin.setFaults("/plain.bin", faults)
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: temp.appending("cache"), capacity: 1 << 30,
                                                                      freeSpaceFloor: 0, sliceSize: 1 << 20, readTimeout: 20,
                                                                      initialReadAhead: 0, maxReadAhead: 0, engineClock: .realTime),
                                    source: one, layers: FetchLayers.standard())
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/plain.bin"))
        XCTAssertNil(info.etag)
        XCTAssertNil(info.lastModified)
        let reader = cache.makeReader(for: info)
        let head = try await reader.read(offset: 0, length: 1 << 20)
        XCTAssertEqual(head, Array(old[0..<(1 << 20)]))

        // Unchanged: the sample, then the range (and its 4 KiB before and after).
        origin.resetLog()
        let far = try await reader.read(offset: 4 << 20, length: 1 << 20)
        XCTAssertEqual(far, Array(old[(4 << 20)..<(5 << 20)]))
        XCTAssertEqual(servedRanges("/plain.bin"), ["0-4095", "\((4 << 20) - 4096)-\((5 << 20) + 4096 - 1)"])

        // Changed: the next seek's sample differs; its range is never asked.
        origin.setFile("/plain.bin", data: new, etag: "")
        origin.resetLog()
        do {
            let mixed = try await reader.read(offset: 6 << 20, length: 1 << 20)
            XCTFail("read \(mixed.count) bytes of the new version after the old ones")
        } catch let error as CacheError {
            guard case .remoteChanged = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(servedRanges("/plain.bin"), ["0-4095"])
        reader.close()

        let fresh = cache.makeReader(for: try await cache.open(url: origin.url("/plain.bin")))
        let whole = try await fresh.read(offset: 0, length: new.count)
        XCTAssertEqual(whole, new, "the next open reads the new version whole")
        fresh.close()
    }

    func testAnUnchangedFileWithoutETagReadsWholeWithReadAhead() async throws {
        let bytes = OriginServer.generatedBytes(seed: 83, offset: 0, count: 6 << 20)
        origin.setFile("/same.bin", data: bytes, etag: "")
        let cache = try makeCache(readAhead: 2 << 20, maxReadAhead: 2 << 20)
        defer { cache.shutdown() }
        let reader = cache.makeReader(for: try await cache.open(url: origin.url("/same.bin")))
        var got: [UInt8] = []
        while got.count < bytes.count {
            got += try await reader.read(offset: Int64(got.count), length: min(128 << 10, bytes.count - got.count))
        }
        reader.close()
        XCTAssertEqual(got, bytes)
        let asked = origin.requests.filter { $0.pathWithoutQuery == "/same.bin" }.count
        XCTAssertLessThan(asked, 20, "\(servedRanges("/same.bin"))")
    }
}
