import XCTest
@testable import CacheCore
import TestSupport

/// The writer off the fetch thread: arriving bytes wait in a bounded queue for the disk, a
/// transfer whose share is queued pauses until the writer drained, and bytes waiting for the
/// writer are served from memory. Each test holds the writer (`holdWrites`) to replay one exact
/// moment between arrival and the disk write.
final class EngineWriterTests: GatedEngineTestCase {
    private let at: Int64 = 1 << 20
    private let chunk: Int64 = 64 << 10

    /// Starts a read of `count` bytes at `offset` and returns the transfer it started.
    private func startRead(_ cache: CacheEngine, _ source: GatedSource, _ info: EntryInfo, offset: Int64, count: Int64,
                           into box: ResultBox<[UInt8]>, _ answered: XCTestExpectation) throws -> GatedSource.Transfer {
        let before = source.transfers.count
        cache.makeReader(for: info).read(offset: offset, length: Int(count)) { box.set($0); answered.fulfill() }
        XCTAssertEqual(source.transfers.count, before + 1, "the read started a transfer")
        let transfer = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(transfer.request.start, offset)
        XCTAssertTrue(transfer.partial(length: length))
        return transfer
    }

    func testATransferWhoseShareIsQueuedPausesAndTheDrainedWriterResumesIt() throws {
        let source = GatedSource()
        let cache = try engine(source, writeBudget: (total: 1 << 20, perTransfer: 2 * chunk))
        defer { cache.shutdown() }
        let info = try open(cache, source)
        cache.core.writes.holdWrites()
        let box = ResultBox<[UInt8]>(), answered = expectation(description: "read")
        let t = try startRead(cache, source, info, offset: at, count: 4 * chunk, into: box, answered)

        XCTAssertEqual(t.offer(bytes(at, chunk)), .proceed)
        XCTAssertEqual(t.offer(bytes(at + chunk, chunk)), .proceed)
        XCTAssertEqual(t.offer(bytes(at + 2 * chunk, chunk)), .pause, "its share waits for the disk: it pauses")
        XCTAssertEqual(cache.core.memory.usage.queued, 2 * chunk, "the paused chunk took no room")
        XCTAssertEqual(t.resumeCount, 0)

        cache.core.writes.releaseWrites()
        cache.core.writes.waitIdle()
        XCTAssertEqual(t.resumeCount, 1, "the writer drained and resumed it")
        XCTAssertEqual(t.offer(bytes(at + 2 * chunk, chunk)), .proceed, "the same bytes are taken now")
        _ = t.offer(bytes(at + 3 * chunk, chunk))
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(at, 4 * chunk)))
        t.finish()
        cache.core.writes.waitIdle()
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10), at..<(at + 4 * chunk)])
        XCTAssertEqual(cache.core.memory.usage.queued, 0)
    }

    func testTheBytesOfOneTurnOfTheSourceShareABufferAndOneWriteOnceItDrains() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        let writes = Counter()
        cache.core.testHook = { if case .sinkWillWrite = $0 { writes.increment() } }
        let piece: Int64 = 16 << 10   // what libcurl hands over at a time
        let box = ResultBox<[UInt8]>(), answered = expectation(description: "read")
        let t = try startRead(cache, source, info, offset: at - 8 * piece, count: 12 * piece, into: box, answered)
        // A first turn of 128 KiB: buffers grow to the size of the transfer's turns.
        for i in 0..<8 { _ = t.offer(bytes(at - Int64(8 - i) * piece, piece), more: i < 7) }
        cache.core.writes.waitIdle()
        XCTAssertEqual(cache.core.memory.usage.queued, 0)
        writes.reset()
        for i in 0..<3 { XCTAssertEqual(t.offer(bytes(at + Int64(i) * piece, piece), more: true), .proceed) }
        XCTAssertEqual(cache.core.memory.usage.queued, Int64(EntrySink.batchCapacity), "one buffer holds them")
        cache.core.writes.waitIdle()
        XCTAssertEqual(writes.value, 0, "nothing goes to the writer while the turn goes on")
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10), (at - 8 * piece)..<at])

        let again = ResultBox<[UInt8]>(), againAnswered = expectation(description: "second read")
        cache.makeReader(for: info).read(offset: at + piece, length: Int(piece)) { again.set($0); againAnswered.fulfill() }
        wait(for: [againAnswered], timeout: 5)
        XCTAssertEqual(try again.get(), Array(bytes(at + piece, piece)), "gathered bytes are read from memory")

        _ = t.offer(bytes(at + 3 * piece, piece))   // the last of the turn: the source drains
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(at - 8 * piece, 12 * piece)))
        cache.core.writes.waitIdle()
        XCTAssertEqual(writes.value, 1, "one write for the turn")
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10), (at - 8 * piece)..<(at + 4 * piece)])
        XCTAssertEqual(cache.core.memory.usage.queued, 0,
                       "a transfer waiting for the network holds no room in the write budget")
        t.finish()
        cache.core.writes.waitIdle()
    }

    func testAReadPlannedWhileBytesWaitForTheWriterIsAnsweredFromThemWithoutAnotherRequest() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        cache.core.writes.holdWrites()
        let first = ResultBox<[UInt8]>(), firstAnswered = expectation(description: "first read")
        let t = try startRead(cache, source, info, offset: at, count: 4 * chunk, into: first, firstAnswered)
        for i in 0..<4 { _ = t.offer(bytes(at + Int64(i) * chunk, chunk)) }
        wait(for: [firstAnswered], timeout: 5)
        // The bytes are neither on disk nor ahead of the transfer, which has passed them.
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10)])

        let transfers = source.transfers.count
        let second = ResultBox<[UInt8]>(), secondAnswered = expectation(description: "second read")
        cache.makeReader(for: info).read(offset: at + chunk, length: Int(2 * chunk)) { second.set($0); secondAnswered.fulfill() }
        wait(for: [secondAnswered], timeout: 5)
        XCTAssertEqual(try second.get(), Array(bytes(at + chunk, 2 * chunk)), "answered from the pending bytes")
        XCTAssertEqual(source.transfers.count, transfers, "no request for bytes that already arrived")

        // Half pending, half beyond what was asked: the read waits only for the missing half.
        let third = ResultBox<[UInt8]>(), thirdAnswered = expectation(description: "third read")
        let ahead = expectation(description: "read ahead")
        let t2 = try startRead(cache, source, info, offset: at + 4 * chunk, count: chunk, into: ResultBox<[UInt8]>(), ahead)
        cache.makeReader(for: info).read(offset: at + 3 * chunk, length: Int(2 * chunk)) { third.set($0); thirdAnswered.fulfill() }
        XCTAssertEqual(source.transfers.count, transfers + 1, "it joins the running transfer")
        _ = t2.offer(bytes(at + 4 * chunk, chunk))
        wait(for: [thirdAnswered, ahead], timeout: 5)
        XCTAssertEqual(try third.get(), Array(bytes(at + 3 * chunk, 2 * chunk)))

        cache.core.writes.releaseWrites()
        t.finish()
        t2.finish()
        cache.core.writes.waitIdle()
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10), at..<(at + 5 * chunk)],
                       "recorded once written")
        cache.core.index.flush()
        let rows = try cache.core.index.extents(entryID: cache.core.commands.entryID(url: url)!, generation: info.generation)
        var indexed = RangeSet()
        for r in rows { indexed.insert(r.start..<r.end) }
        XCTAssertEqual(indexed.ranges, [0..<(256 << 10), at..<(at + 5 * chunk)], "the index agrees")
    }

    func testAReadWaitingForArrivingBytesIsAnsweredOnTheFetchThreadBeforeTheyAreWritten() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        cache.core.writes.holdWrites()
        let box = ResultBox<[UInt8]>(), answered = expectation(description: "read")
        let t = try startRead(cache, source, info, offset: at, count: chunk, into: box, answered)
        XCTAssertThrowsError(try box.get(), "nothing arrived yet")
        _ = t.offer(bytes(at, chunk))
        XCTAssertEqual(try box.get(), Array(bytes(at, chunk)), "answered within the offer, from the arriving bytes")
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10)], "while nothing was written yet")
        cache.core.writes.releaseWrites()
        t.finish()
        cache.core.writes.waitIdle()
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10), at..<(at + chunk)])
    }

    func testAReadTheRetainedShareCannotHoldTakesItsBytesFromTheSlicesAndTheQueue() throws {
        let source = GatedSource()
        let cache = try engine(source, retainBudget: 0)   // no waiting read may keep a buffer
        defer { cache.shutdown() }
        let info = try open(cache, source)
        let box = ResultBox<[UInt8]>(), answered = expectation(description: "read")
        let t = try startRead(cache, source, info, offset: at, count: 4 * chunk, into: box, answered)
        _ = t.offer(bytes(at, chunk))
        _ = t.offer(bytes(at + chunk, chunk))
        cache.core.writes.waitIdle()
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10), at..<(at + 2 * chunk)], "half on disk")
        cache.core.writes.holdWrites()
        _ = t.offer(bytes(at + 2 * chunk, chunk))
        XCTAssertThrowsError(try box.get(), "a quarter still missing")
        // Checked while the read waits: once answered, its answer holds the queued chunk until
        // the lease is freed, which may come after the completion ran.
        XCTAssertEqual(cache.core.memory.usage.retained, 0, "it held nothing on arrival")
        _ = t.offer(bytes(at + 3 * chunk, chunk))   // the rest waits for the writer
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(at, 4 * chunk)), "half from the data file, half from the queue")
        XCTAssertEqual(source.transfers.count, 2, "the probe and this read's transfer, no other")
        cache.core.writes.releaseWrites()
        t.finish()
        cache.core.writes.waitIdle()
    }

    func testBytesTheDiskRefusesReachAReadTheRetainedShareCouldNotHold() throws {
        let source = GatedSource()
        let cache = try engine(source, capacity: 0, retainBudget: 0)   // nothing may be written
        defer { cache.shutdown() }
        let info = try open(cache, source)
        let box = ResultBox<[UInt8]>(), answered = expectation(description: "read")
        let t = try startRead(cache, source, info, offset: at, count: 2 * chunk, into: box, answered)
        cache.core.writes.holdWrites()   // else the writer may refuse them before the check below
        _ = t.offer(bytes(at, chunk))
        XCTAssertEqual(cache.core.memory.usage.retained, 0, "queued, not held by the read")
        cache.core.writes.releaseWrites()
        cache.core.writes.waitIdle()   // the writer refuses it: the bytes leave the queue
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [], "nothing on disk")
        XCTAssertEqual(cache.core.memory.usage.retained, chunk, "handed to the read past the cap (its chunk)")
        _ = t.offer(bytes(at + chunk, chunk))
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(at, 2 * chunk)))
        XCTAssertEqual(source.transfers.count, 2, "not fetched again")
        t.finish()
        cache.core.writes.waitIdle()
    }

    func testAnEntryRemovedWhileItsBytesWaitForTheWriterGainsNothingAndLeavesNoFiles() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        cache.core.writes.holdWrites()
        let box = ResultBox<[UInt8]>(), answered = expectation(description: "read")
        // In another slice than the probe's bytes: the writer would create its file.
        let t = try startRead(cache, source, info, offset: 2 * at, count: chunk, into: box, answered)
        XCTAssertEqual(t.offer(bytes(2 * at, chunk)), .stop, "the read's range arrived")
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(2 * at, chunk)))

        try cache.remove(url: url)
        cache.core.writes.releaseWrites()
        t.finish()
        cache.core.writes.waitIdle()
        XCTAssertEqual(cache.usage.bytes, 0, "a removed entry gains no bytes")
        XCTAssertEqual(dataFiles(), [], "the writer left no file behind")
        XCTAssertNil(cache.status(url: url))
        XCTAssertEqual(cache.core.memory.usage.queued, 0, "its room was given back")
    }

    func testTheWriteBudgetHoldsAcrossTransfersAndEveryPausedOneResumes() throws {
        let source = GatedSource()
        let budget: Int64 = 4 * chunk
        let cache = try engine(source, writeBudget: (total: budget, perTransfer: 2 * chunk))
        defer { cache.shutdown() }
        let info = try open(cache, source)
        cache.core.writes.holdWrites()
        var transfers: [(GatedSource.Transfer, Int64)] = []
        var reads: [XCTestExpectation] = []
        for i in 0..<4 {
            let offset = at + Int64(i) * (512 << 10)
            reads.append(expectation(description: "read \(i)"))
            transfers.append((try startRead(cache, source, info, offset: offset, count: 4 * chunk, into: ResultBox<[UInt8]>(),
                                            reads[i]), offset))
        }
        var paused: [GatedSource.Transfer] = []
        var next = [Int64](repeating: 0, count: transfers.count)
        for (i, (t, offset)) in transfers.enumerated() {
            while next[i] < 4, t.offer(bytes(offset + next[i] * chunk, chunk)) == .proceed { next[i] += 1 }
            if next[i] < 4 { paused.append(t) }
        }
        XCTAssertEqual(next.reduce(0, +) * chunk, budget, "exactly the budget was taken")
        XCTAssertLessThanOrEqual(cache.core.memory.usage.peakQueued, budget, "never more queued than the budget")
        XCTAssertEqual(paused.count, 4, "every transfer ends up paused")
        XCTAssertEqual(cache.core.memory.usage.paused, 4)

        cache.core.writes.releaseWrites()
        cache.core.writes.waitIdle()
        XCTAssertEqual(paused.map(\.resumeCount), [1, 1, 1, 1], "every paused transfer was resumed")
        // The rest flows: each transfer delivers the remainder of its read.
        for (i, (t, offset)) in transfers.enumerated() {
            while next[i] < 4 {
                if t.offer(bytes(offset + next[i] * chunk, chunk)) == .pause {
                    cache.core.writes.waitIdle()
                    continue
                }
                next[i] += 1
            }
            t.finish()
        }
        wait(for: reads, timeout: 5)
        cache.core.writes.waitIdle()
        XCTAssertLessThanOrEqual(cache.core.memory.usage.peakQueued, budget)
        XCTAssertEqual(cache.usage.bytes, (256 << 10) + 4 * 4 * chunk)
    }
}

/// A count bumped from the writer lane and read by the test.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    func reset() { lock.withLock { count = 0 } }
    var value: Int { lock.withLock { count } }
}
