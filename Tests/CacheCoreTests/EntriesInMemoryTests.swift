import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// Entries in memory by what is in use (`EntryLoader`): an engine whose entry budget is far
/// smaller than what it caches lets idle entries go and loads them again from the index, and
/// keeps serving every cached byte right, without asking the origin again, across eviction,
/// pins, restarts and a process killed without a stop; concurrent opens of an entry not in
/// memory load it once; eviction takes the oldest slices whether their entries are in memory
/// or not. Nothing here waits on time: the clock is moved by hand, loads are held by a hook.
final class EntriesInMemoryTests: XCTestCase {
    private var dir: String!
    private let files = 24
    private let size = 30_000

    override func setUp() {
        dir = NSTemporaryDirectory() + "httpcachefs-inmemory-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func url(_ n: Int) -> String { "http://origin.test/library/\(n).jpg" }
    private func bytes(_ n: Int) -> [UInt8] { randomBytes(size, seed: UInt64(n) + 1) }

    private func source() -> ScriptedSource {
        let source = ScriptedSource()
        for n in 0..<files { source.set(url(n), .init(bytes: bytes(n), etag: "\"\(n)\"")) }
        return source
    }

    /// Two shards, one idle entry each: every entry beyond that lives in the index only.
    private func configuration(capacity: Int64 = 1 << 30, clock: MovableClock? = nil) -> CacheConfiguration {
        var c = CacheConfiguration(directory: dir, capacity: capacity, freeSpaceFloor: 0, sliceSize: 64 << 10,
                                   readTimeout: 10, shardCount: 2, engineClock: .realTime)
        c.entryMemoryBudget = 2 * EntryLoader.entryMemoryEstimate
        if let clock { c.clock = { clock.now } }
        return c
    }

    private func entriesInMemory(_ cache: CacheEngine) -> Int {
        cache.core.shards.reduce(0) { $0 + $1.locked { $0.count } }
    }

    private func readAll(_ cache: CacheEngine, _ n: Int, file: StaticString = #filePath, line: UInt = #line) async throws {
        let reader = cache.makeReader(for: try await cache.open(url: url(n)))
        defer { reader.close() }
        let got = try await reader.read(offset: 0, length: size)
        XCTAssertTrue(got == bytes(n), "bytes of file \(n)", file: file, line: line)
    }

    /// Reads every file, waits for the writes, lets idle entries go.
    private func readEveryFile(_ cache: CacheEngine) async throws {
        for n in 0..<files { try await readAll(cache, n) }
        cache.core.activeSinks.wait(until: { $0 == 0 })
        cache.core.writes.waitIdle()
        cache.core.loader.trimEntries()
    }

    func testABudgetSmallerThanTheEntriesServesEveryCachedByteWithoutTheOrigin() async throws {
        let source = source()
        let cache = try CacheEngine(configuration: configuration(), source: source)
        try await readEveryFile(cache)
        XCTAssertLessThanOrEqual(entriesInMemory(cache), 2, "idle entries past the budget are let go")
        XCTAssertEqual(cache.usage.entries, files)
        XCTAssertEqual(cache.usage.bytes, Int64(files * size))
        source.resetCounters()
        try await readEveryFile(cache)
        XCTAssertEqual(source.requestLog.count, 0, "entries loaded again serve their bytes from disk")
        XCTAssertEqual(cache.usage.bytes, Int64(files * size), "a load or a let-go changes no total")
        for n in 0..<files { XCTAssertEqual(cache.status(url: url(n))?.cachedBytes, Int64(size), "file \(n)") }
        cache.shutdown()
    }

    func testEveryCachedByteSurvivesARestartAndAKillWithEntriesNotInMemory() async throws {
        let first = try CacheEngine(configuration: configuration(), source: source())
        try await readEveryFile(first)
        first.shutdown()

        let source = source()
        let restarted = try CacheEngine(configuration: configuration(), source: source)
        XCTAssertEqual(entriesInMemory(restarted), 0, "the start loads no entry")
        XCTAssertEqual(restarted.usage.bytes, Int64(files * size), "the bytes on disk come from the index's summary")
        try await readEveryFile(restarted)
        XCTAssertEqual(source.requestLog.count, 0)
        restarted.core.store.index.flush()
        // Killed: no stop, the lock let go as the kernel would.
        restarted.core.directoryLock.release()

        let after = try CacheEngine(configuration: configuration(), source: source)
        defer { after.shutdown() }
        try await readEveryFile(after)
        XCTAssertEqual(source.requestLog.count, 0)
        XCTAssertEqual(after.usage.bytes, Int64(files * size))
        withExtendedLifetime(restarted) {}
    }

    func testEvictionAndPinsHoldAcrossEntriesNotInMemory() async throws {
        let clock = MovableClock()
        // Room for half the files: reading them all evicts the oldest, in or out of memory.
        let capacity = Int64(files / 2 * size)
        let source = source()
        let cache = try CacheEngine(configuration: configuration(capacity: capacity, clock: clock), source: source)
        defer { cache.shutdown() }
        XCTAssertGreaterThan(try cache.pin(url: url(0), ranges: [0..<Int64(size)], limit: capacity), 0)
        for round in 0..<2 {
            for n in 0..<files {
                clock.advance(1)
                try await readAll(cache, n)
                cache.core.activeSinks.wait(until: { $0 == 0 })
                cache.core.writes.waitIdle()
                cache.core.loader.trimEntries()
                XCTAssertLessThanOrEqual(cache.usage.bytes, capacity + Int64(size), "round \(round), file \(n): the cap holds")
            }
        }
        XCTAssertEqual(cache.status(url: url(0))?.cachedBytes, Int64(size), "the pinned file kept its bytes")
        XCTAssertLessThanOrEqual(entriesInMemory(cache), 2 + 1)
    }

    /// Files 0..5 cached, then read at t = 1..6; file 1 read again at t = 10 (in memory, the rest let go):
    /// eviction of two files' bytes takes 0 and 2, the oldest by last read across both.
    func testEvictionTakesTheOldestWhetherInMemoryOrNot() async throws {
        let clock = MovableClock()
        let cache = try CacheEngine(configuration: configuration(clock: clock), source: source())
        defer { cache.shutdown() }
        for n in 0..<6 { try await readAll(cache, n) }
        cache.core.activeSinks.wait(until: { $0 == 0 })
        cache.core.writes.waitIdle()
        // Read again, all hits now: each read stamps its slices with the test's clock.
        for n in 0..<6 {
            clock.advance(1)
            try await readAll(cache, n)
        }
        cache.core.loader.trimEntries()
        cache.core.maintenance.writeReadStats()
        clock.advance(4)
        try await readAll(cache, 1)
        cache.core.evictor.queue.clear()
        XCTAssertEqual(cache.core.evictor.evictNow(bytes: Int64(2 * size)), Int64(2 * size))
        let left = (0..<6).filter { (cache.status(url: url($0))?.cachedBytes ?? 0) > 0 }
        XCTAssertEqual(left, [1, 3, 4, 5])
    }

    /// Eight opens of an entry not in memory while its load is held: one load, every open answered.
    func testConcurrentOpensOfAnEntryNotInMemoryLoadItOnce() async throws {
        let first = try CacheEngine(configuration: configuration(), source: source())
        try await readEveryFile(first)
        first.shutdown()

        let source = source()
        var c = configuration()
        c.revalidateAfter = 3600
        let cache = try CacheEngine(configuration: c, source: source)
        defer { cache.shutdown() }
        let key = try cache.key(for: url(3))
        let loads = Locked(0)
        let entered = ConditionLock(false)
        let gate = ConditionLock(false)
        cache.core.testHook = { step in
            guard case let .entryLoading(k) = step, k == key else { return }
            loads.mutate { $0 += 1 }
            entered.withLock { $0 = true }
            entered.broadcast()
            gate.wait(until: { $0 })
        }
        let answers = Locked<[Result<EntryInfo, CacheError>]>([])
        let answered = ConditionLock(0)
        // From eight threads: an open loads on its caller's thread, the others wait for that load.
        let third = url(3)
        for _ in 0..<8 {
            Thread {
                cache.core.opener.open(url: third, maxAge: 3600) { result in
                    answers.mutate { $0.append(result) }
                    answered.withLock { $0 += 1 }
                    answered.broadcast()
                }
            }.start()
        }
        entered.wait(until: { $0 })
        XCTAssertEqual(answers.value.count, 0, "no open is answered before its entry is in")
        gate.withLock { $0 = true }
        gate.broadcast()
        answered.wait(until: { $0 == 8 })
        XCTAssertEqual(loads.value, 1, "one load for every open")
        let infos = answers.value.compactMap { try? $0.get() }
        XCTAssertEqual(infos.count, 8)
        XCTAssertEqual(Set(infos.map(\.generation)).count, 1)
        XCTAssertEqual(source.requestLog.count, 0, "fresh from the index: nothing asked of the origin")
    }

    func testEntriesLoadedAheadAreInMemoryBeforeTheirOpens() async throws {
        let source = source()
        var c = configuration()
        c.entryMemoryBudget = 16 * EntryLoader.entryMemoryEstimate   // 8 a shard: a load ahead of 2 trims nothing
        c.revalidateAfter = 3600
        let cache = try CacheEngine(configuration: c, source: source)
        defer { cache.shutdown() }
        try await readEveryFile(cache)
        source.resetCounters()
        func inMemory(_ key: CacheKey) -> Bool { cache.core.shards.of(key).locked { $0[key] != nil } }
        let away = try (0..<files).filter { !inMemory(try cache.key(for: url($0))) }
        XCTAssertGreaterThanOrEqual(away.count, 2, "the budget let some go")
        let ahead = try away.prefix(2).map { try cache.key(for: url($0)) }
        let unknown = try cache.key(for: "http://origin.test/library/never.jpg")
        let started = ConditionLock<Set<CacheKey>>([])
        cache.core.testHook = { step in
            guard case let .entryLoading(k) = step else { return }
            started.withLock { _ = $0.insert(k) }
            started.broadcast()
        }
        cache.loadAhead(ahead + [unknown])
        started.wait(until: { $0.isSuperset(of: ahead + [unknown]) })
        for key in ahead { cache.core.loader.loadNow(key) }   // waits for the job's load of it
        XCTAssertTrue(ahead.allSatisfy(inMemory), "loaded ahead")
        XCTAssertFalse(inMemory(unknown), "a key the index has not stays out")

        let loadsAtOpen = Locked(0)
        cache.core.testHook = { step in if case .entryLoading = step { loadsAtOpen.mutate { $0 += 1 } } }
        for n in away.prefix(2) { try await readAll(cache, n) }
        XCTAssertEqual(loadsAtOpen.value, 0, "their opens found them in memory")
        XCTAssertEqual(source.requestLog.count, 0, "served from the index and the disk")
    }

    // MARK: Which idle entries are let go (`LetGoOrder`)

    /// One shard, four entries in memory, no sweeper tick (a manual scheduler): entries are let go
    /// when the test trims, or when a load passes the budget by a quarter.
    private func sweepConfiguration() -> CacheConfiguration {
        var c = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 64 << 10,
                                   readTimeout: 10, shardCount: 1, engineClock: .manual(.manual(), wallStart: Date()))
        c.entryMemoryBudget = 4 * EntryLoader.entryMemoryEstimate
        c.revalidateAfter = 3600
        return c
    }

