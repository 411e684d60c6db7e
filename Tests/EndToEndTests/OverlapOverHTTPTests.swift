import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// The overlap check (issue 36, item 5) through libcurl against the loopback origin: a file with
/// no ETag replaced by another of the same size and date during an open is found out at the next
/// request, and an unchanged one reads whole at the same cost plus a few KiB per request.
final class OverlapOverHTTPTests: XCTestCase {
    var origin: OriginServer!
    var temp: TemporaryDirectory!
    var source: CurlRangeSource!

    override func setUpWithError() throws {
        origin = try OriginServer()
        temp = TemporaryDirectory(prefix: "httpcachefs-overlap")
        source = CurlRangeSource(configuration: FetcherConfiguration(userAgent: "httpcachefs/test", lowSpeedTime: 5,
                                                                     maxRetries: 3, retryBaseDelay: 0.05),
                                 logger: Logger(label: "test"))
    }

    override func tearDown() {
        source.shutdown()
        origin.stop()
        temp.remove()
    }

    private func makeCache(readAhead: Int64) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: temp.appending("cache"), capacity: 1 << 30,
                                                          freeSpaceFloor: 0, sliceSize: 1 << 20, readTimeout: 20,
                                                          initialReadAhead: readAhead, maxReadAhead: readAhead),
                        source: source)
    }

    private func served(_ path: String) -> [String] {
        origin.requests.filter { $0.pathWithoutQuery == path }.map { $0.range.map { String($0.dropFirst(6)) } ?? "all" }
    }

    func testAFileWithoutETagReplacedDuringAnOpenIsFoundOutAndNothingMixedIsKept() async throws {
        let old = OriginServer.generatedBytes(seed: 81, offset: 0, count: 3 << 20)
        let new = OriginServer.generatedBytes(seed: 82, offset: 0, count: 3 << 20)
        origin.setFile("/v.bin", data: old, etag: "")   // Last-Modified: the same fixed date for both
        let cache = try makeCache(readAhead: 0)
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
        XCTAssertEqual(served("/v.bin").first, "\((1 << 20) - 4096)-\((2 << 20) + 4096 - 1)", "4 KiB on each side")
        reader.close()

        let fresh = cache.makeReader(for: try await cache.open(url: origin.url("/v.bin")))
        let whole = try await fresh.read(offset: 0, length: new.count)
        XCTAssertEqual(whole, new, "the next open reads the new version whole")
        fresh.close()
    }

    func testAnUnchangedFileWithoutETagReadsWholeWithReadAhead() async throws {
        let bytes = OriginServer.generatedBytes(seed: 83, offset: 0, count: 6 << 20)
        origin.setFile("/same.bin", data: bytes, etag: "")
        let cache = try makeCache(readAhead: 2 << 20)
        defer { cache.shutdown() }
        let reader = cache.makeReader(for: try await cache.open(url: origin.url("/same.bin")))
        var got: [UInt8] = []
        while got.count < bytes.count {
            got += try await reader.read(offset: Int64(got.count), length: min(128 << 10, bytes.count - got.count))
        }
        reader.close()
        XCTAssertEqual(got, bytes)
        let asked = origin.requests.filter { $0.pathWithoutQuery == "/same.bin" }.count
        XCTAssertLessThan(asked, 20, "\(served("/same.bin"))")
    }
}
