import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The data files on disk, a folder at a time (`data/00` … `data/ff`: the low byte of the entry
/// id, `DataFiles.folder`) and a batch at a time within a folder, as the folder is read: a walk
/// over a million files holds one batch of names, never the listing.
///
/// Used by the clean-up after a start (`StartCleanUp`: files no row describes) and by a start
/// whose index has no row (`CacheLoad`: every file goes). Runs on the caller's thread; blocks on
/// the file system.
struct DataFileWalk {
    /// How many data folders there are: one per value of the entry id's low byte.
    static let folders = 256

    let files: DataFiles
    /// Names read before they are handed over.
    let batchSize: Int

    enum Outcome: Equatable {
        /// Every file of the folder was handed over (none, if the folder does not exist).
        case walked
        /// The body asked to stop.
        case stopped
        /// The folder could not be read (nothing in it may be taken for an orphan).
        case unlisted(String)
    }

    /// Hands the data files of folder `n` (`0..<folders`) to `body` in batches (names that are
    /// not data files are skipped); `body` returns false to stop.
    func walk(folder n: Int, _ body: ([FileID]) -> Bool) -> Outcome {
        let path = files.root + "/" + files.folder(entry: Int64(n))
        let read = DirectoryNames.inBatches(in: path, of: batchSize) { names in
            let batch = names.compactMap { name in DataFiles.parse(fileName: name).map { FileID(entry: $0.entry, generation: $0.generation) } }
            return batch.isEmpty || body(batch)
        }
        switch read {
        case .success(true): return .walked
        case .success(false): return .stopped
        case let .failure(error) where error.code == ENOENT: return .walked
        case let .failure(error): return .unlisted("\(error)")
        }
    }
}
