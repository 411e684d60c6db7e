import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The check of a data file against its index rows, as its entry is loaded (`EntryLoader`):
/// which slices' bytes are really there, which rows lie over holes or name a missing file, which
/// slices no row describes. (Files no row describes at all are `StartCleanUp`'s.)
///
/// It never deletes what it could not look at. Files are opened one at a time (the check of a
/// library of thousands of files must not need thousands of descriptors), and only "no such file"
/// counts as missing: any other failure (out of descriptors, permissions, an I/O error) leaves the
/// file's rows and bytes as they are, with a warning. A directory that cannot be listed keeps the
/// files in it too.
struct StartupCheck {
    let store: DataFiles
    let logger: Logger
    /// Opens a data file for reading: `open(2)` (a failing stand-in in tests); -1 and errno.
    let open: (String) -> Int32

    struct Outcome {
        /// Slices whose bytes are in their file, or that could not be checked (kept as they are).
        var kept = Set<CacheIndex.SliceID>()
        /// Slices of a current version whose rows must go: the file is missing, or a row lies
        /// over a hole (a crash between an eviction's punch and its commit).
        var stale = Set<CacheIndex.SliceID>()
        /// Slices punched because no row describes them.
        var unusedSlices = 0
        /// Files or directories that could not be checked, and were kept as they were.
        var unchecked = 0
    }

    /// Checks one data file against its rows (the start's check of a file, or the check of an
    /// entry loaded from the index: `EntryLoader`): its slices go to `kept` or `stale`, and
    /// slices of it no row describes are freed. True when the file is there and described.
    func check(_ file: FileID, slices: [CacheIndex.SliceID], extents: [CacheIndex.SliceID: [CacheIndex.ExtentRow]],
               into outcome: inout Outcome) -> Bool {
        let path = store.path(entry: file.entry, generation: file.generation)
        let fd = open(path)
        if fd < 0 {
            let code = errno
            if code == ENOENT {
                outcome.stale.formUnion(slices)
                return false
            }
            logger.warning("cannot check a data file; keeping it and its rows", metadata: [
                "path": "\(path)", "error": "\(String(cString: strerror(code)))"])
            outcome.kept.formUnion(slices)
            outcome.unchecked += 1
            return true
        }
        defer { Glibc.close(fd) }
        var kept = Set<Int64>()
        for sid in slices {
            let answers = extents[sid, default: []].map { store.holds($0.start..<$0.end, fd: fd) }
            if answers.contains(false) {
                outcome.stale.insert(sid)
                continue
            }
            if answers.contains(nil) {
                logger.warning("cannot check a slice; keeping it", metadata: ["path": "\(path)", "slice": "\(sid.slice)"])
                outcome.unchecked += 1
            }
            outcome.kept.insert(sid)
            kept.insert(sid.slice)
        }
        guard !kept.isEmpty else { return false }
        // Slices no row describes (stale ones included, before their rows go: a crash in
        // between leaves rows over holes again) are freed.
        var st = stat()
        guard fstat(fd, &st) == 0 else { return true }
        let count = (Int64(st.st_size) + store.sliceSize - 1) / store.sliceSize
        let free = (0..<count).filter { !kept.contains($0) && store.hasData(store.sliceRange($0), fd: fd) }
        do {
            try store.punch(entry: file.entry, generation: file.generation, slices: free)
            outcome.unusedSlices += free.count
        } catch {
            logger.warning("cannot free unused slices of a data file", metadata: ["error": "\(error)"])
        }
        return true
    }

    /// The names in `directory`: none when it does not exist, nil (with a warning) when it
    /// cannot be listed.
    func listed(_ directory: String) -> [String]? {
        switch DirectoryNames.names(in: directory) {
        case let .success(names):
            return names
        case let .failure(error):
            if error.code == ENOENT { return [] }
            logger.warning("cannot list a cache directory at start; keeping what is in it", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
