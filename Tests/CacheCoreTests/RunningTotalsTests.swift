import GRDB
import XCTest
@testable import CacheCore
import TestSupport

/// The status summary's totals are kept as entries change (`RunningTotals`), not added up from
/// every entry at each poll: they must stay exactly what a walk of the entries adds up, as entries
/// come and go.
final class RunningTotalsTests: XCTestCase {
    // MARK: the sums, against a model

    /// A table of steps, each an entry's figures replaced (nil: not live), against a model that
    /// keeps every entry's figures and adds them all up again after each step.
    func testTotalsEqualTheSumOfTheModelsEntriesAfterEveryStep() {
        func f(_ folder: Int32, listing: Bool = false, length: Int64, cached: Int64, slices: Int, errors: Bool = false) -> EntryFigures {
            EntryFigures(folder: folder, listing: listing, lengthBytes: length, cachedBytes: cached, slices: slices,
                         withErrors: errors, contentType: listing ? "text/html" : "video/mp4")
        }
        let steps: [(what: String, entry: String, figures: EntryFigures?)] = [
            ("a new file goes live", "a", f(0, length: 100, cached: 10, slices: 1)),
            ("another in the same folder", "b", f(0, length: 50, cached: 0, slices: 0)),
            ("a listing in another folder", "l", f(1, listing: true, length: 0, cached: 7, slices: 1)),
            ("a grows", "a", f(0, length: 100, cached: 100, slices: 2)),
            ("b's first bytes", "b", f(0, length: 50, cached: 20, slices: 1)),
            ("an error noted on b", "b", f(0, length: 50, cached: 20, slices: 1, errors: true)),
            ("a evicted in part", "a", f(0, length: 100, cached: 40, slices: 1)),
            ("a new version of a: nothing cached, a new length", "a", f(0, length: 120, cached: 0, slices: 0)),
            ("the listing removed", "l", nil),
            ("a removed", "a", nil),
            ("a made again", "a", f(0, length: 120, cached: 120, slices: 2)),
            ("b removed", "b", nil),
            ("a removed again", "a", nil),
        ]
        var totals = CacheTotals()
        var model: [String: EntryFigures] = [:]
        for step in steps {
            totals.replace(model[step.entry], with: step.figures)
            model[step.entry] = step.figures
            var walked = CacheTotals()
            for figures in model.values { walked.replace(nil, with: figures) }
            XCTAssertEqual(totals, walked, step.what)
            XCTAssertEqual(totals.entries, model.count, step.what)
            XCTAssertEqual(totals.cachedBytes, model.values.reduce(0) { $0 + $1.cachedBytes }, step.what)
        }
        XCTAssertEqual(totals, CacheTotals(), "every entry gone: nothing left, no empty folder")
    }

    func testSlicesCountEachSliceOnceWhateverItsRanges() {
        let table: [(ranges: [Range<Int64>], slices: Int)] = [
            ([], 0),
            ([0..<1], 1),
            ([0..<10], 1),
            ([0..<11], 2),
            ([3..<4, 6..<8], 1),          // two ranges in one slice
            ([9..<12, 15..<25], 3),       // slices 0-1, then 1-2: slice 1 once
            ([0..<10, 20..<30], 2),
        ]
        for (ranges, slices) in table {
            var set = RangeSet()
            for r in ranges { set.insert(r) }
            XCTAssertEqual(EntryFigures.slices(set, sliceSize: 10), slices, "\(ranges)")
        }
    }

    // MARK: an engine's totals, against a walk of its entries

    private var dir: String!
    private let slice: Int64 = 1 << 20

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-totals-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// `fewInMemory`: one shard keeping one idle entry (the entry budget at nothing), so entries
    /// are let go and loaded again.
    private func engine(_ source: ScriptedSource, fewInMemory: Bool = false, holdCount: (@Sendable () -> Void)? = nil) throws -> CacheEngine {
        var configuration = CacheConfiguration(directory: dir, capacity: 64 << 20, freeSpaceFloor: 0, sliceSize: slice,
                                               readTimeout: 10, shardCount: fewInMemory ? 1 : 16, engineClock: .realTime)
        if fewInMemory { configuration.entryMemoryBudget = 0 }
        configuration.startCountHook = holdCount
        return try CacheEngine(configuration: configuration, source: source)
    }

