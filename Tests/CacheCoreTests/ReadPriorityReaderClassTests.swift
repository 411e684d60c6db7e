import XCTest
@testable import CacheCore
import TestSupport

/// Reads that know their reader (`ReaderClass`): a scanner's fetches rank `.scan`, `.waitedScan`
/// while it waits on them; a scanner and a reader nobody listed pay for what they read (read-ahead
/// earned by reading, `EarnedReadAhead`); a player's waiting read goes before a scanner's fetch.
/// Replayed step by step on a `GatedSource`.
final class ReadPriorityReaderClassTests: GatedEngineTestCase {
    let chunk: Int64 = 32 << 10
    let at: Int64 = 1 << 20


    func testAScannerReadingOnGetsGrowingRequestsAndPaysAtMostHalfAgainWhatItRead() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info, door: .fuse, readerClass: .scanner)
        var fetched: [Range<Int64>] = []
        for i in 0..<12 {
            if let t = try readServing(reader, at + Int64(i) * chunk, chunk, source) {
                XCTAssertTrue(t.request.priority == .waitedScan || t.request.priority == .scan,
                              "a scanner's class, waited on or not: \(t.request.priority)")
                XCTAssertFalse(t.priorities.contains(.waiting), "never a player's waiting class: \(t.priorities)")
                fetched.append(t.request.start..<t.request.end!)
            }
        }
        let read = 12 * chunk
        XCTAssertEqual(fetched.first, at..<(at + chunk), "what it asks, nothing ahead: it has read nothing yet")
        XCTAssertEqual(source.transfers[1].request.priority, .waitedScan, "its first read waits on its fetch")
        XCTAssertLessThan(fetched.count, 12, "fewer requests than reads: \(fetched)")
        XCTAssertGreaterThan(fetched.last!.count, fetched.first!.count, "requests grow as it reads on: \(fetched)")
        let total = fetched.reduce(Int64(0)) { $0 + Int64($1.count) }
        XCTAssertEqual(fetched.last!.upperBound - at, total, "every byte fetched once: \(fetched)")
        XCTAssertLessThanOrEqual(total, read + read / 2, "at most half again what it read: \(fetched)")
        let counted = try XCTUnwrap(cache.metrics.totals.readers?["scanner"], "counted by class for /metrics and the status page")
        XCTAssertEqual(counted.reads, 12)
        XCTAssertEqual(counted.fetches, Int64(fetched.count))
        XCTAssertEqual(counted.fetchedBytes, total)
        XCTAssertEqual(counted.fromCache + counted.fromOrigin, read)
        XCTAssertEqual(cache.metrics.totals.readers?["player"]?.reads, 0)
    }

    func testAnUnknownReaderFetchesWhatItAsksThenEarnsReadAheadByReadingOn() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        let first = try XCTUnwrap(try readServing(reader, at, chunk, source))
        XCTAssertEqual(first.request.end, at + chunk, "an open starts with no read-ahead")
        let second = try XCTUnwrap(try readServing(reader, at + chunk, chunk, source))
        XCTAssertEqual(second.request.end, at + 2 * chunk + chunk / 2, "reading on, it earns a little")
        let third = try XCTUnwrap(try readServing(reader, at + 2 * chunk, chunk, source))
        XCTAssertEqual(third.request.start..<third.request.end!, (at + 2 * chunk + chunk / 2)..<(at + 4 * chunk),
                       "and twice that with its third read")
    }

    func testAnUnknownReaderThatOnlySeeksNeverEarnsReadAhead() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        for offset: Int64 in [at, 3 << 20, 2 << 20, (3 << 20) + (512 << 10)] {
            let t = try XCTUnwrap(try readServing(reader, offset, chunk, source))
            XCTAssertEqual(t.request.end, offset + chunk, "a program that jumps about costs what it reads")
        }
    }

    func testAPlayerKeepsItsReadAheadFromTheFirstRead() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let t = try XCTUnwrap(try readServing(cache.makeReader(for: info, door: .fuse, readerClass: .player), at, chunk, source))
        XCTAssertEqual(t.request.end, at + chunk + (256 << 10), "as it always was")
    }
}
