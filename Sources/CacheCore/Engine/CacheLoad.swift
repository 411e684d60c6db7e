import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The start: the index read into the engine's shards, checked against the data files
/// (`StartupCheck`), slice files of the layout before data files moved in, and the bytes on
/// disk counted (`Evictor.addBytes`). Runs once, on the thread that makes the engine, before the
/// sweeper starts and before any reader or transfer exists; takes each shard lock briefly.
struct CacheLoad {
    let configuration: CacheConfiguration
    let store: DataFiles
    let index: CacheIndex
    let shards: [Shard]
    let evictor: Evictor
    let logger: Logger

    private func shard(for key: CacheKey) -> Shard { EngineCore.shard(for: key, in: shards) }

    /// Loads the index into memory, dropping extents whose files are gone or were being evicted
    /// when a previous process died, and deleting data files (and punching slices) that no row
    /// describes; what cannot be checked is kept (`StartupCheck`).
    func run() throws -> Int64 {
        var lastGeneration: Int64 = 0
        let loaded: (entries: [CacheIndex.EntryRow], extents: [CacheIndex.ExtentRow])
        do { loaded = try index.loadAll() } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "\(error)")
        }
        // Each entry is made in its shard's table, under its lock (the table is a `LockedValue`):
        // what the steps below need of it is its key and version, by row id.
        var byID: [Int64: (key: CacheKey, generation: Int64)] = [:]
        for r in loaded.entries {
            let info = r.info
            shard(for: info.key).locked { entries in
                let e = EntryState(id: r.id, info: info, lastAccess: r.lastAccess)
                e.machine.loaded(r)
                entries.add(e)
            }
            byID[r.id] = (info.key, info.generation)
            lastGeneration = max(lastGeneration, info.generation)
        }
        // Slice files of the layout before data files are moved in first.
        let check = StartupCheck(store: store, logger: logger, open: configuration.openDataFileForCheck)
        for bucket in check.listed(store.dataDirectory) ?? [] {
            let dir = store.dataDirectory + "/" + bucket
            for name in check.listed(dir) ?? [] {
                if let p = DataFiles.parseLegacySlice(fileName: name) {
                    migrate(slice: dir + "/" + name, p.slice, into: p.entry, p.generation)
                } else if name.hasSuffix(".evicting") {
                    unlink(dir + "/" + name)   // an eviction of the old layout that did not finish
                }
            }
        }
        // Slices scanners read (`ScanShare`), by entry: marked once their bytes are loaded.
        var scanSlices: [Int64: [Int64]] = [:]
        if evictor.scanShare.isOn {
            do {
                for sid in try index.loadScanSlices() where byID[sid.entryID]?.generation == sid.generation {
                    scanSlices[sid.entryID, default: []].append(sid.slice)
                }
            } catch {
                logger.warning("the marks of scanners' slices could not be read; they are kept as other slices until read again",
                               metadata: ["error": "\(error)"])
            }
        }
        var extentsBySlice: [CacheIndex.SliceID: [CacheIndex.ExtentRow]] = [:]
        for x in loaded.extents {
            extentsBySlice[.init(entryID: x.entryID, generation: x.generation, slice: x.slice), default: []].append(x)
        }
        let outcome = check.run(extents: extentsBySlice) { file in byID[file.entry]?.generation == file.generation }
        for (entryID, kept) in Dictionary(grouping: outcome.kept, by: \.entryID) {
            guard let key = byID[entryID]?.key else { continue }
            shard(for: key).locked { entries in
                guard let e = entries[key] else { return }
                for sid in kept {
                    evictor.addBytes(e.machine.sliceLoaded(sid.slice, extents: (extentsBySlice[sid] ?? []).lazy.map { $0.start..<$0.end }))
                }
                e.machine.loadedUnchecked(kept.map(\.slice))
                if let marked = scanSlices[entryID] {
                    e.machine.scanSlicesLoaded(marked)
                    evictor.scanShare.add(e.scanBytes)
                }
            }
        }
        let stale = outcome.stale, orphans = outcome.orphans
        if !stale.isEmpty || !orphans.isEmpty || outcome.unusedSlices > 0 {
            logger.info("cleaning the cache: dropping rows whose bytes are gone, deleting what no row describes", metadata: [
                "stale_slices": "\(stale.count)", "orphan_files": "\(orphans.count)", "unused_slices": "\(outcome.unusedSlices)"])
            try? index.deleteSlices(Array(stale)) {
                for f in orphans { store.remove(entry: f.entry, generation: f.generation) }
            }
        }
        if outcome.unchecked > 0 {
            logger.warning("some cached files could not be checked at start and were kept as they were",
                           metadata: ["unchecked": "\(outcome.unchecked)"])
        }
        return lastGeneration
    }

    /// Moves a slice file of the layout before data files into its data file (start only). The
    /// slice file is gone afterwards; bytes that did not make it read as a hole, whose rows are
    /// then dropped (and the bytes fetched again).
    private func migrate(slice path: String, _ slice: Int64, into entry: Int64, _ generation: Int64) {
        defer { unlink(path) }
        let from = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard from >= 0 else { return }
        defer { Glibc.close(from) }
        guard let to = try? store.openForWriting(entry: entry, generation: generation) else { return }
        defer { Glibc.close(to) }
        var st = stat()
        guard fstat(from, &st) == 0 else { return }
        var inOffset = off_t(0), outOffset = off_t(slice * configuration.sliceSize)
        var left = Int(st.st_size)
        while left > 0 {
            let n = LinuxFileCalls.copyFileRange(from: from, at: &inOffset, to: to, at: &outOffset, length: left)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            left -= n
        }
    }
}
