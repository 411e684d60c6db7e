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
