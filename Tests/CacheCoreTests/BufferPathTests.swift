import XCTest
@testable import CacheCore
import TestSupport

/// The one buffer path: arriving bytes land once, in a pooled chunk, and the reads waiting for
/// them, their leases and the writer share that memory by reference; one memory budget counts
/// what the writer's queue and what the reads hold, and neither can hold the other back. Each
/// test replays one exact moment with a `GatedSource` (and the writer held where it says).
final class BufferPathTests: GatedEngineTestCase {
    private let at: Int64 = 1 << 20
    private let chunk: Int64 = 64 << 10   // what each offer carries: one 64 KiB buffer each

    /// Leases `count` bytes at `offset` through a new reader; the answer lands in `box`.
    private func lease(_ cache: CacheEngine, _ info: EntryInfo, offset: Int64, count: Int64,
                       into box: ResultBox<ReadLease>, _ answered: XCTestExpectation) {
        cache.makeReader(for: info).lease(offset: offset, length: Int(count)) { box.set($0); answered.fulfill() }
    }

    /// The chunks queued for the writer (entry offset → address of their first byte).
    private func pendingAddresses(_ cache: CacheEngine, _ info: EntryInfo) -> [Int64: UnsafeRawPointer] {
        let shard = cache.core.shard(for: info.key)
        let chunks = shard.locked { $0[info.key]?.pending.chunks ?? [] }
        var out: [Int64: UnsafeRawPointer] = [:]
        for c in chunks { out[c.range.lowerBound] = c.bytes.baseAddress }
        return out
    }

    private func chunkAddress(_ piece: ReadLease.Piece) -> UnsafeRawPointer? {
        if case let .chunk(c) = piece { return c.bytes.baseAddress }
        return nil
    }

    private func assertNoMemoryHeld(_ cache: CacheEngine, file: StaticString = #filePath, line: UInt = #line) {
        cache.core.writes.waitIdle()
        let usage = cache.core.memory.usage
        XCTAssertEqual(usage.queued, 0, "nothing waits for the writer", file: file, line: line)
        XCTAssertEqual(usage.retained, 0, "no read holds a chunk", file: file, line: line)
    }