    private func read(_ cache: CacheEngine, _ url: String, _ range: Range<Int>, maxAge: TimeInterval? = nil) async throws {
        let info = try await cache.open(url: url, maxAge: maxAge)
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        _ = try await reader.read(offset: Int64(range.lowerBound), length: range.count)
        cache.core.activeSinks.wait(until: { $0 == 0 })
        cache.core.writes.waitIdle()
    }

    /// The summary's figures from the running totals equal those of a walk of every entry.
    private func assertTotalsMatchAWalk(_ cache: CacheEngine, _ step: String, file: StaticString = #filePath, line: UInt = #line) {
        cache.core.totals.waitCounted()
        XCTAssertNil(cache.summary(showDirectory: false, totals: nil).counting, "counted, \(step)", file: file, line: line)
        let list = cache.list()
        let walked = cache.summary(files: list, showDirectory: false, totals: nil)
        let running = cache.summary(showDirectory: false, totals: nil)
        XCTAssertEqual(running.files, walked.files, "files, \(step)", file: file, line: line)
        XCTAssertEqual(running.usedBytes, walked.usedBytes, "bytes, \(step)", file: file, line: line)
        XCTAssertEqual(running.slices, walked.slices, "slices, \(step)", file: file, line: line)
        XCTAssertEqual(cache.runningFolderTotals(fetching: [:]), cache.folderGroups(list, filter: "", fetching: [:]).map(\.totals),
                       "folders, \(step)", file: file, line: line)
        let document = cache.statusDocument(version: "test", showDirectory: false, view: .summary(filter: ""))
        XCTAssertEqual(document.cache.files, walked.files, step, file: file, line: line)
        XCTAssertEqual(document.folders, cache.folderGroups(list, filter: "", fetching: [:]).map(\.totals), step, file: file, line: line)
    }

    func testAnEnginesTotalsStayThoseOfItsEntriesAsTheyComeAndGo() async throws {
        let (a, b, c, listing) = (Library.a, Library.b, Library.c, Library.listing)
        let source = Library.source()
        var cache = try engine(source)
        assertTotalsMatchAWalk(cache, "empty")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 0)

