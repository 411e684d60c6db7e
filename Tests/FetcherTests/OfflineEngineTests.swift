@testable import CacheCore
import Fetcher
import Foundation
import TestSupport
import XCTest

/// Offline mode in the engine (Fetcher's standard layers around a scripted origin that can be
/// made unreachable): the first failure marks it down; then cached bytes are served without
/// asking it, other reads fail at once (nothing reaches the origin but the probes), the status
/// document says so, and a probe that gets an answer brings it back. The probe timer runs on a
/// manual scheduler: a probe goes out when the test moves its clock, never on its own.
final class OfflineEngineTests: XCTestCase {
    private var dir: String!
    private let url = "http://origin.test/media/film.mp4"
    private let other = "http://origin.test/media/other.mp4"
    /// Where the origin-health layer's probe timers run.
    private let probes = Scheduler.manual()

    override func setUp() { dir = NSTemporaryDirectory() + "httpcachefs-offline-\(UUID().uuidString)" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    /// The scripted origin, or a refused connection for every request while `away`.
    final class AwaySource: RangeSource, @unchecked Sendable {
        let inner = ScriptedSource()
        private let lock = NSLock()
        private var away = false
        private var refused: [FetchRequest] = []

        func setAway(_ value: Bool) { lock.withLock { away = value } }
        var refusedRequests: [FetchRequest] { lock.withLock { refused } }

        func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
            let isAway: Bool = lock.withLock {
                if away { refused.append(request) }
                return away
            }
            guard isAway else { return inner.start(request, sink: sink) }
            DispatchQueue.global().async {
                sink.fetchDidFinish(.network(url: request.url, message: "Failed to connect to origin.test port 80: Connection refused"))
            }
            return ScriptedSource.Handle()
        }
    }

    private func engine(_ configuration: CacheConfiguration, _ source: RangeSource, _ log: RecordedLog) throws -> CacheEngine {
        try CacheEngine(configuration: configuration, source: source, logger: log.logger,
                        layers: FetchLayers.standard(probes: probes))
    }

    /// Moves the probe clock to the first probe (1 s after the origin went down), which sends it
    /// on this thread, and waits for the engine to say the origin is back (its "origin reachable
    /// again" notice, logged once the scripted origin's answer put the health table up). The
    /// wait is for that event; `timeout` only bounds a hang.
    private func probeAndWaitForOriginBack(_ log: RecordedLog, _ cache: CacheEngine, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(probes.pending, 1, "one probe timer set while the origin is down", file: file, line: line)
        XCTAssertFalse(log.lines.contains { $0.contains("probing origin") }, "no probe before its time", file: file, line: line)
        probes.advance(by: .seconds(1))
        XCTAssertEqual(probes.pending, 0, "the probe went out", file: file, line: line)
        XCTAssertTrue(log.wait(for: "origin reachable again", timeout: 20), "no probe found the origin back", file: file, line: line)
        XCTAssertTrue(cache.originsDown.isEmpty, "\(cache.originsDown)", file: file, line: line)
    }

