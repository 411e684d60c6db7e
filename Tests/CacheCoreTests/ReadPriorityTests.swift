import XCTest
@testable import CacheCore
import TestSupport

/// The engine tells each transfer its class: a transfer a read waits on is `.waiting` until the
/// read is answered, read-ahead is `.far` (or `.near` for a copy), a warm-up's is `.preload`
/// even while the warm-up waits. Replayed step by step on a `GatedSource`.
final class ReadPriorityTests: GatedEngineTestCase {
    let chunk: Int64 = 64 << 10
    let at: Int64 = 1 << 20

    private func engine(_ source: GatedSource) throws -> CacheEngine {
        let configuration = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20,
                                               readTimeout: 10, initialReadAhead: 256 << 10, maxStreams: 1, engineClock: .realTime)
        return try CacheEngine(configuration: configuration, source: source)
    }

    private func read(_ reader: CacheReader, _ offset: Int64, _ answered: XCTestExpectation) -> ResultBox<[UInt8]> {
        let box = ResultBox<[UInt8]>()
        reader.read(offset: offset, length: Int(chunk)) { box.set($0); answered.fulfill() }
        return box
    }

    func testATransferIsWaitingWhileItsReadWaitsThenReadAhead() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let answered = expectation(description: "read")
        let box = read(cache.makeReader(for: info), at, answered)
        let t = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(t.request.priority, .waiting, "a read waits on its first bytes")
        XCTAssertGreaterThan(t.request.end!, at + chunk, "and it reads ahead")
        t.partial(length: length)
        _ = t.offer(bytes(at, chunk))
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(at, chunk)))
        XCTAssertEqual(t.priorities, [.far], "the rest is read-ahead of a reader not yet known to be a copy")
        t.finish()
    }

    func testAReadThatWaitsOnReadAheadMakesItWaiting() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let first = expectation(description: "first read")
        _ = read(cache.makeReader(for: info), at, first)
        let t = try XCTUnwrap(source.transfers.last)
        t.partial(length: length)
        _ = t.offer(bytes(at, chunk))
        wait(for: [first], timeout: 5)

        let second = expectation(description: "another reader's read")
        let box = read(cache.makeReader(for: info), at + 2 * chunk, second)
        XCTAssertFalse(source.transfers.contains { $0.request.start == at + 2 * chunk },
                       "it waits for the running transfer (single flight)")
        XCTAssertEqual(t.priorities, [.far, .waiting])
        _ = t.offer(bytes(at + chunk, 2 * chunk))
        wait(for: [second], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(at + 2 * chunk, chunk)))
        XCTAssertEqual(t.priorities, [.far, .waiting, .far])
        t.finish()
    }

    func testASeekStopsTheReadAheadItLeftBehindAtOnceThoughItReceivesNothing() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info)
        let first = expectation(description: "first read")
        _ = read(reader, at, first)
        let t = try XCTUnwrap(source.transfers.last)
        t.partial(length: length)
        _ = t.offer(bytes(at, chunk))
        wait(for: [first], timeout: 5)
        // Its read-ahead now gets no bytes (held for another read, or a slow link), so it never
        // reaches a point where it could notice nobody wants it.
        let second = expectation(description: "the read after the seek")
        let box = read(reader, 3 << 20, second)
        XCTAssertTrue(t.isCancelled, "stopped by the seek itself, not at bytes that may not come")
        let t2 = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(t2.request.start, 3 << 20)
        t2.partial(length: length)
        _ = t2.offer(bytes(3 << 20, chunk))
        wait(for: [second], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(3 << 20, chunk)))
        t.finish(.cancelled)
        t2.finish()
    }

    func testAWarmUpStaysInTheLowestClassWhileItWaits() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let answered = expectation(description: "read")
        _ = read(cache.makeReader(for: info, background: true), at, answered)
        let t = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(t.request.priority, .preload)
        t.partial(length: length)
        _ = t.offer(bytes(at, chunk))
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(t.priorities, [])
        t.finish()
    }

    func testAClosedReadersWaitNoLongerCounts() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info)
        let failed = expectation(description: "read cancelled")
        _ = read(reader, at, failed)
        let t = try XCTUnwrap(source.transfers.last)
        let other = cache.makeReader(for: info)
        let otherDone = expectation(description: "other read cancelled")
        _ = read(other, at + 4 * chunk, otherDone)   // waits on the same transfer, for later bytes
        XCTAssertFalse(source.transfers.contains { $0.request.start == at + 4 * chunk }, "it waits on the same transfer")
        reader.close()
        wait(for: [failed], timeout: 5)
        XCTAssertEqual(t.priorities, [.waiting], "the other reader still waits on it, since later")
        other.close()
        wait(for: [otherDone], timeout: 5)
        XCTAssertEqual(t.priorities, [.waiting, .far])
        t.finish(.cancelled)
    }

    func testReadAheadIsCountedAndSoIsWhatOfItIsRead() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let metrics = cache.core.metrics
        let before = metrics.readAheadBytes.total   // the probe's first bytes, fetched before any read
        let first = expectation(description: "read")
        _ = read(cache.makeReader(for: info), at, first)
        let t = try XCTUnwrap(source.transfers.last)
        t.partial(length: length)
        _ = t.offer(bytes(at, chunk + (256 << 10)))
        wait(for: [first], timeout: 5)
        XCTAssertEqual(metrics.readAheadBytes.total - before, 256 << 10, "what came past the waiting read")
        XCTAssertEqual(metrics.readAheadReadBytes.total, 0)
        let second = expectation(description: "a read of read-ahead")
        _ = read(cache.makeReader(for: info), at + 2 * chunk, second)
        wait(for: [second], timeout: 5)
        XCTAssertEqual(metrics.readAheadReadBytes.total, chunk)
        XCTAssertEqual(metrics.readAheadBytes.total - before, 256 << 10, "a hit fetches nothing")
    }
}

