import XCTest
@testable import CacheCore
import TestSupport

/// Races between a transfer's unlocked steps and removal, eviction or a remote change, each
/// replayed in one exact order with a hand-driven source and the engine's test hook.
final class EngineRaceTests: GatedEngineTestCase {
    func testAnEntryRemovedWhileATransferWritesGainsNoBytesAndLeavesNoFiles() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        let before = cache.usage.bytes

        let reader = cache.makeReader(for: info)
        let answered = expectation(description: "read")
        let read = ResultBox<[UInt8]>()
        reader.read(offset: 2 << 20, length: 64 << 10) { read.set($0); answered.fulfill() }
        let transfer = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(transfer.request.start, 2 << 20)
        XCTAssertTrue(transfer.partial(length: length))
        // The entry is removed (a live playlist refresh) after the writer took the bytes and
        // before it wrote and recorded them.
        cache.core.testHook = { [url] step in
            if case .sinkWillWrite = step { cache.core.testHook = nil; try? cache.remove(url: url) }
        }
        transfer.send(data[(2 << 20)..<((2 << 20) + (64 << 10))])
        wait(for: [answered], timeout: 5)
        transfer.finish()
        cache.core.writes.waitIdle()

        XCTAssertLessThan(cache.usage.bytes, before, "the removal took the entry's bytes")
        XCTAssertEqual(cache.usage.bytes, 0, "a removed entry gains no bytes")
        XCTAssertEqual(dataFiles(), [], "no data file reappears after the removal's sweep")
        XCTAssertNil(cache.status(url: url))
    }

    /// A fetch a locked block planned, whose entry was removed (and made anew for the same URL)
    /// before it was launched, starts no transfer: its handle names the removed entry, which
    /// the launch no longer finds (before handles, the transfer started and stopped at its
    /// first bytes).
    func testALaunchWhoseEntryLeftBeforeItStartedStartsNoTransfer() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        _ = try open(cache, source)
        let core = cache.core
        let key = try cache.key(for: url)
        let shard = core.shard(for: key)
        let entry = try XCTUnwrap(shard.locked { $0[key]?.handle })
        let id = core.makeID()
        shard.locked { entries in
            entries[entry]!.machine.transferStarted(id, start: 1 << 20, end: 2 << 20, reader: nil, now: Date().timeIntervalSince1970)
        }
        try cache.remove(url: url)
        cache.open(url: url) { _ in }   // a new entry for the same key (its probe starts)
        XCTAssertNotEqual(shard.locked { $0[key]?.handle }, entry, "another entry, another handle")
        let before = source.transfers.count
        core.transfers.launch(Launch(entry: entry, fetch: .init(start: 1 << 20, end: 2 << 20), id: id))
        XCTAssertEqual(source.transfers.count, before, "no transfer for the removed entry")
        XCTAssertNil(core.handles.existing(id))
        XCTAssertEqual(core.activeSinks.withLock { $0 }, 1, "only the new entry's probe has a sink")
        source.finishAll()
    }

    /// A transfer that finds no room to write after its entry was removed notes it nowhere: the
    /// note is lost with the removed entry (as before handles, when it went to an entry nobody
    /// saw again), and never lands on a new entry for the same URL.
    func testTheNoRoomNoteOfARemovedEntryIsLostNotGivenToTheNextEntryOfItsURL() throws {
        let source = GatedSource()
        let cache = try engine(source, capacity: 16 << 10)   // no room for a 64 KiB write
        defer { cache.shutdown() }
        let info = try open(cache, source)
        let key = try cache.key(for: url)
        let reader = cache.makeReader(for: info)
        let answered = expectation(description: "read")
        reader.read(offset: 2 << 20, length: 64 << 10) { _ in answered.fulfill() }
        let transfer = try XCTUnwrap(source.transfers.last)
        XCTAssertTrue(transfer.partial(length: length))
        let wrote = expectation(description: "the writer took the bytes")
        cache.core.testHook = { [url] step in
            guard case .sinkWillWrite = step else { return }
            cache.core.testHook = nil
            try? cache.remove(url: url)
            cache.open(url: url) { _ in }   // a new entry for the key, probing
            wrote.fulfill()
        }
        transfer.send(data[(2 << 20)..<((2 << 20) + (64 << 10))])
        wait(for: [answered, wrote], timeout: 5)
        cache.core.writes.waitIdle()
        transfer.finish()
        let errors = cache.core.shard(for: key).locked { $0[key]?.recentErrors }
        XCTAssertEqual(errors, [], "the new entry has no note of the removed one's write")
        reader.close()
        source.finishAll()
    }

    func testAnEvictionCommittingWhileATransferWritesTheSameSliceKeepsMemoryAndIndexInStep() throws {
        let source = GatedSource()
        let cache = try engine(source)
        defer { cache.shutdown() }
        let info = try open(cache, source)   // slice 0 holds 0..<256 KiB, unpinned

        // A transfer for more of slice 0 is running when the eviction frees slice 0.
        let reader = cache.makeReader(for: info)
        let answered = expectation(description: "read")
        let read = ResultBox<[UInt8]>()
        reader.read(offset: 512 << 10, length: 64 << 10) { read.set($0); answered.fulfill() }
        let transfer = try XCTUnwrap(source.transfers.last)
        transfer.partial(length: length)
        let slice0Bytes = data[(512 << 10)..<((512 << 10) + (64 << 10))]
        cache.core.testHook = { step in
            guard case .evictionFreedSlices = step else { return }
            cache.core.testHook = nil
            // Between the punch and the row delete, the transfer delivers bytes of slice 0.
            transfer.send(slice0Bytes)
        }
        // Evict slice 0 only (the read pins it now, so unpin by evicting before it was pinned:
        // the transfer's bytes are the ones under test).
        let evicted = evictSlice0(cache)
        XCTAssertGreaterThan(evicted, 0)
        transfer.finish()
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try read.get(), Array(data[(512 << 10)..<((512 << 10) + (64 << 10))]),
                       "the waiting read got its bytes from memory")

        // What memory says is cached is exactly what the index records.
        cache.core.writes.waitIdle()
        cache.core.index.flush()
        let status = try XCTUnwrap(cache.status(url: url))
        let rows = try cache.core.index.extents(entryID: cache.core.commands.entryID(url: url)!, generation: info.generation)
        var indexed = RangeSet()
        for r in rows { indexed.insert(r.start..<r.end) }
        XCTAssertEqual(status.cachedRanges, indexed.ranges, "memory and index agree")
    }

    /// Evicts slice 0 of the entry while its read (pinned) waits: pins of slice 0 are lifted for
    /// the eviction itself, as if the read had not pinned it yet.
    private func evictSlice0(_ cache: CacheEngine) -> Int64 {
        let core = cache.core
        let key = try! cache.key(for: url)
        let shard = core.shard(for: key)
        let (entry, generation) = shard.locked { ($0[key]!.handle, $0[key]!.info.generation) }
        let pins = shard.locked { entries in
            var pins = 0
            while entries[entry]!.isPinned(0) { entries[entry]!.unpin(0...0, generation: generation); pins += 1 }
            return pins
        }
        let freed = core.evictor.evictNow(bytes: 1)
        shard.locked { for _ in 0..<pins { $0[entry]!.pin(0...0, generation: generation) } }
        return freed
    }

    func testWithRevalidateAfterZeroAnOpenRightAfterATransferConfirmedTheEntryStillAsksTheOrigin() throws {
        let source = GatedSource()
        let cache = try CacheEngine(configuration: CacheConfiguration(directory: dir, freeSpaceFloor: 0, sliceSize: 1 << 20,
                                                                     revalidateAfter: 0, readTimeout: 10, initialReadAhead: 0, engineClock: .realTime),
                                    source: source)
        defer { cache.shutdown() }
        let info = try open(cache, source)
        // A read's transfer answers: its head confirms the entry (validatedAt = now).
        let reader = cache.makeReader(for: info)
        reader.read(offset: 1 << 20, length: 4096) { _ in }
        let transfer = try XCTUnwrap(source.transfers.last)
        XCTAssertTrue(transfer.partial(length: length))
        // The next open must still revalidate: a confirmation is no answer to "did it change?".
        let before = source.transfers.count
        cache.open(url: url) { _ in }
        XCTAssertEqual(source.transfers.count, before + 1, "the open started a probe")
        XCTAssertEqual(source.transfers.last?.request.start, 0)
        reader.close()
        source.finishAll()
    }

    func testPinsOfAnOldGenerationAreReleasedAsNoOps() {
        let info = EntryInfo(key: try! KeyRules().key(for: url), url: url, finalURL: url, length: length,
                             contentType: nil, etag: "\"a\"", lastModified: nil, acceptsRanges: true,
                             generation: 1, validatedAt: Date())
        let entry = EntryState(id: 1, info: info, lastAccess: 0)
        entry.pin(0...1, generation: 1)       // a hit of version 1, reading from disk
        _ = entry.machine.generationStarted(2, keeping: nil)   // the remote file changed meanwhile
        entry.pin(1...1, generation: 2)       // a read of version 2 waits on slice 1
        entry.unpin(0...1, generation: 1)     // the old hit finishes
        XCTAssertTrue(entry.isPinned(1), "the new read's pin survives the old read's release")
        entry.unpin(1...1, generation: 2)
        XCTAssertFalse(entry.isPinned(1))
        entry.markRemoved()
        entry.pin(1...1, generation: 2)
        XCTAssertFalse(entry.isPinned(1), "a removed entry takes no pins")
    }
}