    func testWhileTheOriginIsDownCachedBytesAreServedAndTheRestFailsAtOnce() async throws {
        let data = randomBytes(2 << 20, seed: 3), otherData = randomBytes(1 << 20, seed: 4)
        let source = AwaySource()
        source.inner.set(url, .init(bytes: data, etag: "\"f\""))
        source.inner.set(other, .init(bytes: otherData, etag: "\"o\""))
        // --revalidate-after 0s: every open would ask the origin.
        let log = RecordedLog()
        let cache = try engine(CacheConfiguration(directory: dir, freeSpaceFloor: 0, sliceSize: 1 << 20, revalidateAfter: 0, readTimeout: 10, engineClock: .realTime),
                               source, log)
        defer { cache.shutdown() }
        let info = try await cache.open(url: url)
        let first = try await cache.makeReader(for: info, end: 1 << 20).read(offset: 0, length: 1 << 20)
        XCTAssertEqual(first, Array(data[0..<(1 << 20)]))
        cache.core.writes.waitIdle()   // the writer lane has stored what the read brought
        XCTAssertGreaterThanOrEqual(cache.status(url: url)?.cachedBytes ?? 0, 1 << 20, "the first MiB is on disk")

        source.setAway(true)
        do {
            _ = try await cache.open(url: other)
            XCTFail("a file never cached cannot be opened while its origin is away")
        } catch let CacheError.unreachable(_, message) {
            XCTAssertTrue(message.contains("Connection refused"), message)
        }
        XCTAssertEqual(cache.originsDown.map(\.origin), ["http://origin.test"])
        XCTAssertTrue(cache.isOriginDown(url: url))
        let refusedBefore = source.refusedRequests.count

        // Cached: opened without asking (revalidation skipped), read byte for byte.
        let stale = try await cache.open(url: url)
        XCTAssertEqual(stale.generation, info.generation)
        let reader = cache.makeReader(for: stale)
        defer { reader.close() }
        let cachedBytes = try await reader.read(offset: 4096, length: 100_000)
        XCTAssertEqual(cachedBytes, Array(data[4096..<104_096]))
        // Never cached: fails at once, saying why, without a request to the origin.
        do {
            _ = try await reader.read(offset: 1_500_000, length: 1000)
            XCTFail("bytes never cached cannot be read while the origin is down")
        } catch let CacheError.unreachable(_, message) {
            XCTAssertTrue(message.contains("is down"), message)
        }
        XCTAssertEqual(source.refusedRequests.count, refusedBefore,
                       "nothing reaches an origin that is down before its probe is due: \(source.refusedRequests)")

        let doc = cache.statusDocument(version: "test", showDirectory: false)
        let down = try XCTUnwrap(doc.originsDown?.first)
        XCTAssertEqual(down.origin, "http://origin.test")
        XCTAssertTrue(down.lastError.contains("Connection refused"), down.lastError)
        XCTAssertEqual(doc.totals.failedReads, 2, "the failed open and the failed read")
        XCTAssertEqual(doc.cache.hitRatio, 1.0 / 4.0, "one hit among a miss, a failed open and a failed read")

        source.setAway(false)
        probeAndWaitForOriginBack(log, cache)
        let late = try await reader.read(offset: 1_500_000, length: 1000)
        XCTAssertEqual(late, Array(data[1_500_000..<1_501_000]))
        let otherInfo = try await cache.open(url: other)
        XCTAssertEqual(otherInfo.length, Int64(otherData.count))
    }

    /// One URL that stalls (a timeout) while the origin answers others: the probe asks the last
    /// URL that was answered, not the stalling one, so the origin comes back at the first probe.
    func testTheProbeAsksAURLTheOriginAnsweredNotTheOneThatStalled() async throws {
        let hang = "http://origin.test/media/hangs.mp4"
        final class StallingSource: RangeSource, @unchecked Sendable {
            let inner = ScriptedSource()
            let stalls: String
            private let lock = NSLock()
            private var asked: [FetchRequest] = []
            init(stalls: String) { self.stalls = stalls }
            var requests: [FetchRequest] { lock.withLock { asked } }
            func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
                lock.withLock { asked.append(request) }
                guard request.url == stalls else { return inner.start(request, sink: sink) }
                DispatchQueue.global().async { sink.fetchDidFinish(.timeout(url: request.url)) }
                return ScriptedSource.Handle()
            }
        }
        let source = StallingSource(stalls: hang)
        source.inner.set(url, .init(bytes: randomBytes(1000, seed: 6), etag: "\"f\""))
        let log = RecordedLog()
        let cache = try engine(CacheConfiguration(directory: dir, freeSpaceFloor: 0, readTimeout: 10, engineClock: .realTime), source, log)
        defer { cache.shutdown() }
        _ = try await cache.open(url: url)
        await XCTAssertThrowsErrorAsync(try await cache.open(url: hang))
        XCTAssertEqual(cache.originsDown.count, 1, "a stall counts as the origin away")
        let asked = source.requests.count
        probeAndWaitForOriginBack(log, cache)
        let probes = source.requests.dropFirst(asked)
        XCTAssertEqual(probes.map(\.url), [url], "one probe, of the URL that was answered")
    }

    func testAnyAnswerBringsItBackAndItSaysSoOnce() async throws {
        let source = AwaySource()
        source.inner.set(url, .init(bytes: randomBytes(1000, seed: 5), etag: "\"f\""))
        let log = RecordedLog()
        let cache = try engine(CacheConfiguration(directory: dir, freeSpaceFloor: 0, readTimeout: 10, engineClock: .realTime), source, log)
        defer { cache.shutdown() }
        source.setAway(true)
        await XCTAssertThrowsErrorAsync(try await cache.open(url: url))
        XCTAssertEqual(cache.originsDown.count, 1)
        source.setAway(false)
        probeAndWaitForOriginBack(log, cache)
        let back = try await cache.open(url: url)
        XCTAssertEqual(back.length, 1000)
        XCTAssertEqual(cache.statusDocument(version: "t", showDirectory: false).originsDown, [])
    }
}

func XCTAssertThrowsErrorAsync<T>(_ body: @autoclosure () async throws -> T, file: StaticString = #filePath, line: UInt = #line) async {
    do {
        _ = try await body()
        XCTFail("no error thrown", file: file, line: line)
    } catch {}
}
