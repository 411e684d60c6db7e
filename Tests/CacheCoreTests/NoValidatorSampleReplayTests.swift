import XCTest
@testable import CacheCore
import TestSupport

/// Issue 46, item 8, replayed step by step: a read past an uncached stretch of a file whose origin
/// names no version asks for the sample alone first; its range is asked only once the sample
/// compared equal, and never when the sample differed, failed, or was not this file.
final class NoValidatorSampleReplayTests: GatedEngineTestCase {
    /// A 206 that names no version (no ETag, no Last-Modified).
    private func plain(_ t: GatedSource.Transfer, contentType: String = "video/mp4", status: Int = 206) {
        XCTAssertTrue(t.sink.fetchDidReceiveHead(ResponseHead(status: status, finalURL: t.request.url,
                                                              bodyStart: status == 206 ? t.request.start : 0,
                                                              totalLength: length, contentType: contentType, acceptsRanges: true)))
    }

    /// Opens the file (its probe brings and caches the first 256 KiB), then reads 1 MiB at 3 MiB:
    /// the sample transfer the read started, and the read's answer.
    private func seek(_ cache: CacheEngine, _ source: GatedSource) throws -> (GatedSource.Transfer, XCTestExpectation, ResultBox<[UInt8]>) {
        let opened = expectation(description: "open")
        let info = ResultBox<EntryInfo>()
        cache.open(url: url) { info.set($0); opened.fulfill() }
        let probe = try XCTUnwrap(source.transfers.last)
        plain(probe)
        probe.send(data[Int(probe.request.start)..<Int(probe.request.end!)])
        probe.finish()
        wait(for: [opened], timeout: 5)
        cache.core.writes.waitIdle()
        XCTAssertNil(try info.get().etag)

        let reader = cache.makeReader(for: try info.get())
        let answered = expectation(description: "read")
        let box = ResultBox<[UInt8]>()
        reader.read(offset: 3 << 20, length: 1 << 20) { box.set($0); answered.fulfill() }
        XCTAssertEqual(source.transfers.count, 2, "the sample alone, before the range")
        let sample = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(sample.request.start, 0)
        XCTAssertEqual(sample.request.end, 4096)
        return (sample, answered, box)
    }

    func testTheRangeIsAskedOnlyOnceTheSampleComparedEqual() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let (sample, answered, box) = try seek(cache, source)
        plain(sample)
        sample.send(data[0..<4096])
        sample.finish()
        XCTAssertEqual(source.transfers.count, 3)
        let range = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(range.request.start, (3 << 20) - 4096)
        plain(range)
        range.send(data[Int(range.request.start)..<Int(range.request.end ?? length)])
        range.finish()
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(3 << 20, 1 << 20)))
    }

    func testASampleThatDiffersStartsANewVersionAndTheRangeIsNeverAsked() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let (sample, answered, box) = try seek(cache, source)
        plain(sample)
        var other = Array(data[0..<4096])
        other[100] ^= 0xff
        sample.send(other[...])
        sample.finish()
        wait(for: [answered], timeout: 5)
        XCTAssertThrowsError(try box.get()) { XCTAssertEqual($0 as? CacheError, .remoteChanged(url: self.url)) }
        XCTAssertEqual(source.transfers.count, 2, "the range was never asked")
        cache.core.writes.waitIdle()
        XCTAssertEqual(cache.status(url: url)?.cachedBytes ?? 0, 0, "the old version's bytes went")

        // The next open asks the origin what it has now (its version was forgotten).
        let opened = expectation(description: "open again")
        cache.open(url: url) { _ in opened.fulfill() }
        XCTAssertEqual(source.transfers.count, 3, "a probe")
        let probe = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(probe.request.start, 0)
        plain(probe)
        probe.send(data[Int(probe.request.start)..<Int(probe.request.end!)])
        probe.finish()
        wait(for: [opened], timeout: 5)
    }

    func testASampleThatFailsFailsTheReadAndKeepsTheCachedBytes() throws {
        for answer in ["network", "portal"] {
            try? FileManager.default.removeItem(atPath: dir)
            let source = GatedSource()
            let cache = try engine(source)
            let (sample, answered, box) = try seek(cache, source)
            if answer == "network" {
                sample.finish(.network(url: url, message: "connection refused"))
            } else {
                // A captive portal's login page: another media type, no version.
                XCTAssertFalse(sample.sink.fetchDidReceiveHead(ResponseHead(status: 200, finalURL: url, bodyStart: 0, totalLength: 900,
                                                                            contentType: "text/html", acceptsRanges: false)))
                sample.finish(.cancelled)
            }
            wait(for: [answered], timeout: 5)
            XCTAssertThrowsError(try box.get(), answer)
            XCTAssertEqual(source.transfers.count, 2, "\(answer): the range was never asked")
            cache.core.writes.waitIdle()
            XCTAssertEqual(cache.status(url: url)?.cachedBytes, 256 << 10, "\(answer): the cached head stays")
            cache.shutdown()
        }
    }
}