/// One timeout per read: the kernel's retry of a read-ahead that timed out fails at once. On the
/// engine's injected clock, a manual scheduler the test advances: the sweeper's tick runs on it,
/// so a read fails when that clock passes its deadline (the table is
/// `EntryStateMachineReadTests.testTick`).
final class ReadTimeoutRetryTests: GatedEngineTestCase {
    func testTheSameReadersRetryOfATimedOutReadFailsAtOnceAndAnotherReaderWaits() throws {
        let source = GatedSource()
        let time = Scheduler.manual()
        var configuration = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0,
                                               sliceSize: 1 << 20, readTimeout: 10, initialReadAhead: 0, engineClock: .manual(time))
        let cache = try CacheEngine(configuration: configuration, source: source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info)
        let timedOut = expectation(description: "first read times out")
        let first = ResultBox<[UInt8]>()
        reader.read(offset: 1 << 20, length: 65536) { first.set($0); timedOut.fulfill() }
        time.advance(by: .seconds(9))
        XCTAssertEqual(waiting(cache), 1, "within the read timeout (10 s) it waits")
        time.advance(by: .seconds(1))
        wait(for: [timedOut], timeout: 5)
        XCTAssertThrowsError(try first.get())

        let retried = expectation(description: "the retry fails without waiting")
        let retry = ResultBox<[UInt8]>()
        reader.read(offset: (1 << 20) + 4096, length: 4096) { retry.set($0); retried.fulfill() }
        wait(for: [retried], timeout: 5)
        XCTAssertThrowsError(try retry.get()) { XCTAssertEqual($0 as? CacheError, .timeout(url: self.url)) }

        let otherReader = cache.makeReader(for: info)
        let cancelled = expectation(description: "another open's read, cancelled at its close")
        otherReader.read(offset: 1 << 20, length: 4096) { _ in cancelled.fulfill() }
        XCTAssertEqual(waiting(cache), 1, "another open's read waits for the bytes, as any read does")

        // Past the retry window the same reader's read waits again.
        time.advance(by: EntryReads.retryWindow + .seconds(1))
        let later = expectation(description: "a read after the window, cancelled at its close")
        reader.read(offset: (1 << 20) + 8192, length: 4096) { _ in later.fulfill() }
        XCTAssertEqual(waiting(cache), 2)
        otherReader.close()
        reader.close()
        wait(for: [cancelled, later], timeout: 5)
    }

    private func waiting(_ cache: CacheEngine) -> Int {
        var waiting = 0
        for shard in cache.core.shards { shard.locked { for e in $0.all { waiting += e.waiters.count } } }
        return waiting
    }
}
