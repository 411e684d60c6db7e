import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// A reader its name calls a player that reads in bulk (`ReaderTempo`: a trickplay job asking
/// again as soon as it is answered) yields to a watched one: once judged, its fetches rank
/// `ReaderTempo.bulkFetchClass`, the read-ahead it started before drops to it too, and its waits
/// promote nothing, while a watched player's waiting read ranks first. Replayed step by step on a
/// `GatedSource` with a monotonic clock the test moves (only while the bulk reader waits).
final class BulkReaderPriorityTests: GatedEngineTestCase {
    let chunk: Int64 = 64 << 10
    let start: Int64 = 256 << 10

    /// Uptime that moves only when the test says.
    final class Uptime: @unchecked Sendable {
        private let lock = NSLock()
        private var nanoseconds: UInt64 = 1_000_000_000_000
        func read() -> UInt64 { lock.withLock { nanoseconds } }
        func advance(_ seconds: Double) { lock.withLock { nanoseconds += UInt64(seconds * 1e9) } }
    }

    func testABulkReadersFetchesYieldToAWatchedPlayersOnceItIsJudged() throws {
        let uptime = Uptime()
        let source = GatedSource()
        var configuration = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20,
                                               readTimeout: 10, initialReadAhead: 256 << 10, maxStreams: 1, engineClock: .realTime)
        configuration.engineClock = EngineClock(wall: EngineClock.realTime.wall, monotonic: { MonotonicInstant(nanoseconds: uptime.read()) },
                                                scheduler: Scheduler.manual())
        let cache = try CacheEngine(configuration: configuration, source: source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let job = cache.makeReader(for: info, door: .fuse, readerClass: .player)

        // Judged by time: it waits 4 s on each of its first two reads, never idle between.
        let firstRead = try XCTUnwrap(startRead(job, start, source))
        let first = firstRead.transfer!
        XCTAssertEqual(first.request.priority, .waiting, "a reader that just opened is watched: as players always were")
        uptime.advance(4)
        serve(first, through: first.request.end!)
        try answer(firstRead, start)
        // Then a jump: a new fetch, its own bytes and read-ahead, started while it is still watched.
        let at: Int64 = 2 << 20
        let second = try XCTUnwrap(startRead(job, at, source))
        let readAhead = second.transfer!
        XCTAssertEqual(readAhead.request.priority, .waiting, "4 s of waiting is not yet bulk")
        uptime.advance(4)
        serve(readAhead, through: at + chunk)   // its own bytes; the read-ahead part still runs
        try answer(second, at)

        // Its next read is judged bulk: the running read-ahead drops to the bulk class, and its
        // wait on it promotes nothing.
        let started = source.transfers.count
        let bulkRead = try XCTUnwrap(startRead(job, at + chunk, source, expectingFetch: false))
        XCTAssertEqual(readAhead.priorities.last, ReaderTempo.bulkFetchClass,
                       "8 s read as fast as it was given: bulk, and what it started before follows (\(readAhead.priorities))")
        XCTAssertTrue(job.readsInBulk, "what the status counts can read")

        // A watched player's read elsewhere ranks first.
        let player = cache.makeReader(for: info, door: .fuse, readerClass: .player)
        let watchedRead = try XCTUnwrap(startRead(player, 3 << 20 + 512 << 10, source))
        let watched = watchedRead.transfer!
        XCTAssertEqual(watched.request.priority, .waiting)
        XCTAssertLessThan(watched.request.priority, readAhead.priorities.last!, "the bulk reader's fetch yields to it")
        serve(watched, through: watched.request.end!)
        try answer(watchedRead, 3 << 20 + 512 << 10)

        serve(readAhead, from: at + chunk, through: readAhead.request.end!)
        try answer(bulkRead, at + chunk)

        // What it fetches from now on starts in the bulk class, and stays there while it waits.
        let onward = try XCTUnwrap(startRead(job, readAhead.request.end!, source))
        let mine = source.transfers[started...].filter { $0 !== watched }
        XCTAssertFalse(mine.isEmpty)
        for t in mine {
            XCTAssertEqual(t.request.priority, ReaderTempo.bulkFetchClass, "\(t.request.start)")
            XCTAssertFalse(t.priorities.contains(.waiting), "its wait gives the fetch no player's class: \(t.priorities)")
        }
        for t in mine { serve(t, through: t.request.end!) }
        try answer(onward, readAhead.request.end!)
    }

    // MARK: steps

    struct Pending {
        var transfer: GatedSource.Transfer?
        var answered: XCTestExpectation
        var box: ResultBox<[UInt8]>
    }

    /// Asks `chunk` at `offset`; the transfer it started, if any (nil when `expectingFetch` is
    /// false and it started none).
    func startRead(_ reader: CacheReader, _ offset: Int64, _ source: GatedSource, expectingFetch: Bool = true) throws -> Pending? {
        let before = source.transfers.count
        let answered = expectation(description: "read at \(offset)")
        let box = ResultBox<[UInt8]>()
        reader.read(offset: offset, length: Int(chunk)) { box.set($0); answered.fulfill() }
        let started = source.transfers.count > before ? source.transfers.last : nil
        if expectingFetch && started == nil { XCTFail("no fetch for the read at \(offset)"); return nil }
        return Pending(transfer: started, answered: answered, box: box)
    }

    /// Sends the transfer's bytes `from` (its start: with the head) up to `end`, and finishes it
    /// when that is its end.
    func serve(_ t: GatedSource.Transfer, from: Int64? = nil, through end: Int64) {
        let from = from ?? t.request.start
        if from == t.request.start { t.partial(length: length) }
        t.send(data[Int(from)..<Int(end)])
        if end == t.request.end { t.finish() }
    }

    func answer(_ read: Pending, _ offset: Int64) throws {
        wait(for: [read.answered], timeout: 5)
        XCTAssertEqual(try read.box.get(), Array(bytes(offset, chunk)))
    }
}
