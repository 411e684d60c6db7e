import CacheCore
import Foundation
import XCTest

/// The one read-to-the-end loop: order, ends, stops, errors, limits and cancellation, over a
/// reader whose answers the test scripts (no network, no clock).
final class ChunkedReadTests: XCTestCase {
    private let file = (0 ..< 10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    func testHandsOverTheRangeInOrderInChunks() async throws {
        let reader = MemoryReader(file)
        let got = Gathered()
        let outcome = try await ChunkedRead.run(reader, from: 1000, to: 4500, chunkSize: 1024, consume: got.add)
        XCTAssertEqual(outcome, .init(bytes: 3500, stop: .end))
        XCTAssertEqual(got.bytes, Array(file[1000 ..< 4500]))
        XCTAssertEqual(reader.asked, [1000 ..< 2024, 2024 ..< 3048, 3048 ..< 4072, 4072 ..< 4500],
                       "no read asks past the range's end")
    }

    func testWithoutAnEndReadsUntilTheFileEnds() async throws {
        let got = Gathered()
        let outcome = try await ChunkedRead.run(MemoryReader(file), from: 9000, to: nil, chunkSize: 600, consume: got.add)
        XCTAssertEqual(outcome, .init(bytes: 1000, stop: .end))
        XCTAssertEqual(got.bytes, Array(file[9000...]))
    }

    func testAnEndPastTheFileStopsAtTheFile() async throws {
        let outcome = try await ChunkedRead.run(MemoryReader(file), from: 0, to: 50_000, consume: { _ in true })
        XCTAssertEqual(outcome, .init(bytes: 10_000, stop: .end))
    }

    func testTheConsumerCanStopEarly() async throws {
        let reader = MemoryReader(file)
        let outcome = try await ChunkedRead.run(reader, to: nil, chunkSize: 1000) { _ in false }
        XCTAssertEqual(outcome, .init(bytes: 1000, stop: .consumerStopped))
        XCTAssertEqual(reader.asked.count, 1, "no read after the consumer said stop")
    }

    func testAReadErrorEndsTheRunWithThatError() async throws {
        let reader = MemoryReader(file, failAt: 3000)
        let got = Gathered()
        do {
            _ = try await ChunkedRead.run(reader, to: nil, chunkSize: 1000, consume: got.add)
            XCTFail("a failed read must fail the run")
        } catch let error as CacheError {
            XCTAssertEqual(error, .remoteChanged(url: "memory"))
        }
        XCTAssertEqual(got.bytes.count, 3000, "the chunks before the failure were handed over")
    }

    func testAConsumerErrorEndsTheRun() async throws {
        struct DiskFull: Error {}
        do {
            _ = try await ChunkedRead.run(MemoryReader(file), to: nil) { _ in throw DiskFull() }
            XCTFail("the consumer's error must fail the run")
        } catch is DiskFull {}
    }

    func testALongRunOfInlineHitsDoesNotDeepenTheStack() throws {
        // Every read completes inline (as a cache hit does): the loop must not recurse.
        let big = [UInt8](repeating: 1, count: 200_000)
        let outcome = try ChunkedRead.runWaiting(MemoryReader(big), to: nil, chunkSize: 1, consume: { _ in true })
        XCTAssertEqual(outcome.bytes, 200_000)
    }

    func testReadAllIsNilForABodyLargerThanTheLimit() async throws {
        let whole = try await ChunkedRead.readAll(MemoryReader(file), limit: 10_000)
        XCTAssertEqual(whole, file)
        let tooLarge = try await ChunkedRead.readAll(MemoryReader(file), limit: 9_999)
        XCTAssertNil(tooLarge)
    }

    func testReadAllWithACompletion() throws {
        let done = expectation(description: "completed")
        let result = Gathered()
        ChunkedRead.readAll(MemoryReader(file), limit: 1 << 20) { r in
            _ = result.add((try? r.get()).flatMap { $0 } ?? [])
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(result.bytes, file)
    }

    func testReadWaitingIsOneRead() throws {
        let reader = MemoryReader(file)
        XCTAssertEqual(try ChunkedRead.readWaiting(reader, offset: 100, count: 5000), Array(file[100 ..< 5100]))
        XCTAssertEqual(reader.asked, [100 ..< 5100])
    }

    func testACancelledRunStopsBeforeItsNextChunk() throws {
        let reader = MemoryReader(file)
        let done = expectation(description: "completed")
        let failure = Gathered()
        let consuming = DispatchSemaphore(value: 0), gate = DispatchSemaphore(value: 0)
        let cancellation = ChunkedRead.start(reader, to: nil, chunkSize: 1000, consume: { _ in
            consuming.signal()
            gate.wait()   // the test cancels while the first chunk is being consumed
            return true
        }) { result in
            if case let .failure(error) = result, error is CancellationError { _ = failure.add([1]) }
            done.fulfill()
        }
        consuming.wait()
        cancellation.cancel()
        gate.signal()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(failure.bytes, [1], "the run ends with CancellationError")
        XCTAssertEqual(reader.asked.count, 1, "no read after the cancellation")
    }
}

/// Answers reads from memory, inline (like a cache hit), optionally failing from one offset on.
private final class MemoryReader: LeaseReading, @unchecked Sendable {
    let bytes: [UInt8]
    let failAt: Int64?
    private let lock = NSLock()
    private var log: [Range<Int64>] = []

    init(_ bytes: [UInt8], failAt: Int64? = nil) {
        self.bytes = bytes
        self.failAt = failAt
    }

    var asked: [Range<Int64>] { lock.lock(); defer { lock.unlock() }; return log }

    func lease(offset: Int64, length: Int, completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void) {
        lock.lock()
        log.append(offset ..< offset + Int64(length))
        lock.unlock()
        if let failAt, offset >= failAt { return completion(.failure(.remoteChanged(url: "memory"))) }
        let start = min(Int(offset), bytes.count), end = min(Int(offset) + length, bytes.count)
        completion(.success(ReadLease(bytes: Array(bytes[start ..< end]))))
    }
}

/// Chunks handed over by a run, gathered across threads.
private final class Gathered: @unchecked Sendable {
    private let lock = NSLock()
    private var all: [UInt8] = []
    var bytes: [UInt8] { lock.lock(); defer { lock.unlock() }; return all }
    @Sendable func add(_ chunk: [UInt8]) -> Bool { lock.lock(); all += chunk; lock.unlock(); return true }
}
