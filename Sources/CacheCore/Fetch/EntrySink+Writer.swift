import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `EntrySink`'s writer side: the jobs a transfer's batches become on the `WriteQueue` lane of
/// its entry's data file, run one after the other on that lane, each holding the sink's
/// `writer` lock for its length. A job writes its chunks where there is room (`makeRoom`, which
/// may evict), extends the extent's checksum (`ChecksummedExtent`), hands finished extents to the
/// `SliceStore`, and records what
/// it wrote as the entry's machine says (`writeCompleted`, `recordWritten`); after a write found
/// no room, bytes only go to the reads waiting for a while (`mayWrite`). It may block on the disk
/// (`pwrite`, `open`), the eviction lock and the shard lock, never on the source's side.
extension EntrySink {
    /// Writes pending chunks, records what was written, and gives their room back.
    func write(_ chunks: [PendingBytes.Chunk], generation: Int64, _ w: inout Writer) {
        // Pinned from before the write until the coverage is recorded: an eviction in between
        // would delete rows and files of bytes the record below then claims.
        let slices = engine.store.slices(of: chunks[0].range.lowerBound..<chunks[chunks.count - 1].range.upperBound)
        shard.locked { $0[entry]?.pin(slices, generation: generation) }
        engine.testHook?(.sinkWillWrite(offset: chunks[0].range.lowerBound))
        var written: [Range<Int64>] = []
        // Chunks that follow each other in the file, the slice and memory are written at once.
        var i = 0
        while i < chunks.count {
            let first = chunks[i].bytes, start = chunks[i].range.lowerBound
            let slice = engine.store.sliceIndex(of: start)
            var j = i + 1, count = first.count
            while j < chunks.count, chunks[j].range.lowerBound == start + Int64(count),
                  engine.store.sliceIndex(of: chunks[j].range.lowerBound) == slice,
                  chunks[j].bytes.baseAddress == first.baseAddress.map({ $0 + count }) {
                count += chunks[j].bytes.count
                j += 1
            }
            if store(UnsafeRawBufferPointer(start: first.baseAddress, count: count), at: start, slice: slice, generation: generation, &w) {
                written += chunks[i..<j].map(\.range)
            }
            i = j
        }
        let now = engine.now().timeIntervalSince1970
        shard.locked { entries in
            // Removed: its pending bytes went with it.
            guard let entry = entries[self.entry] else { return }
            guard let recorded = engine.evictor.countingScanBytes(entry, {
                entry.machine.writeCompleted(chunks, written: written, generation: generation,
                                             sliceSize: engine.store.sliceSize, now: now)
            }) else { return }
            // Bytes the disk refused leave the queue for nowhere: reads that took them as queued
            // (the retained share had no room for them) hold them now, past the cap.
            for (w, c) in recorded.hold { w.fill(c.range, in: c.chunkStorage, at: c.offset, force: true) }
            entry.unpin(slices, generation: generation)
            engine.evictor.addBytes(recorded.added)
        }
        // Their room in the queued share comes back now, whoever else still holds their memory
        // (reads, answers): what reads hold never keeps a transfer paused (see `MemoryBudget`).
        for c in chunks { c.writerDone() }
    }

    /// Writes new bytes of one slice if there is room, extending the current extent's checksum.
    /// False when they were not written: they then reached only the reads waiting for them.
    private func store(_ piece: UnsafeRawBufferPointer, at offset: Int64, slice: Int64, generation: Int64,
                       _ w: inout Writer) -> Bool {
        let now = engine.now().timeIntervalSince1970
        guard Machine.mayWrite(now: now, pausedUntil: w.noRoomUntil) else { return false }
        guard engine.evictor.makeRoom(for: Int64(piece.count)) else {
            noRoom(now, "no room left under the cap and the free-space floor", &w)
            return false
        }
        do {
            guard try openSlice(slice, generation: generation, &w) else { return false }
            do {
                try engine.store.write(piece, at: offset, fd: w.fd, entry: w.entryID, generation: generation)
            } catch let e as StorageError where e.isDiskFull {
                // Another program filled the disk: make room and try once more.
                engine.evictor.space.refill(0)
                guard engine.evictor.makeRoom(for: Int64(piece.count)) else { throw e }
                try engine.store.write(piece, at: offset, fd: w.fd, entry: w.entryID, generation: generation)
            }
        } catch {
            // Whatever was half written is not recorded: the extent restarts after the hole.
            closeExtent(&w)
            noRoom(now, "\(error)", &w)
            return false
        }
        if let x = w.extent, x.continues(slice: slice, at: offset) {
            w.extent!.append(piece)
        } else {
            closeExtent(&w)
            w.extent = ChecksummedExtent(entryID: w.entryID, generation: generation, slice: slice, at: offset, piece)
        }
        return true
    }

