import Foundation
import Logging

/// The clean-up after a start: the full index check a start after a clean stop left
/// (`CacheIndex.backgroundCheck`), the rows of versions that are not their entry's current one,
/// and the data files no row describes (what a process that died between a data write and its
/// row's commit left, or a crash between a row's deletion and its file's).
///
/// *When.* After a crash (or a new cache, or an index another program wrote) the whole of it;
/// after a clean stop only what that process's clean-up had not done (`CacheIndex.CleanUpProgress`,
/// kept by the clean stop): a clean stop commits every row before it ends, so the files it left
/// are all described, and a start after one walks nothing.
///
/// *Stoppable, in bounded memory.* The old versions are dropped a range of entry ids at a time,
/// the data folders walked one at a time and each in batches (`DataFileWalk`), each batch
/// looked up in the index in one query; a stop (`stop`, at the shutdown's start) is seen between
/// two batches (and interrupts the index check: `CacheIndex.stopBackgroundCheck`), and the progress (folders walked whole, in order) goes into the clean stop's
/// row, so the next start goes on where this one stopped.
///
/// *Never a file being written.* A file no committed row describes may be this process's, its
/// row not written yet. Every generation this process hands out is above the start's floor, and
/// every one an earlier process handed out at or below it (`EngineCore`: the floor a clean stop
/// keeps, or a gap after a crash). So a file no row describes is deleted when its generation is
/// at most the floor, and kept above it: its row commits, or its removal deletes it. Entry ids
/// play no part: a process killed before its new entries' rows committed left files of ids this
/// start hands out again (ids restart after the last committed one), and those must go too.
///
/// Threads: `run` is one job of the engine's pool (`EngineCore`), which the shutdown waits for
/// after `stop`; `stop` and `reached` from any thread. Blocks on the file system and the index.
final class StartCleanUp: Sendable {
    /// Where tests hold the walk (`CacheConfiguration.startCleanUpHook`).
    enum Step: Sendable, Equatable {
        /// About to check the index in full (after a clean stop only: `CacheIndex.backgroundCheck`).
        case indexCheck
        /// About to walk data folder n.
        case folder(Int)
        /// The shutdown asked the clean-up to stop (on the shutdown's thread).
        case stopAsked
    }

    private let stopped = LockedValue(false)
    private let progress: LockedValue<CacheIndex.CleanUpProgress>
    private let hook: (@Sendable (Step) -> Void)?

    /// - Parameter from: how far the clean-up of the process before got (`.none` after a crash).
    private let index: CacheIndex

    init(from: CacheIndex.CleanUpProgress, index: CacheIndex, hook: (@Sendable (Step) -> Void)?) {
        progress = LockedValue(from)
        self.index = index
        self.hook = hook
    }

    /// How far it got: what the clean stop keeps for the next start.
    var reached: CacheIndex.CleanUpProgress { progress.withLock { $0 } }

    /// Asks a running clean-up to stop at its next batch (or one not begun not to begin).
    func stop() {
        stopped.withLock { $0 = true }
        index.stopBackgroundCheck()
        hook?(.stopAsked)
    }

    private var isStopped: Bool { stopped.withLock { $0 } }

    /// The clean-up (see the type's note). `floor`: the start's generation floor.
    func run(files: DataFiles, floor: Int64, batchSize: Int, logger: Logger) {
        guard !isStopped else { return }
        if index.checkLeft.withLock({ $0 }) {   // the full check a start after a clean stop skipped
            hook?(.indexCheck)
            index.backgroundCheck(logger: logger)
        }
        if !reached.oldVersionsDropped { dropOldVersions(index: index, files: files, logger: logger) }
        let first = reached.foldersWalked
        guard first < DataFileWalk.folders else { return }
        let walk = DataFileWalk(files: files, batchSize: max(1, batchSize))
        var orphans = 0
        var inOrder = true   // every folder before this one walked whole
        for folder in first..<DataFileWalk.folders {
            guard !isStopped else { break }
            hook?(.folder(folder))
            var lookUpFailed = false
            let outcome = walk.walk(folder: folder) { batch in
                guard !self.isStopped else { return false }
                let described: Set<FileID>
                do { described = try index.describes(batch) } catch {
                    logger.warning("cannot look data files up in the index; kept until the next start", metadata: ["error": "\(error)"])
                    lookUpFailed = true
                    return false
                }
                for f in batch where !described.contains(f) && f.generation <= floor {
                    files.remove(entry: f.entry, generation: f.generation)
                    orphans += 1
                }
                return true
            }
            switch outcome {
            case .walked:
                if inOrder { progress.withLock { $0.foldersWalked = folder + 1 } }
            case .stopped:
                inOrder = false
            case let .unlisted(error):
                logger.warning("cannot list a data folder; what is in it is kept", metadata: ["error": "\(error)"])
                inOrder = false
            }
            if lookUpFailed || isStopped { break }
        }
        if orphans > 0 {
            logger.info("deleted cached files no index row describes", metadata: ["files": "\(orphans)"])
        }
    }

    /// Drops the rows of old versions (and deletes their files), 64k entry ids at a time.
    private func dropOldVersions(index: CacheIndex, files: DataFiles, logger: Logger) {
        let span: Int64 = 65_536
        do {
            let last = try index.lastExtentEntryID()
            var from: Int64 = 0
            while from <= last {
                guard !isStopped else { return }
                for f in try index.deleteOldVersions(ids: from..<(from + span)) { files.remove(entry: f.entry, generation: f.generation) }
                from += span
            }
            progress.withLock { $0.oldVersionsDropped = true }
        } catch {
            logger.warning("cannot drop the rows of old versions; kept until the next start", metadata: ["error": "\(error)"])
        }
    }
}