        try await read(cache, a, 0..<(3 << 20))
        assertTotalsMatchAWalk(cache, "a added, whole")
        try await read(cache, b, 0..<1000)
        try await read(cache, c, 0..<100_000)
        try await read(cache, listing, 0..<20)
        assertTotalsMatchAWalk(cache, "b's start, c whole, a listing")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 4)

        try await read(cache, b, (3 << 20)..<(4 << 20))
        assertTotalsMatchAWalk(cache, "b grown")

        _ = try cache.pin(url: b, ranges: [0..<Int64(1 << 20)], limit: cache.pinLimit)
        assertTotalsMatchAWalk(cache, "b pinned")
        XCTAssertEqual(cache.runningFolderTotals(fetching: [:]).first { $0.path == "/media/" }?.pinnedBytes, 1 << 20)

        let key = try cache.key(for: c)
        cache.core.shard(for: key).locked { $0[key]?.noteError("a read failed", at: Date(timeIntervalSince1970: 0)) }
        assertTotalsMatchAWalk(cache, "an error noted on c")

        source.set(a, .init(bytes: randomBytes(2 << 20, seed: 4), etag: "\"a2\""))
        try await read(cache, a, 0..<1000, maxAge: 0)
        assertTotalsMatchAWalk(cache, "a new version of a")

        XCTAssertGreaterThan(cache.core.evictor.evictNow(bytes: 64 << 20), 0)
        assertTotalsMatchAWalk(cache, "evicted all but the pins")

        try await cache.remove(url: c)
        assertTotalsMatchAWalk(cache, "c removed")

        cache.shutdown()
        cache = try engine(source)
        assertTotalsMatchAWalk(cache, "after a restart")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 3)

        try cache.clear()
        assertTotalsMatchAWalk(cache, "cleared")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 0)
        XCTAssertEqual(cache.runningFolderTotals(fetching: [:]), [])
        cache.shutdown()
    }

    /// Entries let go (in the index only) and loaded again count once: a let-go subtracts
    /// nothing, a load adds nothing, and a change after a load counts its difference only;
    /// after a restart the count of the index stands for the entries never loaded.
    func testTotalsStayExactAsEntriesAreLetGoAndLoadedAgain() async throws {
        let (a, b, c, listing) = (Library.a, Library.b, Library.c, Library.listing)
        let source = Library.source()
        var cache = try engine(source, fewInMemory: true)
        func inMemory() -> Int { cache.core.shards[0].locked { $0.count } }

        try await read(cache, a, 0..<(3 << 20))
        try await read(cache, b, 0..<1000)
        try await read(cache, c, 0..<100_000)
        try await read(cache, listing, 0..<20)
        cache.core.loader.trimEntries()
        XCTAssertEqual(inMemory(), 1, "all but one let go")
        assertTotalsMatchAWalk(cache, "three of four let go")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 4)

        try await read(cache, b, (3 << 20)..<(4 << 20))
        assertTotalsMatchAWalk(cache, "b loaded again and grown")
        cache.core.loader.trimEntries()
        try await read(cache, a, 0..<1000)
        cache.core.loader.trimEntries()
        assertTotalsMatchAWalk(cache, "a loaded and let go again")

        try await cache.remove(url: c)
        assertTotalsMatchAWalk(cache, "c removed (loaded for it)")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 3)

        cache.shutdown()
        cache = try engine(source, fewInMemory: true)
        assertTotalsMatchAWalk(cache, "after a restart: counted from the index, nothing loaded")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 3)
        try await read(cache, b, 0..<1000)
        cache.core.loader.trimEntries()
        assertTotalsMatchAWalk(cache, "b loaded after the restart and let go")

        source.set(a, .init(bytes: randomBytes(2 << 20, seed: 4), etag: "\"a2\""))
        try await read(cache, a, 0..<1000, maxAge: 0)
        cache.core.loader.trimEntries()
        assertTotalsMatchAWalk(cache, "a new version of a, loaded for it")

        XCTAssertGreaterThan(cache.core.evictor.evictNow(bytes: 64 << 20), 0)
        cache.core.loader.trimEntries()
        assertTotalsMatchAWalk(cache, "evicted, entries loaded for their turn")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).usedBytes, 0)

        try cache.clear()
        assertTotalsMatchAWalk(cache, "cleared")
        XCTAssertEqual(cache.runningFolderTotals(fetching: [:]), [])
        cache.shutdown()
    }

    // MARK: the start: one row after a clean stop, a count after a kill

    /// What an older binary (or a kill, then any start) leaves: the cache marked in use, which
    /// voids the clean stop's row (the index's trigger), then stopped cleanly without a new one.
    private func markUsedByAnOlderBinary() throws {
        let db = try DatabaseQueue(path: dir + "/index.sqlite")
        try db.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO meta (name, value) VALUES ('stop', 'running')")
            try db.execute(sql: "INSERT OR REPLACE INTO meta (name, value) VALUES ('stop', 'clean')")
        }
        try db.close()
    }

    /// Writes the index as a tool would, without marking the cache in use.
    private func writeTheIndexDirectly(_ sql: String, _ arguments: StatementArguments) throws {
        let db = try DatabaseQueue(path: dir + "/index.sqlite")
        try db.write { db in try db.execute(sql: sql, arguments: arguments) }
        try db.close()
    }

    /// Holds the start's count once its read began, until `release`.
    private final class CountGate: Sendable {
        private let state = ConditionLock(0)   // 1: holding, 2: released
        var hook: @Sendable () -> Void {
            { [state] in
                state.withLock { $0 = 1 }
                state.broadcast()
                state.wait(until: { $0 == 2 })
            }
        }
        func waitHeld() { state.wait(until: { $0 >= 1 }) }
        func release() {
            state.withLock { $0 = 2 }
            state.broadcast()
        }
    }

    func testAStartAfterACleanStopTakesTheTotalsItLeftAndCountsNothing() async throws {
        let source = Library.source()
        var cache = try engine(source)
        try await read(cache, Library.a, 0..<(3 << 20))
        try await read(cache, Library.c, 0..<100_000)
        try await read(cache, Library.listing, 0..<20)
        assertTotalsMatchAWalk(cache, "before the stop")
        let before = cache.summary(showDirectory: false, totals: nil)
        cache.shutdown()

        let gate = CountGate()
        cache = try engine(source, holdCount: gate.hook)   // a count would wait at the gate forever
        defer { cache.shutdown() }
        XCTAssertTrue(cache.core.totals.counted, "nothing to count: the clean stop's totals")
        XCTAssertNil(cache.summary(showDirectory: false, totals: nil).counting)
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, before.files)
        XCTAssertEqual(cache.core.totalBytes, before.usedBytes, "the evictor's bytes from the row")
        assertTotalsMatchAWalk(cache, "after a clean stop, from its row")
        try await read(cache, Library.b, 0..<1000)
        assertTotalsMatchAWalk(cache, "a new entry after the start")
    }

    /// An entry counted by the start's count (in the index when its read began) changes and goes
    /// while the count is held: the totals end exact; and while it counts, the summary shows no
    /// folder and no figure below 0 (a removed file would make its folder's figures negative).
    func testEntriesChangingWhileTheStartCountsEndWithExactTotals() async throws {
        let source = Library.source()
        var cache = try engine(source)
        try await read(cache, Library.a, 0..<(3 << 20))
        try await read(cache, Library.b, 0..<1000)
        try await read(cache, Library.c, 0..<100_000)
        cache.shutdown()
        try markUsedByAnOlderBinary()

        let gate = CountGate()
        cache = try engine(source, holdCount: gate.hook)
        defer { cache.shutdown() }
        gate.waitHeld()
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).counting, true, "no row: the index is counted")
        try await cache.remove(url: Library.c)
        try await read(cache, Library.b, (3 << 20)..<(4 << 20))
        try await read(cache, Library.listing, 0..<20)
        let counting = cache.statusDocument(version: "test", showDirectory: false, view: .summary(filter: ""))
        XCTAssertEqual(counting.cache.counting, true)
        XCTAssertEqual(counting.folders, [], "no folder while counting")
        XCTAssertEqual(counting.foldersTotal, 0)
        XCTAssertGreaterThanOrEqual(counting.cache.files, 0)
        XCTAssertGreaterThanOrEqual(counting.cache.slices, 0)

        gate.release()
        assertTotalsMatchAWalk(cache, "c removed, b grown, a listing added while the count was held")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 3)
    }

    /// A clean stop's row is void once another binary used the cache: the start counts.
    func testARowLeftBeforeAnOlderBinaryUsedTheCacheIsNotTrusted() async throws {
        let source = Library.source()
        var cache = try engine(source)
        try await read(cache, Library.a, 0..<(3 << 20))
        cache.shutdown()
        try markUsedByAnOlderBinary()
        let gate = CountGate()
        cache = try engine(source, holdCount: gate.hook)
        defer { cache.shutdown() }
        gate.waitHeld()
        XCTAssertFalse(cache.core.totals.counted, "counted again")
        gate.release()
        assertTotalsMatchAWalk(cache, "counted")
    }

    /// A program that wrote the index without marking it in use (a tool, the bench's fill) left
    /// the row as it was, but changed the file: the start sums and counts.
    func testARowLeftBeforeAnotherProgramWroteTheIndexIsNotTrusted() async throws {
        let source = Library.source()
        var cache = try engine(source)
        try await read(cache, Library.a, 0..<(3 << 20))
        try await read(cache, Library.c, 0..<100_000)
        cache.shutdown()
        try writeTheIndexDirectly("DELETE FROM entry WHERE url = ?", [Library.c])
        let gate = CountGate()
        cache = try engine(source, holdCount: gate.hook)
        defer { cache.shutdown() }
        gate.waitHeld()
        XCTAssertFalse(cache.core.totals.counted, "counted again")
        gate.release()
        assertTotalsMatchAWalk(cache, "counted")
        XCTAssertEqual(cache.summary(showDirectory: false, totals: nil).files, 1)
    }

    /// Two folders of one origin: two films and a listing page in one, a small file in the other.
    private enum Library {
        static let a = "http://origin.test/media/a.mp4", b = "http://origin.test/media/b.mp4"
        static let c = "http://origin.test/other/c.mp4", listing = "http://origin.test/media/"
        static func source() -> ScriptedSource {
            let source = ScriptedSource()
            source.set(a, .init(bytes: randomBytes(3 << 20, seed: 1), etag: "\"a1\""))
            source.set(b, .init(bytes: randomBytes(5 << 20, seed: 2), etag: "\"b\""))
            source.set(c, .init(bytes: randomBytes(100_000, seed: 3), etag: "\"c\""))
            source.set(listing, .init(bytes: Array("<html>listing</html>".utf8), etag: "\"l\""))
            return source
        }
    }

}