    /// Stops caching for a second (reads keep being answered), with a warning now and then.
    private func noRoom(_ now: Double, _ why: String, _ w: inout Writer) {
        w.noRoomUntil = now + Machine.noRoomPause
        // Noted on the entry while it is in its table; a removed entry's note is lost, as its
        // errors are (it was noted on an entry nobody would see again), and never lands on a
        // new entry for the same key.
        let url = shard.locked { entries -> String? in
            guard let entry = entries[self.entry] else { return nil }
            entry.noteError("not cached (\(why)); served from the network", at: engine.now())
            return entry.info.url
        } ?? self.url
        if engine.fetches.noRoomWarnings.shouldWarn(now: now) {
            engine.logger.warning("cannot cache; reads are served from the network", metadata: ["url": "\(url)", "why": "\(why)"])
        }
    }

    /// Makes `slice` the one being written (pinned, its version's data file open). False (nothing
    /// open) when the slice is being evicted or the entry moved on; the file a removed entry's
    /// writer created is deleted again.
    private func openSlice(_ slice: Int64, generation: Int64, _ w: inout Writer) throws -> Bool {
        if w.fd >= 0, w.slice == slice, w.generation == generation { return true }
        closeExtent(&w)
        if w.fd >= 0, w.generation == generation {
            // The same data file: only the pin moves to the next slice.
            let old = w.slice
            let moved: Bool = shard.locked { entries in
                guard let entry = entries[self.entry], entry.isCurrent(generation), !entry.evicting.contains(slice) else { return false }
                entry.pin(slice...slice, generation: generation)
                entry.unpin(old...old, generation: generation)
                return true
            }
            if moved {
                w.slice = slice
                return true
            }
        }
        closeFile(&w)
        let id: Int64? = shard.locked { entries in
            guard let entry = entries[self.entry], entry.isCurrent(generation), !entry.evicting.contains(slice) else { return nil }
            entry.pin(slice...slice, generation: generation)
            return entry.id
        }
        guard let id else { return false }
        let opened: Int32
        do {
            opened = try engine.store.openForWriting(entry: id, generation: generation)
        } catch {
            shard.locked { $0[entry]?.unpin(slice...slice, generation: generation) }
            throw error
        }
        // Removed while the file was being opened: the removal's sweep may already have run.
        guard isCurrent(generation) else {
            close(opened)
            engine.store.removeFile(entry: id, generation: generation)
            return false
        }
        w.fd = opened
        w.slice = slice
        w.generation = generation
        w.entryID = id
        return true
    }

    /// Whether the entry is still in its table at `generation` (under the shard lock).
    private func isCurrent(_ generation: Int64) -> Bool {
        shard.locked { $0[entry]?.isCurrent(generation) ?? false }
    }

    /// Hands the finished extent, with its checksum, to the store's index (its bytes are already
    /// written), unless the entry moved on: then its rows are going or gone, and the bytes with them.
    func closeExtent(_ w: inout Writer) {
        guard let x = w.extent else { return }
        w.extent = nil
        guard isCurrent(x.generation) else { return }
        engine.store.record(x)
    }

    func closeFile(_ w: inout Writer) {
        guard w.fd >= 0 else { return }
        close(w.fd)
        w.fd = -1
        let s = w.slice, g = w.generation
        shard.locked { $0[entry]?.unpin(s...s, generation: g) }
        w.slice = -1
    }
}
