import CacheCore
import Fetcher
import Foundation
@testable import MetricsExport
import TestSupport
import XCTest

/// The engine's counters, status document and metrics text with Fetcher's standard layers (as
/// every engine of the executable has them) after a scripted sequence of reads: a hand-driven
/// source decides when every byte arrives, so each number is known exactly. The layers count
/// each transfer (answers by class, body bytes, retries) and list those running; an engine
/// without them (CacheCore's tests) counts none of these.
final class TrackedEngineTests: XCTestCase {
    private var dir: String!
    /// The Prometheus backend of the engine under test (the executable's choice).
    private var export: PrometheusExport!
    private let url = "http://origin.test/media/movie.mp4"
    private let length: Int64 = 4 << 20
    private lazy var data = randomBytes(Int(length), seed: 7)
    /// The origin-health layer's timers: none fires here.
    private let probes = Scheduler.manual()

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-metrics-\(UUID().uuidString)"
        export = PrometheusExport()
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    /// An engine over `source` in Fetcher's standard layers, as every engine of the executable.
    private func engine(_ source: GatedSource) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                                          sliceSize: 1 << 20, readTimeout: 10, initialReadAhead: 0, engineClock: .realTime),
                        source: source, metricsFactory: export.factory, layers: FetchLayers.standard(probes: probes))
    }

    /// Opens `url`: the probe delivers what it asked for (the first 256 KiB of a new file, one
    /// byte of a known one) with `etag`, or fails with `failing`.
    private func open(_ cache: CacheEngine, _ source: GatedSource, url: String? = nil, maxAge: TimeInterval? = nil,
                      etag: String = "\"a\"", failing: FetchError? = nil) throws -> ResultBox<EntryInfo> {
        let opened = expectation(description: "open")
        let box = ResultBox<EntryInfo>()
        cache.open(url: url ?? self.url, maxAge: maxAge) { box.set($0); opened.fulfill() }
        let probe = try XCTUnwrap(source.transfers.last)
        if let failing {
            probe.finish(failing)
        } else {
            probe.partial(length: length, etag: etag)
            probe.send(data[Int(probe.request.start)..<Int(probe.request.end!)])
            probe.finish()
        }
        wait(for: [opened], timeout: 5)
        return box
    }

    private func read(_ reader: CacheReader, _ offset: Int64, _ length: Int,
                      drive: (GatedSource.Transfer) -> Void = { _ in }, source: GatedSource) throws -> ResultBox<[UInt8]> {
        let before = source.transfers.count
        let answered = expectation(description: "read")
        let box = ResultBox<[UInt8]>()
        reader.read(offset: offset, length: length) { box.set($0); answered.fulfill() }
        if source.transfers.count > before { drive(source.transfers.last!) }
        wait(for: [answered], timeout: 5)
        return box
    }

    /// A source that can pause offers bytes; the engine takes a fetch's last ones with `.stop`.
    /// Those count as fetched too (the count once took `.stop` for a refusal).
    func testOfferedBytesTakenWithTheFetchsStopCountAsFetched() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try XCTUnwrap(try open(cache, source).get())
        let before = cache.metrics.totals.originBytes
        let start = 2 << 20
        var flows: [FetchFlow] = []
        let read = try read(cache.makeReader(for: info), Int64(start), 64 << 10, drive: { t in
            t.partial(length: self.length, etag: "\"a\"")
            let end = Int(t.request.end!)
            flows.append(t.offer(self.data[start..<(end - 1000)], more: true))
            flows.append(t.offer(self.data[(end - 1000)..<end]))
            t.finish()
        }, source: source)
        XCTAssertEqual(try read.get(), Array(data[start..<(start + (64 << 10))]))
        XCTAssertEqual(flows.last, .stop, "the fetch's last bytes, taken with .stop")
        let fetched = Int64(source.transfers.last!.request.end!) - Int64(start)
        XCTAssertEqual(cache.metrics.totals.originBytes - before, fetched)
    }

    /// An origin that ignores Range answers a read at 2 MiB with the whole file from byte 0: the
    /// transfer's position passes the end it asked for before it ends. The status document still
    /// draws (it once trapped on `position..<end`, and the daemon, its mount and proxy ended
    /// with it whenever the status page, `status.json` or `httpcachefs status` asked).
    func testTheDocumentDrawsATransferPastItsAskedEnd() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try XCTUnwrap(try open(cache, source).get())
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        let start = 2 << 20
        reader.read(offset: Int64(start), length: 64 << 10) { _ in }
        let t = try XCTUnwrap(source.transfers.last)
        let end = Int(try XCTUnwrap(t.request.end))
        XCTAssertGreaterThan(t.request.start, 0)
        _ = t.sink.fetchDidReceiveHead(ResponseHead(status: 200, finalURL: url, bodyStart: 0, totalLength: length,
                                                    etag: "\"a\"", acceptsRanges: false))
        _ = t.send(data[0..<(end + 1000)])
        let inFlight = try XCTUnwrap(cache.statusDocument(version: "test", showDirectory: false).fetches.first)
        XCTAssertGreaterThan(inFlight.position, Int64(end), "the transfer ran past its end")
        let document = cache.statusDocument(version: "test", showDirectory: false)
        XCTAssertEqual(document.fetches.count, 1)
        XCTAssertEqual(document.files.first?.fetchingRanges, [])
        t.finish()
    }

    func testCountsDocumentAndMetricsTextAfterAScriptedSequenceOfReads() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source).get()          // probe: 0..<256 KiB from the origin

        // A FUSE read of cached bytes: a hit, answered on the spot.
        let fuse = cache.makeReader(for: info, door: .fuse)
        XCTAssertEqual(try read(fuse, 0, 64 << 10, source: source).get(), Array(data[0..<(64 << 10)]))

        // A proxy read of missing bytes: a miss. Halfway through, the status document shows the
        // fetch in flight and the range it is still filling.
        let proxy = cache.makeReader(for: info, door: .proxy, requestStartedAt: cache.configuration.engineClock.monotonic)
        let start = 1 << 20, half = 32 << 10
        let missed = try read(proxy, Int64(start), 64 << 10, drive: { t in
            XCTAssertEqual(t.request.start, Int64(start))
            XCTAssertEqual(t.request.end, Int64(start + (64 << 10)))
            t.partial(length: length)
            t.send(data[start..<(start + half)])
            let during = cache.statusDocument(version: "test", showDirectory: true)
            XCTAssertEqual(during.fetches.count, 1)
            XCTAssertEqual(during.fetches.first?.url, url)
            XCTAssertEqual(during.fetches.first?.start, Int64(start))
            XCTAssertEqual(during.fetches.first?.position, Int64(start + half))
            XCTAssertEqual(during.fetches.first?.bytes, Int64(half))
            XCTAssertEqual(during.files.first?.fetchingRanges, [[Int64(start + half), Int64(start + (64 << 10))]])
            t.send(data[(start + half)..<(start + (64 << 10))])
            (t.sink as? FetchRetryObserving)?.fetchWillRetry()   // as the fetcher does before a retry
            t.finish()
        }, source: source)
        XCTAssertEqual(try missed.get(), Array(data[start..<(start + (64 << 10))]))

        // A read the origin fails (503 after retries), and a file it does not have.
        let failing = try read(cache.makeReader(for: info, door: .fuse), 3 << 20, 4096,
                               drive: { $0.finish(.http(status: 503, url: self.url)) }, source: source)
        XCTAssertThrowsError(try failing.get())
        let missing = "http://origin.test/media/missing.mp4"
        XCTAssertThrowsError(try open(cache, source, url: missing, failing: .http(status: 404, url: missing)).get())

        // The remote file changes: a revalidation finds another ETag.
        let changed = expectation(description: "change observed")
        cache.onRemoteChange { _ in changed.fulfill() }
        _ = try open(cache, source, maxAge: 1e-9, etag: "\"b\"")
        wait(for: [changed], timeout: 5)

        let t = cache.metrics.totals
        XCTAssertEqual(t.hits, 1)
        XCTAssertEqual(t.misses, 1)
        XCTAssertEqual(t.servedFromCache, 64 << 10)
        XCTAssertEqual(t.servedFromOrigin, 64 << 10)
        XCTAssertEqual(t.originBytes, (256 << 10) + (64 << 10) + Int64(source.transfers.last!.request.end!))
        XCTAssertEqual(t.originRequests, ["2xx": 3, "3xx": 0, "4xx": 1, "5xx": 1, "error": 0])
        XCTAssertEqual(t.retries, 1)
        XCTAssertEqual(t.remoteChanges, 1)
        XCTAssertEqual(t.errors["http_status"], 1)
        XCTAssertEqual(t.errors["not_found"], 1)

        let doc = cache.statusDocument(version: "test", showDirectory: true)
        XCTAssertEqual(doc.fetches, [])
        XCTAssertEqual(doc.cache.directory, dir)
        // The failed read and the failed open are reads that were no hit.
        XCTAssertEqual(doc.totals.failedReads, 2)
        XCTAssertEqual(doc.cache.hitRatio, 0.25)
        XCTAssertEqual(doc.errors.map(\.kind), ["not_found", "http_status"], "newest first")
        XCTAssertEqual(doc.errors.last?.status, 503)
        XCTAssertEqual(doc.errors.last?.start, 3 << 20)
        XCTAssertEqual(doc.errors.last?.end, (3 << 20) + 4095)
        XCTAssertNil(doc.errors.first?.start, "an open has no range")
        let file = try XCTUnwrap(doc.files.first { $0.url == url })
        XCTAssertEqual(file.name, "movie.mp4")
        // Reads asked by each door, answered or not (as the entry's hits and misses): the hit and
        // the failed read came through the mount, the miss through the proxy.
        XCTAssertEqual(file.reads, DoorReads(fuse: 2, proxy: 1, cli: 0))
        XCTAssertGreaterThan(file.generation, info.generation, "the version after the change")
        XCTAssertEqual(file.generation, cache.status(url: url)?.info.generation)
        XCTAssertEqual(file.etag, "\"b\"")
        XCTAssertTrue(file.errors.contains { $0.contains("HTTP 503") }, "\(file.errors)")
        XCTAssertNil(cache.statusDocument(version: "test", showDirectory: false).cache.directory)
        // The document survives its own JSON (dates to the second).
        XCTAssertEqual(try StatusDocument.decode(doc.encoded()).encoded(), doc.encoded())

        let text = export.text(for: cache)
        let samples = Self.samples(text)
        XCTAssertEqual(samples["httpcachefs_reads_total{door=\"fuse\",result=\"hit\"}"], 1)
        XCTAssertEqual(samples["httpcachefs_reads_total{door=\"proxy\",result=\"miss\"}"], 1)
        XCTAssertEqual(samples["httpcachefs_reads_total{door=\"fuse\",result=\"failed\"}"], 1)
        XCTAssertEqual(samples["httpcachefs_failed_opens_total"], 1)
        XCTAssertEqual(samples["httpcachefs_origins_down"], 0)
        XCTAssertEqual(samples["httpcachefs_served_bytes_total{door=\"fuse\",source=\"cache\"}"], 65536)
        XCTAssertEqual(samples["httpcachefs_served_bytes_total{door=\"proxy\",source=\"origin\"}"], 65536)
        XCTAssertEqual(samples["httpcachefs_origin_requests_total{class=\"2xx\"}"], 3)
        XCTAssertEqual(samples["httpcachefs_origin_requests_total{class=\"5xx\"}"], 1)
        XCTAssertEqual(samples["httpcachefs_origin_bytes_total"], Double(t.originBytes))
        XCTAssertEqual(samples["httpcachefs_origin_retries_total"], 1)
        XCTAssertEqual(samples["httpcachefs_remote_changes_total"], 1)
        XCTAssertEqual(samples["httpcachefs_errors_total{kind=\"not_found\"}"], 1)
        XCTAssertEqual(samples["httpcachefs_fuse_read_duration_seconds_count{result=\"hit\"}"], 1)
        XCTAssertEqual(samples["httpcachefs_proxy_first_byte_seconds_count{result=\"miss\"}"], 1)
        XCTAssertEqual(samples["httpcachefs_cache_used_bytes"], Double(cache.usage.bytes))
        XCTAssertEqual(samples["httpcachefs_cache_capacity_bytes"], Double(1 << 30))
        XCTAssertEqual(samples["httpcachefs_cache_entries"], 1)
        XCTAssertEqual(samples["httpcachefs_fetches_in_flight"], 0)
        // Every family has its type and help.
        let types = Self.types(text)
        XCTAssertEqual(types["httpcachefs_reads_total"], "counter")
        XCTAssertEqual(types["httpcachefs_cache_used_bytes"], "gauge")
        XCTAssertEqual(types["httpcachefs_fuse_read_duration_seconds"], "histogram")
        XCTAssertEqual(types["httpcachefs_proxy_first_byte_seconds"], "histogram")
        // (The egress budgets' families appear only with a budget: EgressBudgetStatusTests.)
        XCTAssertEqual(Set(types.keys), Set(CacheMetrics.help.keys).filter { !$0.hasPrefix("httpcachefs_egress_budget") })
        for name in types.keys { XCTAssertTrue(text.contains("# HELP \(name) "), name) }
        fuse.close()
        proxy.close()
    }

    func testEachEngineCountsAlone() throws {
        let a = try engine(GatedSource())
        defer { a.shutdown() }
        let other = dir + "-b"
        defer { try? FileManager.default.removeItem(atPath: other) }
        let exportB = PrometheusExport()
        let b = try CacheEngine(configuration: CacheConfiguration(directory: other, engineClock: .realTime), source: GatedSource(),
                                metricsFactory: exportB.factory, layers: FetchLayers.standard(probes: probes))
        defer { b.shutdown() }
        a.metrics.noteEviction(slices: 2, bytes: 100)
        XCTAssertEqual(Self.samples(export.text(for: a))["httpcachefs_evictions_total"], 2)
        XCTAssertEqual(Self.samples(export.text(for: a))["httpcachefs_evicted_bytes_total"], 100)
        XCTAssertEqual(Self.samples(exportB.text(for: b))["httpcachefs_evictions_total"], 0)
    }

    /// The status page's running transfers age by the engine's clock (which the layers are
    /// given), never the machine's: the test moves it, and nothing waits.
    func testATransfersAgeOnTheStatusPageIsTheEnginesClockSinceItStarted() throws {
        let clock = MovableClock()
        let source = GatedSource()
        var configuration = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                               sliceSize: 1 << 20, readTimeout: 10, initialReadAhead: 0, engineClock: .realTime)
        configuration.engineClock = clock.engineClock
        let cache = try CacheEngine(configuration: configuration, source: source, layers: FetchLayers.standard(probes: probes))
        defer { source.finishAll(); cache.shutdown() }
        cache.open(url: url) { _ in }
        XCTAssertEqual(source.transfers.count, 1, "the open's probe runs")
        clock.advance(30)
        let fetching = cache.statusDocument(version: "test", showDirectory: false).fetches
        XCTAssertEqual(fetching.map(\.ageSeconds), [30], "started 30 s ago by the engine's clock")
        XCTAssertEqual(cache.metrics.startedAt.distance(to: clock.now), 30)
    }

    /// `name{labels}` → value, for every sample line.
    static func samples(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            out[String(line[..<space])] = value
        }
        return out
    }

    /// Family name → type, from the `# TYPE` lines.
    static func types(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            out[String(parts[2])] = String(parts[3])
        }
        return out
    }
}
