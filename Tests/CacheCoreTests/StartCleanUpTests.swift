import Foundation
import GRDB
import Logging
import TestSupport
import XCTest
@testable import CacheCore

/// The clean-up after a start (`StartCleanUp`): files a killed process wrote before their rows
/// committed go at the next start, a file this process is writing never does, a stop does not
/// wait for the walk (the next start goes on where it stopped), and a start after a clean stop
/// walks nothing.
final class StartCleanUpTests: XCTestCase {
    private let library = CachedLibrary(files: 40, size: 5_000, fileExtension: "jpg", prefix: "httpcachefs-cleanup")
    private var files: Int { library.files }

    private func engine(hook: (@Sendable (StartCleanUp.Step) -> Void)? = nil) throws -> CacheEngine {
        var configuration = library.configuration()
        configuration.startCleanUpHook = hook
        configuration.startCleanUpBatch = 4   // several batches a folder
        return try CacheEngine(configuration: configuration, source: ScriptedSource())
    }

    /// Caches the library wholly and stops the engine cleanly.
    private func cacheLibrary() async throws {
        var configuration = library.configuration()
        configuration.startCleanUpBatch = 4
        try await library.fill(configuration)
    }

    /// A process that ends with the cache open, as after kill -9 (its lock let go, its index
    /// never closed), once its own clean-up is over; returned to write files as it would have.
    private func crashedProcess() throws -> CacheEngine {
        let crashed = try engine()
        crashed.core.cleanedUpAfterStart.wait(until: { $0 })
        crashed.core.directoryLock.release()
        return crashed
    }

