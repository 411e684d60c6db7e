import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// The cache core and the libcurl fetcher together, against the loopback origin: every test reads
/// bytes and compares them with the origin's, and checks in the origin's log what was fetched.
final class CacheOverHTTPTests: XCTestCase {
    var origin: OriginServer!
    var temp: TemporaryDirectory!
    var source: CurlRangeSource!

    override func setUpWithError() throws {
        origin = try OriginServer()
        temp = TemporaryDirectory(prefix: "httpcachefs-e2e")
        source = CurlRangeSource(configuration: FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs/test", lowSpeedTime: 5,
                                                                     maxRetries: 3, retryBaseDelay: 0.05),
                                 logger: Logger(label: "test"))
    }

    override func tearDown() {
        source.shutdown()
        origin.stop()
        temp.remove()
    }

    func makeCache(readAhead: Int64 = 1 << 20, maxReadAhead: Int64? = nil, revalidateAfter: TimeInterval = 600,
                   capacity: Int64 = 1 << 30, readTimeout: TimeInterval = 20) throws -> CacheEngine {
        try CacheEngine(configuration: CacheConfiguration(directory: temp.appending("cache"), capacity: capacity,
                                                          freeSpaceFloor: 0, sliceSize: 1 << 20,
                                                          revalidateAfter: revalidateAfter, readTimeout: readTimeout,
                                                          initialReadAhead: readAhead, maxReadAhead: maxReadAhead ?? max(readAhead, 8 << 20), engineClock: .realTime),
                        source: source, layers: FetchLayers.standard())
    }

    func expected(_ seed: UInt64, _ range: Range<Int64>) -> [UInt8] {
        OriginServer.generatedBytes(seed: seed, offset: range.lowerBound, count: Int(range.length))
    }

    /// Ranges the origin served for `path`, as "a-b" strings, in order.
    func servedRanges(_ path: String) -> [String] {
        origin.requests.filter { $0.pathWithoutQuery == path }.map { $0.range.map { String($0.dropFirst(6)) } ?? "all" }
    }

    func testTheDesignExampleFetchesOnlyWhatIsMissing() async throws {
        origin.setGeneratedFile("/example.bin", length: 4 << 20, seed: 1)
        let cache = try makeCache(readAhead: 0)
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/example.bin"))
        let base: Int64 = 2 << 20   // past what the open took along
        let warmup = cache.makeReader(for: info)
        _ = try await warmup.read(offset: base + 200, length: 300)
        _ = try await cache.makeReader(for: info).read(offset: base + 700, length: 100)
        origin.resetLog()

        let bytes = try await cache.makeReader(for: info).read(offset: base, length: 1000)

        XCTAssertTrue(bytes == expected(1, base..<(base + 1000)), "wrong bytes")
        let b = base
        XCTAssertEqual(Set(servedRanges("/example.bin")),
                       ["\(b)-\(b + 199)", "\(b + 500)-\(b + 699)", "\(b + 800)-\(b + 999)"],
                       "cached bytes were requested again")
    }

    func testRandomRangesOfALargeFileAreByteExact() async throws {
        let length: Int64 = 48 << 20
        origin.setGeneratedFile("/large.bin", length: length, seed: 2)
        let cache = try makeCache()
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/large.bin"))
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<120 {
            let start = Int64.random(in: 0..<length, using: &rng)
            let count = Int.random(in: 1...(300 << 10), using: &rng)
            let reader = cache.makeReader(for: info)
            let got = try await reader.read(offset: start, length: count)
            reader.close()
            let end = min(length, start + Int64(count))
            XCTAssertTrue(got == expected(2, start..<end), "wrong bytes at \(start)+\(count)")
        }
    }

    func testConcurrentReadersOfOneColdFileDownloadItOnce() async throws {
        let length: Int64 = 24 << 20
        origin.setGeneratedFile("/shared.bin", length: length, seed: 3)
        let cache = try makeCache()
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/shared.bin"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let reader = cache.makeReader(for: info)
                    defer { reader.close() }
                    var offset: Int64 = 0
                    while offset < length {
                        let chunk = try await reader.read(offset: offset, length: 256 << 10)
                        XCTAssertFalse(chunk.isEmpty)
                        XCTAssertTrue(chunk == OriginServer.generatedBytes(seed: 3, offset: offset, count: chunk.count))
                        offset += Int64(chunk.count)
                    }
                }
            }
            try await group.waitForAll()
        }
        let ratio = Double(origin.bytesServed(path: "/shared.bin")) / Double(length)
        print("origin bytes / file size with 8 concurrent cold readers: \(ratio)")
        XCTAssertLessThanOrEqual(ratio, 1.05)
    }

    func testAChangedRemoteFileIsNeverMixed() async throws {
        origin.setGeneratedFile("/changing.bin", length: 6 << 20, seed: 4)
        let cache = try makeCache(revalidateAfter: 0)
        defer { cache.shutdown() }
        let v1 = try await cache.open(url: origin.url("/changing.bin"))
        _ = try await cache.makeReader(for: v1).read(offset: 0, length: 3 << 20)   // half of v1 cached
        origin.setGeneratedFile("/changing.bin", length: 6 << 20, seed: 5)           // same size, new bytes
        let v2 = try await cache.open(url: origin.url("/changing.bin"))
        XCTAssertNotEqual(v1.etag, v2.etag, "\(origin.requests.map { "\($0.range ?? "-") \($0.ifRange ?? "-") \($0.status)" })")
        let all = try await cache.makeReader(for: v2).read(offset: 0, length: 6 << 20)
        XCTAssertTrue(all == expected(5, 0..<(6 << 20)), "old and new bytes mixed")
    }

    func testAChangeDiscoveredByARangeFetchIsNeverMixed() async throws {
        origin.setGeneratedFile("/swap.bin", length: 6 << 20, seed: 6)
        let cache = try makeCache(readAhead: 0)
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/swap.bin"))
        _ = try await cache.makeReader(for: info).read(offset: 0, length: 1 << 20)
        origin.setGeneratedFile("/swap.bin", length: 6 << 20, seed: 7)
        // No revalidation: the next range fetch carries If-Range, the origin answers 200. The
        // reader is bound to the version it was made for: it gets an error, not the new bytes.
        let reader = cache.makeReader(for: info)
        do {
            let got = try await reader.read(offset: (1 << 20) - 1000, length: 2000)
            XCTFail("a reader of the old version got \(got.count) bytes of another version")
        } catch let error as CacheError {
            XCTAssertEqual(error, .remoteChanged(url: origin.url("/swap.bin")))
        }
        let now = try XCTUnwrap(cache.cachedInfo(url: origin.url("/swap.bin")))
        XCTAssertGreaterThan(now.generation, info.generation)
        // A reader of the new version reads the new bytes, and only them.
        let got = try await cache.makeReader(for: now).read(offset: (1 << 20) - 1000, length: 2000)
        XCTAssertTrue(got == expected(7, ((1 << 20) - 1000)..<((1 << 20) + 1000)), "a read mixed two versions")
    }

    func testAFlakyCDNThatSometimesAnswersARangeWithTheWholeFileCostsNoFullDownloads() async throws {
        let length: Int64 = 64 << 20
        origin.setGeneratedFile("/flaky.bin", length: length, seed: 41)
        // One range request in four gets 200 and the whole file (the first one included: the
        // probe answers for an origin that says it serves ranges).
        origin.setFaults("/flaky.bin", Faults(ignoreRangeEvery: 4))
        let cache = try makeCache(readAhead: 64 << 10)
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/flaky.bin"))
        var rng = SystemRandomNumberGenerator()
        var asked: Int64 = 0
        for i in 0..<24 {
            let reader = cache.makeReader(for: info)
            let offset = Int64(i) * (length / 24) + Int64.random(in: 0..<(1 << 20), using: &rng)
            let got = try await reader.read(offset: offset, length: 64 << 10)
            XCTAssertTrue(got == expected(41, offset..<(offset + Int64(got.count))), "bytes at \(offset)")
            asked += Int64(got.count)
            reader.close()
        }
        // Each 200 is retried as a passing fault, never taken as "stream the whole file again":
        // the origin sends what was asked (plus read-ahead and what a retried 200 pushed into the
        // socket before it was cut), far from the 24 whole files of a verdict per 200.
        let served = origin.bytesServed(path: "/flaky.bin")
        XCTAssertLessThan(served, length, "origin bytes \(served) for \(asked) asked")
        XCTAssertTrue(cache.cachedInfo(url: origin.url("/flaky.bin"))?.acceptsRanges ?? false, "the origin still serves ranges")
    }

    /// Random reads behind a link with a round trip (as a CDN is): with one range request in ten
    /// answered 200, the origin sends at most 1.5 times the bytes of the same reads without the
    /// fault (each 200 is cut once its head is read; what the origin pushed meanwhile is one round
    /// trip of bytes). Counted in bytes, not time.
    func testAFlakyCDNCostsAtMostHalfAsManyBytesAgainBehindALink() async throws {
        let length: Int64 = 256 << 20
        var rng = SystemRandomNumberGenerator()
        let offsets = (0..<40).map { _ in Int64.random(in: 0...(length - (64 << 10)), using: &rng) }
        var served: [Int64] = []
        for faults in [Faults(), Faults(ignoreRangeEvery: 10)] {
            let path = "/cdn-\(served.count).bin"
            origin.setGeneratedFile(path, length: length, seed: 43)
            origin.setFaults(path, faults)
            origin.emulateLink(.milliseconds(5, perConnectionMbit: 200, sharedMbit: 0))
            let cache = try makeCache(readAhead: 256 << 10)
            let info = try await cache.open(url: origin.url(path))
            for offset in offsets {
                let reader = cache.makeReader(for: info)
                let got = try await reader.read(offset: offset, length: 64 << 10)
                reader.close()
                XCTAssertTrue(got == expected(43, offset..<(offset + Int64(got.count))), "bytes at \(offset)")
            }
            cache.shutdown()
            try FileManager.default.removeItem(atPath: temp.appending("cache"))
            served.append(origin.bytesServed(path: path))
        }
        origin.emulateLink(nil)
        XCTAssertLessThanOrEqual(Double(served[1]), 1.5 * Double(served[0]), "origin bytes with the fault \(served[1]), without \(served[0])")
    }

    /// A 200 to a range near the start of the file is read up to the range and used (its lead
    /// dropped) rather than cut and asked again: no range is asked twice, the bytes are right, and
    /// the origin is still believed to serve ranges.
    func testA200ToARangeNearTheStartIsUsedNotAskedAgain() async throws {
        let length: Int64 = 16 << 20
        origin.setGeneratedFile("/near.bin", length: length, seed: 44)
        let cache = try makeCache(readAhead: 0)
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/near.bin"))
        origin.setFaults("/near.bin", Faults(ignoreRangeEvery: 1))   // every range request from now on
        origin.resetLog()
        for offset: Int64 in [300 << 10, 1 << 20, (3 << 19) + 12345] {
            let reader = cache.makeReader(for: info)
            let got = try await reader.read(offset: offset, length: 64 << 10)
            reader.close()
            XCTAssertTrue(got == expected(44, offset..<(offset + Int64(got.count))), "bytes at \(offset)")
        }
        let ranges = origin.requests.compactMap(\.range)
        XCTAssertEqual(Set(ranges).count, ranges.count, "a range was asked again: \(ranges)")
        XCTAssertEqual(origin.requests.map(\.status), Array(repeating: 200, count: origin.requests.count))
        XCTAssertTrue(cache.cachedInfo(url: origin.url("/near.bin"))?.acceptsRanges ?? false, "the origin still serves ranges")
    }

    func testImperfectServersStillServeTheRightBytes() async throws {
        let cases: [(String, Faults)] = [
            ("/dropped.bin", Faults(dropAfterBytes: 300_000, dropCount: 2)),
            ("/norange.bin", Faults(ignoreRange: true, noAcceptRanges: true)),
            ("/chunked.bin", Faults(noContentLength: true)),
            ("/flaky.bin", Faults(status: 500, statusCount: 2)),
            ("/busy.bin", Faults(status: 429, statusCount: 1, retryAfter: 1)),
        ]
        for (i, (path, faults)) in cases.enumerated() {
            let length: Int64 = 3 << 20
            origin.setGeneratedFile(path, length: length, seed: UInt64(20 + i))
            origin.setFaults(path, faults)
            let cache = try makeCache()
            let info = try await cache.open(url: origin.url(path))
            XCTAssertEqual(info.length, length, path)
            let got = try await cache.makeReader(for: info).read(offset: 1 << 20, length: 1 << 20)
            XCTAssertTrue(got == expected(UInt64(20 + i), (1 << 20)..<(2 << 20)), "wrong bytes for \(path)")
            cache.shutdown()
            try FileManager.default.removeItem(atPath: temp.appending("cache"))
        }
    }

    /// A page that names no version and no length (nginx's autoindex: chunked, no ETag, no
    /// Last-Modified) and changed: its revalidation was taken as the same version, the new bytes
    /// were written over the cached ones under the old length, and a listing that grew was read
    /// cut at the old length (`refresh` never showed a new file; one that shrank kept the old
    /// tail). Each answer is now a version of its own, read whole.
    func testAPageWithNoVersionAndNoLengthIsReadWholeAfterItChanges() async throws {
        let short = Array("<a href=\"a.bin\">a.bin</a>\n".utf8)
        let long = Array("<a href=\"a.bin\">a.bin</a>\n<a href=\"b.bin\">b.bin</a>\n<a href=\"c.bin\">c.bin</a>\n".utf8)
        origin.setFaults("/dir/", Faults(noContentLength: true))
        let cache = try makeCache(revalidateAfter: 0)
        defer { cache.shutdown() }
        for page in [short, long, short] {
            origin.setResponse("/dir/", status: 200, headers: [("Content-Type", "text/html")], body: page)
            let info = try await cache.open(url: origin.url("/dir/"))
            XCTAssertEqual(info.length, Int64(page.count))
            let got = try await cache.makeReader(for: info).read(offset: 0, length: page.count)
            XCTAssertEqual(String(decoding: got, as: UTF8.self), String(decoding: page, as: UTF8.self))
        }
    }

    /// An origin that answers without a length and never ends its body (an internet radio
    /// station, a hostile origin): the open waited for that end forever, and the transfer went
    /// on filling the cache up to its cap, evicting every other file. It now stops at half the
    /// capacity, the open fails saying why, and the other file keeps its bytes.
    func testAnEndlessBodyWithoutALengthStopsAtHalfTheCapacity() async throws {
        origin.setGeneratedFile("/kept.bin", length: 2 << 20, seed: 40)
        origin.setGeneratedFile("/radio.mp3", length: 1 << 40, seed: 41)
        origin.setFaults("/radio.mp3", Faults(ignoreRange: true, noAcceptRanges: true, noContentLength: true))
        let cache = try makeCache(capacity: 16 << 20)
        defer { cache.shutdown() }
        let kept = try await cache.open(url: origin.url("/kept.bin"))
        _ = try await cache.makeReader(for: kept).read(offset: 0, length: 2 << 20)
        do {
            let info = try await cache.open(url: origin.url("/radio.mp3"))
            XCTFail("an endless body opened: \(info)")
        } catch let error as CacheError {
            XCTAssertTrue("\(error)".contains("endless stream"), "\(error)")
        }
        XCTAssertLessThanOrEqual(cache.status(url: origin.url("/radio.mp3"))?.cachedBytes ?? 0, 8 << 20)
        XCTAssertEqual(cache.status(url: origin.url("/kept.bin"))?.cachedBytes, 2 << 20, "the other file keeps its bytes")
        let again = try await cache.makeReader(for: kept).read(offset: 0, length: 2 << 20)
        XCTAssertTrue(again == expected(40, 0..<(2 << 20)))
    }

    /// An open that reads its body whole up to a limit (a directory listing: 64 MiB) stops an
    /// endless body there, not at half the cache's capacity: the helper's endless `--index`
    /// listing went on to 1.5 GB while every `ls` failed.
    func testAnEndlessBodyOpenedWithALimitStopsAtThatLimit() throws {
        origin.setGeneratedFile("/endless-listing/", length: 1 << 40, seed: 43)
        origin.setFaults("/endless-listing/", Faults(ignoreRange: true, noAcceptRanges: true, noContentLength: true))
        let cache = try makeCache(capacity: 1 << 30)
        defer { cache.shutdown() }
        let answered = expectation(description: "open")
        let box = Locked<Result<EntryInfo, CacheError>?>(nil)
        cache.open(url: origin.url("/endless-listing/"), maxAge: 0, unknownLengthLimit: 1 << 20) { box.value = $0; answered.fulfill() }
        wait(for: [answered], timeout: 30)
        guard case let .failure(error)? = box.value else { return XCTFail("an endless body opened: \(String(describing: box.value))") }
        XCTAssertTrue("\(error)".contains("no end after 1048576 bytes, the most its reader takes"), "\(error)")
        XCTAssertLessThanOrEqual(cache.status(url: origin.url("/endless-listing/"))?.cachedBytes ?? 0, 1 << 20)
    }

    /// The same origin trickling: the body never reaches the limit soon, and libcurl sees
    /// progress, so nothing ended the open; a `stat` in the mount hung in the kernel. An open
    /// now waits at most the read timeout, as a read does.
    func testAnOpenWaitingForABodyWithoutALengthFailsAfterTheReadTimeout() async throws {
        origin.setGeneratedFile("/trickle.mp3", length: 1 << 40, seed: 42)
        origin.setFaults("/trickle.mp3", Faults(ignoreRange: true, noAcceptRanges: true, noContentLength: true, bytesPerSecond: 20_000))
        let cache = try makeCache(capacity: 1 << 30, readTimeout: 1)
        defer { cache.shutdown() }
        do {
            let info = try await cache.open(url: origin.url("/trickle.mp3"))
            XCTFail("a body without an end opened: \(info)")
        } catch let error as CacheError {
            XCTAssertEqual(error, .timeout(url: origin.url("/trickle.mp3")))
        }
    }

    func testARedirectKeepsTheOriginalKeyAndRemembersTheFinalURL() async throws {
        origin.setGeneratedFile("/real.bin", length: 100_000, seed: 8)
        origin.setFaults("/alias.bin", Faults(redirectTo: "/real.bin"))
        let cache = try makeCache()
        defer { cache.shutdown() }
        let info = try await cache.open(url: origin.url("/alias.bin"))
        XCTAssertEqual(info.url, origin.url("/alias.bin"))
        XCTAssertEqual(info.finalURL, origin.url("/real.bin"))
        let got = try await cache.makeReader(for: info).read(offset: 0, length: 100_000)
        XCTAssertTrue(got == expected(8, 0..<100_000))
    }

    func testErrorStatusesAreTypedAndNothingIsCached() async throws {
        origin.setResponse("/secret.bin", status: 403, headers: [], body: Array("nope".utf8))
        let cache = try makeCache()
        defer { cache.shutdown() }
        for (path, want) in [("/missing.bin", CacheError.notFound(url: origin.url("/missing.bin"), status: 404)),
                             ("/secret.bin", CacheError.forbidden(url: origin.url("/secret.bin"), status: 403))] {
            do {
                _ = try await cache.open(url: origin.url(path))
                XCTFail("\(path) opened")
            } catch let e as CacheError {
                XCTAssertEqual(e, want)
            }
        }
        XCTAssertEqual(cache.list().count, 0, "an error body was cached")
        origin.stop()
        do {
            _ = try await cache.open(url: "http://127.0.0.1:1/nothing-listens-here.bin")
            XCTFail("opened an unreachable URL")
        } catch let e as CacheError {
            guard case .unreachable = e else { return XCTFail("\(e)") }
        }
    }

    func testRotatingQueryTokensShareOneEntry() async throws {
        origin.setGeneratedFile("/tok.bin", length: 2 << 20, seed: 9)
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: temp.appending("cache"), freeSpaceFloor: 0,
                                                                     keyRules: KeyRules(ignoredQueryNames: ["token"]), engineClock: .realTime),
                                    source: source, layers: FetchLayers.standard())
        defer { cache.shutdown() }
        let a = try await cache.open(url: origin.url("/tok.bin?token=1"))
        _ = try await cache.makeReader(for: a).read(offset: 0, length: 2 << 20)
        origin.resetLog()
        let b = try await cache.open(url: origin.url("/tok.bin?token=2"))
        XCTAssertEqual(a.key, b.key)
        let got = try await cache.makeReader(for: b).read(offset: 0, length: 2 << 20)
        XCTAssertTrue(got == expected(9, 0..<(2 << 20)))
        XCTAssertEqual(origin.bytesServed(path: "/tok.bin"), 0)
    }

    func testTheCapHoldsUnderConcurrentLoad() async throws {
        let cap: Int64 = 8 << 20
        let cache = try makeCache(capacity: cap)
        defer { cache.shutdown() }
        for i in 0..<8 { origin.setGeneratedFile("/f\(i).bin", length: 4 << 20, seed: UInt64(40 + i)) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask { [origin] in
                    let info = try await cache.open(url: origin!.url("/f\(i).bin"))
                    let r = cache.makeReader(for: info)
                    defer { r.close() }
                    let got = try await r.read(offset: 0, length: 4 << 20)
                    XCTAssertTrue(got == OriginServer.generatedBytes(seed: UInt64(40 + i), offset: 0, count: 4 << 20))
                }
            }
            try await group.waitForAll()
        }
        // Cap plus the slices that were being written when it was reached.
        XCTAssertLessThanOrEqual(cache.usage.bytes, cap + 8 * (1 << 20))
        XCTAssertEqual(cache.verify().problems, [])
    }
}
