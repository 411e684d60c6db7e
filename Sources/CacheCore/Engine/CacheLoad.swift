import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The start: what the engine needs of the whole index, read as summaries (the bytes on disk
/// and the scan share's, counted into `Evictor`; the last generation handed out: after a clean
/// stop from the one row it left, `CacheIndex.StartSummary`, else summed), and slice
/// files of the layout before data files moved in (once per cache: a listing of every data
/// file is not a start's work). No entry is loaded: each is loaded when first looked up
/// (`EntryLoader`), its data file checked then (`StartupCheck.check`); versions no row is at
/// and files no row describes are cleaned up after the start, in the background, when a crash
/// may have left some (`StartCleanUp`). Runs once, on the thread that makes the engine, before the sweeper
/// starts and before any reader or transfer exists.
struct CacheLoad {
    let configuration: CacheConfiguration
    let store: DataFiles
    let index: CacheIndex
    let shards: [Shard]
    let evictor: Evictor
    let logger: Logger

    /// Counts the bytes the index describes and returns the last generation, and whether data
    /// files may be left that no row describes (false when the index had no row and every file
    /// went); `stored`: what a clean stop left (nothing to sum).
    func run(stored: CacheIndex.Summary? = nil) throws -> (lastGeneration: Int64, filesLeft: Bool) {
        let summary: CacheIndex.Summary
        do { summary = try stored ?? index.summary() } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "\(error)")
        }
        if !index.layoutChecked() {
            // Slice files of the layout before data files are moved in first.
            let check = StartupCheck(store: store, logger: logger, open: configuration.openDataFileForCheck)
            var listedAll = true
            for bucket in check.listed(store.dataDirectory) ?? [] {
                let dir = store.dataDirectory + "/" + bucket
                guard let names = check.listed(dir) else {
                    listedAll = false
                    continue
                }
                for name in names {
                    if let p = DataFiles.parseLegacySlice(fileName: name) {
                        migrate(slice: dir + "/" + name, p.slice, into: p.entry, p.generation)
                    } else if name.hasSuffix(".evicting") {
                        unlink(dir + "/" + name)   // an eviction of the old layout that did not finish
                    }
                }
            }
            if listedAll { index.markLayoutChecked() }
        }
        var filesLeft = true
        if summary.lastGeneration == 0 {
            // No row at all (a new index, or a damaged one set aside): every data file is an
            // orphan, and its name could be taken by the first new entries (ids and generations
            // start again), so they go now, not in the background (a folder a batch at a time).
            let walk = DataFileWalk(files: store, batchSize: configuration.startCleanUpBatch)
            var orphans = 0, unlisted = 0
            for folder in 0..<DataFileWalk.folders {
                let outcome = walk.walk(folder: folder) { batch in
                    for f in batch { store.remove(entry: f.entry, generation: f.generation) }
                    orphans += batch.count
                    return true
                }
                if case let .unlisted(error) = outcome {
                    logger.warning("cannot list a data folder at start; what is in it is kept", metadata: ["error": "\(error)"])
                    unlisted += 1
                }
            }
            if orphans > 0 {
                logger.info("deleted cached files no index row describes", metadata: ["files": "\(orphans)"])
            }
            filesLeft = unlisted > 0
        }
        evictor.addBytes(summary.bytes)
        if evictor.scanShare.isOn { evictor.scanShare.add(summary.scanBytes) }
        return (summary.lastGeneration, filesLeft)
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

extension EngineCore {
    /// The clean-up after the start (`StartCleanUp`), then says it is done (`cleanedUpAfterStart`).
    func cleanUpAfterStartThenSay(floor: Int64) {
        startCleanUp.run(files: store.files, floor: floor, batchSize: configuration.startCleanUpBatch, logger: logger)
        cleanedUpAfterStart.withLock { $0 = true }
        cleanedUpAfterStart.broadcast()
    }
}

extension EngineCore {
    /// Starts counting every entry of the index into the status totals (`RunningTotals`), on a
    /// thread of its own, and returns once its read has begun: the count is of the index as it
    /// is now, before anything of this process changed it, and every change from here on is an
    /// entry's (loaded or new) reported to the totals as it happens. A million entries take
    /// seconds (each URL split into its folder), which the mount does not wait for: until the
    /// count is in, the summary says it is counting (`CacheSummary.counting`).
    /// (Static: the engine's init runs it before anything can load an entry, before `self` is whole.)
    static func countIndexEntries(_ index: CacheIndex, into totals: RunningTotals, logger: Logger,
                                  stop: LockedValue<Bool>, ended: ConditionLock<Bool>, hold: (@Sendable () -> Void)? = nil) {
        totals.countStarted()
        let begun = ConditionLock(false)
        let thread = Thread {
            var sums = CacheTotals()
            do {
                let whole = try index.countEntries(begun: { begun.withLock { $0 = true }; begun.broadcast(); hold?() },
                                                   stop: { stop.withLock { $0 } }) { e in
                    let info = EntryInfo(key: CacheKey(rawValue: ""), url: e.url, finalURL: e.url, length: e.length,
                                         contentType: e.contentType, etag: nil, lastModified: nil, acceptsRanges: true,
                                         generation: 0, validatedAt: .distantPast)
                    sums.replace(nil, with: EntryFigures(info: info, coverage: e.coverage, withErrors: e.withErrors, in: totals))
                }
                if whole { totals.addCounted(sums) }
            } catch {
                logger.warning("cannot count the cache index's entries; the status summary counts only those changed since the start",
                               metadata: ["error": "\(error)"])
                totals.addCounted(CacheTotals())
            }
            ended.withLock { $0 = true }
            ended.broadcast()
        }
        thread.name = "httpcachefs count"
        thread.start()
        begun.wait(until: { $0 })
    }

    /// Stops the start's count if it still runs and waits for its thread (before the index closes).
    func stopCountingIndexEntries() {
        stopCounting.withLock { $0 = true }
        countEnded.wait(until: { $0 })
    }
}