    /// A cache of every file, filled by another engine: this one starts with no entry in memory.
    private func filledThenRestarted() async throws -> (CacheEngine, ScriptedSource) {
        let first = try CacheEngine(configuration: configuration(), source: source())
        try await readEveryFile(first)
        first.shutdown()
        let source = source()
        return (try CacheEngine(configuration: sweepConfiguration(), source: source), source)
    }

    private func inMemory(_ cache: CacheEngine, _ n: Int) throws -> Bool {
        let key = try cache.key(for: url(n))
        return cache.core.shards.of(key).locked { $0[key] != nil }
    }

    func testASweepThroughMoreFilesThanTheBudgetKeepsTheFileOpenedAgain() async throws {
        let (cache, source) = try await filledThenRestarted()
        defer { cache.shutdown() }
        try await readAll(cache, 0)
        try await readAll(cache, 0)
        for n in 1..<files {
            try await readAll(cache, n)
            cache.core.loader.trimEntries()
        }
        XCTAssertTrue(try inMemory(cache, 0), "the file opened again stays in memory through the sweep")
        XCTAssertEqual(entriesInMemory(cache), 4)
        XCTAssertFalse(try inMemory(cache, 1), "the sweep's first file is let go")
        XCTAssertEqual(source.requestLog.count, 0)
    }

    func testAnEntryInUseIsNeverLetGo() async throws {
        let (cache, source) = try await filledThenRestarted()
        defer { cache.shutdown() }
        let held = cache.makeReader(for: try await cache.open(url: url(5)))
        defer { held.close() }
        for n in 0..<files where n != 5 {
            try await readAll(cache, n)
            cache.core.loader.trimEntries()
        }
        XCTAssertTrue(try inMemory(cache, 5), "an entry with an open reader stays in memory")
        let got = try await held.read(offset: 0, length: size)
        XCTAssertTrue(got == bytes(5))
        XCTAssertEqual(source.requestLog.count, 0)
    }

    func testOneTrimLetsGoDownToTheBudget() async throws {
        let (cache, _) = try await filledThenRestarted()
        defer { cache.shutdown() }
        let shard = cache.core.shards[0]
        for n in 0..<files { XCTAssertTrue(cache.core.loader.loadNow(try cache.key(for: url(n)), recent: false)) }
        XCTAssertEqual(entriesInMemory(cache), files, "a look does not trim")
        cache.core.loader.trim(shard)
        XCTAssertEqual(entriesInMemory(cache), 4)
    }
}
