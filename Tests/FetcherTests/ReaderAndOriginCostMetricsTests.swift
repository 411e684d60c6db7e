@testable import CacheCore
import Fetcher
import Foundation
import MetricsExport
import TestSupport
import XCTest

/// What each origin sees and what each kind of program costs, as the status document and
/// `/metrics` show them, with Fetcher's standard layers counting the transfers (as in every
/// engine of the executable): requests by origin and their rate over the last 10 s, the bytes
/// each reader class had fetched and wasted.
final class ReaderAndOriginCostMetricsTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/media/movie.mp4"
    private let origin = "http://origin.test:80"
    private let length: Int64 = 4 << 20
    private lazy var data = randomBytes(Int(length), seed: 7)
    /// The engine's monotonic clock, moved by hand (seconds).
    private let uptime = Locked<UInt64>(1_000)

    override func setUp() { dir = NSTemporaryDirectory() + "httpcachefs-cost-\(UUID().uuidString)" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    private func engine(_ source: GatedSource, export: PrometheusExport, tpslimit: Double? = nil) throws -> CacheEngine {
        var configuration = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20,
                                               readTimeout: 10, initialReadAhead: 0, engineClock: .realTime)
        configuration.engineClock = EngineClock(wall: { Date(timeIntervalSince1970: 1_900_000_000) },
                                                monotonic: { [uptime] in MonotonicInstant(nanoseconds: uptime.value * 1_000_000_000) },
                                                scheduler: Scheduler.manual())
        configuration.requestRateLimit = tpslimit
        return try CacheEngine(configuration: configuration, source: source, metricsFactory: export.factory,
                               layers: FetchLayers.standard(probes: Scheduler.manual()))
    }

    /// Opens the file (a probe for the first 256 KiB), then a scanner reads 32 KiB at 1 MiB: its
    /// request brings the 32 KiB (nothing ahead of its first read).
    private func openAndScan(_ cache: CacheEngine, _ source: GatedSource) throws {
        let opened = expectation(description: "open")
        let box = ResultBox<EntryInfo>()
        cache.open(url: url) { box.set($0); opened.fulfill() }
        serve(try XCTUnwrap(source.transfers.last))
        wait(for: [opened], timeout: 5)
        let reader = cache.makeReader(for: try box.get(), door: .fuse, readerClass: .scanner)
        let read = expectation(description: "read")
        reader.read(offset: 1 << 20, length: 32 << 10) { _ in read.fulfill() }
        serve(try XCTUnwrap(source.transfers.last))
        wait(for: [read], timeout: 5)
        reader.close()
    }

    private func serve(_ t: GatedSource.Transfer) {
        t.partial(length: length)
        t.send(data[Int(t.request.start)..<Int(t.request.end!)])
        t.finish()
    }

    func testTheDocumentShowsEachOriginsRequestsAndRateAndEachClassesFetchedAndWastedBytes() throws {
        let source = GatedSource(), export = PrometheusExport()
        let cache = try engine(source, export: export, tpslimit: 4)
        defer { source.finishAll(); cache.shutdown() }
        try openAndScan(cache, source)
        cache.core.writes.waitIdle()
        _ = cache.core.evictor.evict(where: { _ in true })
        cache.core.evictor.rounds.waitIdle()

        let document = cache.statusDocument(version: "test", showDirectory: false)
        let traffic = try XCTUnwrap(document.origins?.first)
        XCTAssertEqual(traffic.origin, origin)
        XCTAssertEqual(traffic.requests, 2, "the open's and the scanner's")
        XCTAssertEqual(traffic.bytes, (256 << 10) + (32 << 10))
        XCTAssertEqual(traffic.requestsPerSecond, 0.2, "2 requests over the last 10 s")
        XCTAssertEqual(document.requestRateLimit, 4)
        let scanner = try XCTUnwrap(document.totals.readers?["scanner"])
        XCTAssertEqual(scanner.receivedBytes, 32 << 10, "a run's first read has nothing ahead (EarnedReadAhead)")
        XCTAssertEqual(scanner.wastedBytes, 0, "it read all it fetched")
        XCTAssertEqual(document.totals.readers?["open"]?.wastedBytes, 256 << 10)

        uptime.mutate { $0 += 10 }
        XCTAssertEqual(cache.statusDocument(version: "test", showDirectory: false).origins?.first?.requestsPerSecond, 0,
                       "none in the last 10 s")
        XCTAssertEqual(cache.statusDocument(version: "test", showDirectory: false).origins?.first?.requests, 2)
    }

    func testMetricsTextHasTheReaderAndOriginFamiliesWithTheirHelp() throws {
        let source = GatedSource(), export = PrometheusExport()
        let cache = try engine(source, export: export)
        defer { source.finishAll(); cache.shutdown() }
        try openAndScan(cache, source)
        cache.core.writes.waitIdle()
        _ = cache.core.evictor.evict(where: { _ in true })
        cache.core.evictor.rounds.waitIdle()

        let text = export.text(for: cache)
        let margin: Int64 = 0   // nothing ahead of a run's first read (EarnedReadAhead)
        for line in [
            "httpcachefs_reader_received_bytes_total{reader=\"scanner\"} \((32 << 10) + margin)",
            "httpcachefs_reader_wasted_bytes_total{reader=\"scanner\"} \(margin)",
            "httpcachefs_reader_received_bytes_total{reader=\"open\"} \(256 << 10)",
            "httpcachefs_reader_wasted_bytes_total{reader=\"open\"} \(256 << 10)",
            "httpcachefs_reader_wasted_bytes_total{reader=\"player\"} 0",
            "httpcachefs_origin_host_requests_total{origin=\"\(origin)\"} 2",
            "httpcachefs_origin_host_bytes_total{origin=\"\(origin)\"} \((256 << 10) + (32 << 10) + margin)",
            "httpcachefs_origin_host_requests_per_second{origin=\"\(origin)\"} 0.2",
        ] {
            XCTAssertTrue(text.contains(line + "\n"), "\(line) in\n\(text)")
        }
        for family in ["httpcachefs_reader_received_bytes_total", "httpcachefs_reader_wasted_bytes_total",
                       "httpcachefs_origin_host_requests_total", "httpcachefs_origin_host_bytes_total",
                       "httpcachefs_origin_host_requests_per_second"] {
            XCTAssertTrue(text.contains("# HELP \(family) "), "help for \(family)")
        }
    }
}
