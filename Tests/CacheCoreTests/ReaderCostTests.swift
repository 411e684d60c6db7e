import XCTest
@testable import CacheCore
@testable import EntryMachine
import TestSupport

/// What each kind of program costs (`CacheMetrics`' reader rows, the status page's "What each
/// kind of program costs"): the bytes it read, the bytes the origin sent for its requests, and
/// those of them that left the cache with nobody having read them ("wasted"). Replayed on a
/// `GatedSource`: each transfer brings exactly what it asked, then the cache is emptied.
final class ReaderCostTests: GatedEngineTestCase {
    let chunk: Int64 = 32 << 10
    let at: Int64 = 1 << 20

    /// Everything the cache holds goes, as eviction takes it.
    private func evictAll(_ cache: CacheEngine) {
        cache.core.writes.waitIdle()
        _ = cache.core.evictor.evict(where: { _ in true })
        cache.core.evictor.rounds.waitIdle()
    }

    private func row(_ cache: CacheEngine, _ name: String) throws -> ReaderTotals {
        try XCTUnwrap(cache.metrics.totals.readers?[name], "a row for \(name)")
    }

    func testEachClassReadingOneChunkPaysForWhatItsRequestBroughtAndWastesWhatNobodyRead() throws {
        // class, what its request brings (nil: a player's read-ahead, at least 256 KiB more).
        let rows: [(ReaderClass, fetched: Int64?, line: UInt)] = [
            (.scanner, 32 << 10, #line),                            // nothing ahead of a run's first read
            (.unknown, 32 << 10, #line),                            // no read-ahead until earned
            (.background, 32 << 10, #line),                         // through the mount it earns it too
            (.player, nil, #line),                                  // read-ahead from its open
        ]
        for (readerClass, expected, line) in rows {
            let source = GatedSource()
            let cache = try oneStreamEngine(source)
            defer { source.finishAll(); cache.shutdown(); try? FileManager.default.removeItem(atPath: dir) }
            let info = try open(cache, source)
            let reader = cache.makeReader(for: info, door: .fuse, readerClass: readerClass)
            let t = try XCTUnwrap(try readServing(reader, at, chunk, source), line: line)
            reader.close()
            let brought = t.request.end! - t.request.start
            if let expected { XCTAssertEqual(brought, expected, "\(readerClass)", line: line) }
            else { XCTAssertGreaterThanOrEqual(brought, chunk + (256 << 10), "a player reads ahead", line: line) }
            evictAll(cache)

            let r = try row(cache, readerClass.rawValue)
            XCTAssertEqual(r.fromCache + r.fromOrigin, chunk, "read: what it asked", line: line)
            XCTAssertEqual(r.receivedBytes, brought, "fetched: what its request brought", line: line)
            XCTAssertEqual(r.wastedBytes, brought - chunk, "wasted: what it fetched and nobody read", line: line)
            for other in ReaderClass.allCases where other != readerClass {
                XCTAssertEqual(try row(cache, other.rawValue).receivedBytes, 0, "\(other) fetched nothing", line: line)
            }
        }
    }

    func testTheOpensFirstBytesAreCountedAsTheOpensAndWastedWhenNoProgramReadsThem() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        _ = try open(cache, source)   // the probe brings the first 256 KiB
        evictAll(cache)
        let opened = try row(cache, CacheMetrics.openOwner)
        XCTAssertEqual(opened.receivedBytes, 256 << 10)
        XCTAssertEqual(opened.wastedBytes, 256 << 10, "fetched at the open, read by nobody")
    }

    func testBytesReadByAnyProgramBeforeTheyGoAreNotWasted() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        // A program reads the open's first bytes: the open's fetch was not for nothing.
        let head = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        XCTAssertNil(try readServing(head, 0, 256 << 10, source), "a hit")
        head.close()
        // A player reads ahead; another program then reads all of that read-ahead.
        let player = cache.makeReader(for: info, door: .fuse, readerClass: .player)
        let t = try XCTUnwrap(try readServing(player, at, chunk, source))
        player.close()
        let ahead = t.request.end! - (at + chunk)
        let other = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        XCTAssertNil(try readServing(other, at + chunk, ahead, source), "the player's read-ahead answers it")
        other.close()
        evictAll(cache)

        XCTAssertEqual(try row(cache, CacheMetrics.openOwner).wastedBytes, 0)
        XCTAssertEqual(try row(cache, "player").wastedBytes, 0, "read by another program is read")
        XCTAssertEqual(try row(cache, "player").receivedBytes, chunk + ahead)
        XCTAssertEqual(try row(cache, "unknown").receivedBytes, 0, "its reads were hits")
        XCTAssertEqual(try row(cache, "unknown").fromCache, (256 << 10) + ahead)
    }

    func testANewVersionOfTheFileWastesWhatNobodyReadOfTheOldOne() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        _ = try open(cache, source)
        let key = try cache.core.configuration.keyRules.key(for: url)
        let shard = cache.core.shard(for: key)
        shard.locked { entries in
            let e = entries[key]!
            _ = e.machine.generationStarted(99, keeping: nil)
            cache.core.metrics.noteWasted(e.machine.takeWasted())
        }
        XCTAssertEqual(try row(cache, CacheMetrics.openOwner).wastedBytes, 256 << 10)
    }
}

/// `UnreadFetched`: the unread bytes of one entry by who fetched them.
final class UnreadFetchedTests: XCTestCase {
    private enum Step {
        case fetched(Range<Int64>, by: ReaderClass?)
        case read(Range<Int64>)
        case dropped(Range<Int64>)
    }

    func testMarksReadsAndDropsTellWhoseBytesWentUnread() {
        let rows: [(name: String, steps: [Step], wasted: [ReaderClass?: Int64], line: UInt)] = [
            ("nothing fetched, nothing wasted", [.dropped(0..<100)], [:], #line),
            ("fetched and dropped", [.fetched(0..<100, by: .player), .dropped(0..<100)], [.player: 100], #line),
            ("read, then dropped", [.fetched(0..<100, by: .player), .read(0..<100), .dropped(0..<100)], [:], #line),
            ("half read", [.fetched(0..<100, by: .scanner), .read(0..<50), .dropped(0..<100)], [.scanner: 50], #line),
            ("only the dropped part", [.fetched(0..<100, by: .unknown), .dropped(0..<30)], [.unknown: 30], #line),
            ("the newest fetcher owns bytes fetched twice",
             [.fetched(0..<100, by: nil), .fetched(50..<150, by: .background), .dropped(0..<200)], [nil: 50, .background: 100], #line),
        ]
        for row in rows {
            var u = UnreadFetched()
            var wasted = WastedBytes()
            for step in row.steps {
                switch step {
                case let .fetched(r, owner): u.mark(r, by: owner)
                case let .read(r): u.read(r)
                case let .dropped(r): wasted += u.dropped(r)
                }
            }
            for owner in ReaderClass.allCases.map(Optional.some) + [nil] {
                XCTAssertEqual(wasted[owner], row.wasted[owner] ?? 0, "\(row.name): \(owner.map(\.rawValue) ?? "open")", line: row.line)
            }
        }
    }

    func testANewVersionWastesEveryUnreadByte() {
        var u = UnreadFetched()
        u.mark(0..<100, by: .player)
        u.mark(200..<210, by: nil)
        let wasted = u.droppedAll()
        XCTAssertEqual(wasted[.player], 100)
        XCTAssertEqual(wasted[nil], 10)
        XCTAssertTrue(u.isEmpty)
    }
}