    func testAWaitingReadsLeaseIsTheChunkItsBytesLandedInNotACopy() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        try {
            cache.core.writes.holdWrites()   // the chunk stays queued: its address can be looked up
            let box = ResultBox<ReadLease>(), answered = expectation(description: "read")
            lease(cache, info, offset: at, count: chunk, into: box, answered)
            let t = try XCTUnwrap(source.transfers.last)
            t.partial(length: length)
            _ = t.offer(bytes(at, chunk))
            wait(for: [answered], timeout: 5)
            let lease = try box.get()
            XCTAssertEqual(lease.pieces.count, 1)
            let landed = try XCTUnwrap(pendingAddresses(cache, info)[at])
            XCTAssertEqual(chunkAddress(lease.pieces[0]), landed, "the lease points at the chunk libcurl's bytes landed in")
            XCTAssertEqual(try lease.bytes(), Array(bytes(at, chunk)))
            XCTAssertEqual(lease.originBytes, Int(chunk), "a miss")
            XCTAssertEqual(cache.core.memory.usage.retained, chunk, "held once, counted as the chunk's capacity")
            XCTAssertEqual(cache.core.memory.usage.queued, chunk, "and queued for the writer: the same memory")
            lease.release()
            cache.core.writes.releaseWrites()
            t.finish()
        }()
        assertNoMemoryHeld(cache)
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [0..<(256 << 10), at..<(at + chunk)])
    }

    func testAReadSpanningTheDiskAndTwoChunksIsAnsweredFromAllThreeInPlace() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)   // the probe put [0, 256 KiB) on disk
        let start: Int64 = (256 << 10) - chunk
        try {
            cache.core.writes.holdWrites()
            let box = ResultBox<ReadLease>(), answered = expectation(description: "read")
            lease(cache, info, offset: start, count: 3 * chunk, into: box, answered)
            let t = try XCTUnwrap(source.transfers.last)
            XCTAssertEqual(t.request.start, 256 << 10, "only the missing bytes are fetched")
            t.partial(length: length)
            _ = t.offer(bytes(start + chunk, chunk))   // each offer its own buffer (the source drained)
            _ = t.offer(bytes(start + 2 * chunk, chunk))
            wait(for: [answered], timeout: 5)
            let lease = try box.get()
            let landed = pendingAddresses(cache, info)
            guard lease.pieces.count == 3, case let .file(_, offset, count) = lease.pieces[0] else {
                return XCTFail("expected the disk part, then two chunks: \(lease.pieces)")
            }
            XCTAssertEqual(offset, start)
            XCTAssertEqual(count, Int(chunk))
            XCTAssertEqual(chunkAddress(lease.pieces[1]), landed[start + chunk])
            XCTAssertEqual(chunkAddress(lease.pieces[2]), landed[start + 2 * chunk])
            if case let .chunk(first) = lease.pieces[1], case let .chunk(second) = lease.pieces[2] {
                XCTAssertFalse(first.retention.storage === second.retention.storage, "two buffers")
            }
            XCTAssertEqual(try lease.bytes(), Array(bytes(start, 3 * chunk)))
            XCTAssertEqual(cache.core.memory.usage.retained, 2 * chunk)
            lease.release()
            cache.core.writes.releaseWrites()
            t.finish()
        }()
        assertNoMemoryHeld(cache)
    }

    func testArrivalsThatFollowEachOtherInOneChunkAreOnePieceOfTheAnswer() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        let piece: Int64 = 16 << 10   // what libcurl hands over at a time
        try {
            let box = ResultBox<ReadLease>(), answered = expectation(description: "read")
            lease(cache, info, offset: at, count: 8 * piece, into: box, answered)
            let t = try XCTUnwrap(source.transfers.last)
            t.partial(length: length)
            for i in 0..<8 { _ = t.offer(bytes(at + Int64(i) * piece, piece), more: i < 7) }   // one turn
            wait(for: [answered], timeout: 5)
            let lease = try box.get()
            XCTAssertEqual(try lease.bytes(), Array(bytes(at, 8 * piece)))
            let addresses = lease.pieces.compactMap(chunkAddress)
            XCTAssertEqual(addresses.count, lease.pieces.count, "all from memory")
            XCTAssertLessThan(lease.pieces.count, 8, "buffers grow within the turn, and hold several arrivals")
            for i in addresses.indices.dropLast() {
                XCTAssertNotEqual(addresses[i] + lease.pieces[i].count, addresses[i + 1],
                                  "bytes that follow each other in one buffer are one piece")
            }
            lease.release()
            t.finish()
        }()
        assertNoMemoryHeld(cache)
    }

    func testAHitOnBytesQueuedForTheWriterPointsAtTheirChunk() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        try {
            cache.core.writes.holdWrites()
            let first = ResultBox<ReadLease>(), answered = expectation(description: "first read")
            lease(cache, info, offset: at, count: chunk, into: first, answered)
            let t = try XCTUnwrap(source.transfers.last)
            t.partial(length: length)
            _ = t.offer(bytes(at, chunk))
            wait(for: [answered], timeout: 5)
            try first.get().release()

            let hit = ResultBox<ReadLease>(), hitAnswered = expectation(description: "hit")
            lease(cache, info, offset: at + 1000, count: 5000, into: hit, hitAnswered)
            wait(for: [hitAnswered], timeout: 5)
            let lease = try hit.get()
            XCTAssertEqual(lease.pieces.count, 1)
            XCTAssertEqual(chunkAddress(lease.pieces[0]), pendingAddresses(cache, info)[at].map { $0 + 1000 })
            XCTAssertEqual(try lease.bytes(), Array(bytes(at + 1000, 5000)))
            XCTAssertEqual(lease.originBytes, 0, "a hit")
            lease.release()
            cache.core.writes.releaseWrites()
            t.finish()
        }()
        assertNoMemoryHeld(cache)
    }

    func testAReadPastTheRetainedShareLetsGoAndIsAnsweredByteExactFromTheQueueAndTheDisk() throws {
        let source = GatedSource()
        let cache = try engine(source, retainBudget: chunk)   // room for one buffer
        defer { cache.shutdown() }
        let info = try open(cache, source)
        try {
            let box = ResultBox<ReadLease>(), answered = expectation(description: "read")
            lease(cache, info, offset: at, count: 4 * chunk, into: box, answered)
            let t = try XCTUnwrap(source.transfers.last)
            t.partial(length: length)
            _ = t.offer(bytes(at, chunk))
            XCTAssertEqual(cache.core.memory.usage.retained, chunk, "the first buffer fits")
            _ = t.offer(bytes(at + chunk, chunk))
            XCTAssertEqual(cache.core.memory.usage.retained, 0, "the second does not: it let go of both")
            cache.core.writes.waitIdle()   // both written
            cache.core.writes.holdWrites()
            _ = t.offer(bytes(at + 2 * chunk, chunk))
            XCTAssertEqual(cache.core.memory.usage.retained, 0, "it holds nothing more")
            XCTAssertThrowsError(try box.get(), "a quarter still missing")
            _ = t.offer(bytes(at + 3 * chunk, chunk))   // queued for the writer
            wait(for: [answered], timeout: 5)
            let lease = try box.get()
            XCTAssertEqual(try lease.bytes(), Array(bytes(at, 4 * chunk)), "half from the data file, half from the queue")
            XCTAssertEqual(lease.pieces.map(\.count), [Int(2 * chunk), Int(chunk), Int(chunk)])
            XCTAssertTrue(lease.readsFromDisk)
            XCTAssertEqual(source.transfers.count, 2, "the probe and this read's transfer, no other")
            lease.release()
            cache.core.writes.releaseWrites()
            t.finish()
        }()
        assertNoMemoryHeld(cache)
    }

    /// The deadlock the budget is shaped against: a transfer whose queued share is spent, and a
    /// read holding the transfer's chunks while it waits for the transfer's later bytes. If the
    /// share came back only when the chunks were freed, the transfer would never resume.
    func testATransferResumesWhileAReadWaitingForItsLaterBytesHoldsItsChunks() throws {
        let source = GatedSource()
        let cache = try engine(source, writeBudget: (total: 4 * chunk, perTransfer: 2 * chunk))
        defer { cache.shutdown() }
        let info = try open(cache, source)
        try {
            cache.core.writes.holdWrites()
            let box = ResultBox<ReadLease>(), answered = expectation(description: "read")
            lease(cache, info, offset: at, count: 6 * chunk, into: box, answered)
            let t = try XCTUnwrap(source.transfers.last)
            t.partial(length: length)
            XCTAssertEqual(t.offer(bytes(at, chunk)), .proceed)
            XCTAssertEqual(t.offer(bytes(at + chunk, chunk)), .proceed)
            XCTAssertEqual(t.offer(bytes(at + 2 * chunk, chunk)), .pause, "its share waits for the disk")
            XCTAssertEqual(cache.core.memory.usage.retained, 2 * chunk, "the read holds both chunks")

            cache.core.writes.releaseWrites()
            cache.core.writes.waitIdle()
            XCTAssertEqual(t.resumeCount, 1, "written: the transfer resumes")
            XCTAssertEqual(cache.core.memory.usage.queued, 0)
            XCTAssertEqual(cache.core.memory.usage.retained, 2 * chunk, "while the read still holds the chunks")
            var next: Int64 = 2
            while next < 6 {
                if t.offer(bytes(at + next * chunk, chunk)) == .pause {
                    cache.core.writes.waitIdle()
                    XCTAssertGreaterThan(t.resumeCount, 1, "every pause ends once the writer drained")
                    continue
                }
                next += 1
            }
            wait(for: [answered], timeout: 5)
            let lease = try box.get()
            XCTAssertEqual(try lease.bytes(), Array(bytes(at, 6 * chunk)))
            XCTAssertFalse(lease.readsFromDisk, "all of it from the chunks the read held")
            lease.release()
            t.finish()
        }()
        assertNoMemoryHeld(cache)
    }

    func testBytesTheDiskRefusesAreHeldPastTheShareAndGivenBackAfterTheRead() throws {
        let source = GatedSource()
        let cache = try engine(source, capacity: 0, retainBudget: 0)   // nothing written, nothing held
        defer { cache.shutdown() }
        let info = try open(cache, source)
        try {
            let box = ResultBox<ReadLease>(), answered = expectation(description: "read")
            lease(cache, info, offset: at, count: 2 * chunk, into: box, answered)
            let t = try XCTUnwrap(source.transfers.last)
            t.partial(length: length)
            _ = t.offer(bytes(at, chunk))
            cache.core.writes.waitIdle()   // refused: the read holds it now, past the cap
            XCTAssertEqual(cache.core.memory.usage.retained, chunk)
            XCTAssertEqual(cache.core.memory.usage.queued, 0)
            _ = t.offer(bytes(at + chunk, chunk))
            wait(for: [answered], timeout: 5)
            let lease = try box.get()
            XCTAssertEqual(try lease.bytes(), Array(bytes(at, 2 * chunk)))
            lease.release()
            t.finish()
        }()
        assertNoMemoryHeld(cache)
        XCTAssertEqual(cache.status(url: url)?.cachedRanges, [], "nothing on disk")
    }
}