    /// Writes a data file as a transfer does before its row is written (`SliceStore`'s writer).
    private static func writeDataFile(_ core: EngineCore, entry: Int64, generation: Int64) throws {
        let fd = try core.store.files.openForWriting(entry: entry, generation: generation)
        let bytes = randomBytes(1000, seed: UInt64(entry))
        XCTAssertEqual(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }, 1000)
        close(fd)
    }

    private func exists(_ core: EngineCore, entry: Int64, generation: Int64) -> Bool {
        FileManager.default.fileExists(atPath: core.store.files.path(entry: entry, generation: generation))
    }

    private func dataFiles() -> [String] { library.dataFiles() }

    private func assertWhollyCached(_ cache: CacheEngine, file: StaticString = #filePath, line: UInt = #line) {
        library.assertWhollyCached(cache, others: true, file: file, line: line)
    }

    /// The folders the clean-up walked, in order.
    private final class Walked: Sendable {
        let folders = LockedValue<[Int]>([])
        var hook: @Sendable (StartCleanUp.Step) -> Void {
            { step in if case let .folder(n) = step { self.folders.withLock { $0.append(n) } } }
        }
    }

    func testAStartAfterACleanStopWalksNoDataFolder() async throws {
        try await cacheLibrary()
        let walked = Walked()
        let cache = try engine(hook: walked.hook)
        defer { cache.shutdown() }
        cache.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertEqual(cache.core.previousStop, .clean)
        XCTAssertEqual(walked.folders.withLock { $0 }, [], "a clean stop left no file without its row")
        assertWhollyCached(cache)
    }

    /// The full check of the index that a start after a clean stop leaves to the background
    /// (`CacheIndex.backgroundCheck`, ~0.35 CPU-s at a million entries) does not hold a stop:
    /// one not begun does not begin (one running is interrupted), and the next start checks again.
    func testAStopBeforeTheIndexCheckSkipsItAndTheNextStartChecks() async throws {
        try await cacheLibrary()
        let steps = LockedValue<[StartCleanUp.Step]>([])
        let atCheck = ConditionLock(false), stopAsked = ConditionLock(false)
        let cache = try engine(hook: { step in
            steps.withLock { $0.append(step) }
            switch step {
            case .indexCheck:
                atCheck.withLock { $0 = true }
                atCheck.broadcast()
                stopAsked.wait(until: { $0 })
            case .stopAsked:
                stopAsked.withLock { $0 = true }
                stopAsked.broadcast()
            case .folder: break
            }
        })
        atCheck.wait(until: { $0 })   // left to the background after a clean stop
        cache.shutdown()
        XCTAssertEqual(steps.withLock { $0 }, [.indexCheck, .stopAsked])
        XCTAssertTrue(cache.core.store.index.backgroundChecking.withLock { $0.stopped && $0.connection == nil })

        let next = LockedValue<[StartCleanUp.Step]>([])
        let again = try engine(hook: { step in next.withLock { $0.append(step) } })
        defer { again.shutdown() }
        again.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertEqual(again.core.previousStop, .clean)
        XCTAssertEqual(next.withLock { $0 }, [.indexCheck], "checked in the background again, and no folder walked")
        assertWhollyCached(again)
    }

    /// kill -9 between a data write and its row's commit: a new entry's file (its id is handed
    /// out again by the next start: ids restart after the last committed one) and a new version
    /// of a cached entry. The next start walks every folder and deletes both.
    func testFilesAKilledProcessWroteBeforeTheirRowsGoAtTheNextStart() async throws {
        try await cacheLibrary()
        let crashed = try crashedProcess()
        let newEntry = (id: crashed.core.store.newEntryID(), generation: crashed.core.ids.makeGeneration())
        let newVersion = (id: Int64(3), generation: crashed.core.ids.makeGeneration())
        try Self.writeDataFile(crashed.core, entry: newEntry.id, generation: newEntry.generation)
        try Self.writeDataFile(crashed.core, entry: newVersion.id, generation: newVersion.generation)
        XCTAssertEqual(dataFiles().count, files + 2)

        let walked = Walked()
        let cache = try engine(hook: walked.hook)
        defer { cache.shutdown() }
        XCTAssertEqual(cache.core.previousStop, .unclean)
        XCTAssertEqual(cache.core.store.newEntryID(), newEntry.id, "the killed process's new id is handed out again")
        cache.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertEqual(walked.folders.withLock { $0 }, Array(0..<256))
        XCTAssertFalse(exists(cache.core, entry: newEntry.id, generation: newEntry.generation), "the new entry's file")
        XCTAssertFalse(exists(cache.core, entry: newVersion.id, generation: newVersion.generation), "the new version's file")
        assertWhollyCached(cache)
        withExtendedLifetime(crashed) {}
    }

    /// While the walk runs, this process writes a new entry's file before its row (the same id
    /// as a killed process's leftover, another generation): the leftover goes, this process's
    /// file stays.
    func testAFileThisProcessWritesBeforeItsRowIsNeverDeleted() async throws {
        try await cacheLibrary()
        let crashed = try crashedProcess()
        let leftover = (id: crashed.core.store.newEntryID(), generation: crashed.core.ids.makeGeneration() + 5)
        try Self.writeDataFile(crashed.core, entry: leftover.id, generation: leftover.generation)

        let started = ConditionLock<EngineCore?>(nil)
        let mine = LockedValue<(id: Int64, generation: Int64)?>(nil)
        let cache = try engine(hook: { step in
            guard step == .folder(0) else { return }
            started.wait(until: { $0 != nil })
            guard let core = started.withLock({ $0 }) else { return }
            // A transfer of this process, between its data write and its row's commit.
            let file = (id: core.store.newEntryID(), generation: core.ids.makeGeneration())
            try? Self.writeDataFile(core, entry: file.id, generation: file.generation)
            mine.withLock { $0 = file }
        })
        started.withLock { $0 = cache.core }
        started.broadcast()
        defer { cache.shutdown() }
        cache.core.cleanedUpAfterStart.wait(until: { $0 })
        let file = try XCTUnwrap(mine.withLock { $0 })
        XCTAssertEqual(file.id, leftover.id, "the same id")
        XCTAssertTrue(exists(cache.core, entry: file.id, generation: file.generation), "this process's file is kept")
        XCTAssertFalse(exists(cache.core, entry: leftover.id, generation: leftover.generation), "the killed process's goes")
        XCTAssertGreaterThan(cache.core.ids.makeGeneration(), leftover.generation, "its generation is never handed out here")
        assertWhollyCached(cache)
        withExtendedLifetime(crashed) {}
    }

    /// A killed process's leftover at the very id and generation the next start would hand out
    /// first: the start hands out generations above a gap after a crash, so its first new file
    /// never takes the leftover's name (whose bytes it would write over); and the gap is kept,
    /// so a start after that process is killed too is above what it handed out.
    func testANewFileNeverTakesTheNameOfAKilledProcesssLeftover() async throws {
        try await cacheLibrary()
        let crashed = try crashedProcess()
        let leftover = (id: crashed.core.store.newEntryID(), generation: crashed.core.ids.makeGeneration())
        try Self.writeDataFile(crashed.core, entry: leftover.id, generation: leftover.generation)

        let held = ConditionLock(false)
        let second = try engine(hook: { step in if step == .folder(0) { held.wait(until: { $0 }) } })
        let first = (id: second.core.store.newEntryID(), generation: second.core.ids.makeGeneration())
        XCTAssertEqual(first.id, leftover.id, "ids restart after the last committed one")
        XCTAssertGreaterThan(first.generation, leftover.generation + EngineIDs.gapAfterACrash - 1, "another name")
        try Self.writeDataFile(second.core, entry: first.id, generation: first.generation)
        held.withLock { $0 = true }
        held.broadcast()
        second.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertFalse(exists(second.core, entry: leftover.id, generation: leftover.generation), "the leftover goes")
        XCTAssertTrue(exists(second.core, entry: first.id, generation: first.generation), "this process's file stays")
        second.core.directoryLock.release()   // killed in turn, its file never described

        let third = try engine()
        defer { third.shutdown() }
        XCTAssertGreaterThan(third.core.ids.makeGeneration(), first.generation + EngineIDs.gapAfterACrash - 1)
        third.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertFalse(exists(third.core, entry: first.id, generation: first.generation), "the second process's leftover goes")
        assertWhollyCached(third)
        withExtendedLifetime((crashed, second)) {}
    }

    /// A clean stop keeps the last generation handed out as the floor: a version whose row never
    /// committed (a transfer past the stop's wait) leaves no name the next start hands out.
    func testACleanStopKeepsTheGenerationsItHandedOut() async throws {
        try await cacheLibrary()
        let cache = try engine()
        let unwritten = cache.core.ids.makeGeneration()
        cache.shutdown()
        let next = try engine()
        defer { next.shutdown() }
        XCTAssertEqual(next.core.previousStop, .clean)
        XCTAssertGreaterThan(next.core.ids.makeGeneration(), unwritten)
    }

    /// A clean stop of a binary that kept no generation floor, whose transfer wrote a file past
    /// the stop (a generation above every row's): the start treats it as after a crash, hands out
    /// generations above a gap, and the clean-up deletes that file.
    func testACacheLastClosedWithoutAFloorGetsTheGapAndItsLeftoverGoes() async throws {
        try await cacheLibrary()
        let older = try engine()
        let leftover = (id: older.core.store.newEntryID(), generation: older.core.ids.makeGeneration())
        try Self.writeDataFile(older.core, entry: leftover.id, generation: leftover.generation)
        older.shutdown()
        // What that binary's index looks like: no floor, no row of this binary's.
        let queue = try DatabaseQueue(path: library.dir + "/index.sqlite")
        try await queue.write { db in try db.execute(sql: "DELETE FROM meta WHERE name IN ('generation_floor', 'start_summary')") }
        try queue.close()

        let cache = try engine()
        defer { cache.shutdown() }
        XCTAssertEqual(cache.core.previousStop, .clean)
        XCTAssertGreaterThan(cache.core.ids.makeGeneration(), leftover.generation + EngineIDs.gapAfterACrash - 1)
        cache.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertFalse(exists(cache.core, entry: leftover.id, generation: leftover.generation), "the leftover goes")
        assertWhollyCached(cache)
    }

    /// A stop while the walk is at folder 0x80 returns without walking the rest; the start after
    /// that clean stop walks the folders left (0x81 on) and deletes what is in them.
    func testAStopDuringTheWalkDoesNotWaitForItAndTheNextStartGoesOn() async throws {
        try await cacheLibrary()
        let crashed = try crashedProcess()
        // Leftovers of the killed process in folder 0x10 (walked before the stop) and 0xf0 (after).
        let early = (id: Int64(0x1000 + 0x10), generation: Int64(1))
        let late = (id: Int64(0x1000 + 0xf0), generation: Int64(1))
        try Self.writeDataFile(crashed.core, entry: early.id, generation: early.generation)
        try Self.writeDataFile(crashed.core, entry: late.id, generation: late.generation)

        let walked = Walked()
        let atMiddle = ConditionLock(false), stopAsked = ConditionLock(false)
        let cache = try engine(hook: { step in
            walked.hook(step)
            switch step {
            case .folder(0x80):
                atMiddle.withLock { $0 = true }
                atMiddle.broadcast()
                stopAsked.wait(until: { $0 })   // the shutdown's stop, then the walk goes on
            case .stopAsked:
                stopAsked.withLock { $0 = true }
                stopAsked.broadcast()
            case .folder, .indexCheck:
                break
            }
        })
        atMiddle.wait(until: { $0 })
        cache.shutdown()
        XCTAssertEqual(walked.folders.withLock { $0 }, Array(0...0x80), "no folder walked after the stop")
        XCTAssertFalse(exists(cache.core, entry: early.id, generation: early.generation), "walked before the stop")
        XCTAssertTrue(exists(cache.core, entry: late.id, generation: late.generation), "not walked yet")

        let next = Walked()
        let again = try engine(hook: next.hook)
        defer { again.shutdown() }
        again.core.cleanedUpAfterStart.wait(until: { $0 })
        XCTAssertEqual(again.core.previousStop, .clean)
        XCTAssertEqual(next.folders.withLock { $0 }, Array(0x81..<256), "on from where the stop left it")
        XCTAssertFalse(exists(again.core, entry: late.id, generation: late.generation))
        assertWhollyCached(again)
        withExtendedLifetime(crashed) {}
    }
}
