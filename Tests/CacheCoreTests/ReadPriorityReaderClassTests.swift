import XCTest
@testable import CacheCore
import TestSupport

/// Reads that know their reader (`ReaderClass`): a scanner gets no read-ahead past a small fixed
/// margin and its fetches rank `.scan`, `.waitedScan` while it waits on them; a reader nobody listed gets
/// none until it has read on; a player's waiting read goes before a scanner's fetch. Replayed
/// step by step on a `GatedSource`.
final class ReadPriorityReaderClassTests: GatedEngineTestCase {
    let chunk: Int64 = 32 << 10
    let at: Int64 = 1 << 20


    func testAScannersReadFetchesWhatItAsksAndTheMarginOnlyAndItsReadsNeverGrowIt() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info, door: .fuse, readerClass: .scanner)
        var fetched: [Range<Int64>] = []
        for i in 0..<6 {
            if let t = try readServing(reader, at + Int64(i) * chunk, chunk, source) {
                XCTAssertEqual(t.request.priority, .waitedScan,
                               "the scanner waits on it: after every player's waiting read, before read-ahead")
                XCTAssertFalse(t.priorities.contains(.waiting), "never a player's waiting class: \(t.priorities)")
                fetched.append(t.request.start..<t.request.end!)
            }
        }
        let end = at + 6 * chunk
        XCTAssertEqual(fetched.first, at..<(at + chunk + ReaderClass.scanMargin), "what it asks, and the margin")
        XCTAssertLessThanOrEqual(fetched.last!.upperBound, end + ReaderClass.scanMargin,
                                 "six reads in a row earn a scanner no read-ahead: \(fetched)")
        XCTAssertEqual(fetched.reduce(Int64(0)) { $0 + Int64($1.count) }, 6 * chunk + ReaderClass.scanMargin, "every byte fetched once")
        let counted = try XCTUnwrap(cache.metrics.totals.readers?["scanner"], "counted by class for /metrics and the status page")
        XCTAssertEqual(counted.reads, 6)
        XCTAssertEqual(counted.fetches, Int64(fetched.count))
        XCTAssertEqual(counted.fetchedBytes, 6 * chunk + ReaderClass.scanMargin)
        XCTAssertEqual(counted.fromCache + counted.fromOrigin, 6 * chunk)
        XCTAssertEqual(cache.metrics.totals.readers?["player"]?.reads, 0)
    }

    func testAnUnknownReaderGetsNoReadAheadUntilItReadsOnThenEarnsIt() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        let first = try XCTUnwrap(try readServing(reader, at, chunk, source))
        XCTAssertEqual(first.request.end, at + chunk, "an open starts with no read-ahead")
        let second = try XCTUnwrap(try readServing(reader, at + chunk, chunk, source))
        XCTAssertEqual(second.request.end, at + 2 * chunk, "one read on is not yet reading on")
        let third = try XCTUnwrap(try readServing(reader, at + 2 * chunk, chunk, source))
        XCTAssertGreaterThanOrEqual(third.request.end!, at + 3 * chunk + (256 << 10),
                                    "reads in a row (\(ReaderClass.earnAfter) continuing) earn a player's read-ahead")
    }

    func testAnUnknownReaderThatOnlySeeksNeverEarnsReadAhead() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        for offset in [at, 3 << 20, 2 << 20, at + (512 << 10)] {
            let t = try XCTUnwrap(try readServing(reader, offset, chunk, source))
            XCTAssertEqual(t.request.end, offset + chunk, "a probe that jumps about costs what it reads")
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
