import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#endif

/// What a clean stop leaves for the next start, so a start after it reads one row instead of
/// passing over every row (issue 51: a million entries took ~1 s of sums and 5 s of counting).
///
/// *The row.* `meta` row `start_summary`: JSON of the start's summaries (`Summary`: the bytes
/// and the scan share's bytes of current versions, the last generation), worked out by the same
/// SQL as a start after a crash, at the close, once every row is committed; and the status totals
/// (`StoredTotals`) of the engine, kept only when they agree with the index (its entries and
/// bytes), else counted again at the next start. *Void while in use.* `beginUse` deletes it in
/// the transaction that marks the cache running; and a trigger deletes it whenever any binary
/// marks the cache running (`stop` set to anything but `clean`), so an older binary, which
/// knows nothing of the row, cannot leave one behind that no longer says what the index holds.
/// After a kill or a crash there is no row: the start sums the index as before. And the row is
/// trusted only when the index file is as the close left it (the clean stamp below): a program
/// that wrote the index without marking it in use (a tool, a copy) changed the file.
///
/// *The clean-up's progress.* `cleanUp` in the row (`CleanUpProgress`): how far the clean-up
/// after the start (`StartCleanUp`: rows of old versions, files no row describes) got before the
/// stop. A start after a clean stop goes on from there, and does nothing when it was done: a
/// clean stop leaves no file without its row. After a crash (no row) it is done again, whole.
///
/// *The clean stamp.* `index.clean`, beside the index, written after the close: the index file's
/// inode, size and times then. A start that finds the file exactly so (nothing wrote it since)
/// skips `PRAGMA quick_check` (~0.35 CPU-s at a million entries) and runs it in the background
/// (`backgroundCheck`); a damage it finds there (one no write made: a bad sector) is logged,
/// and the close leaves no stamp, so the next start checks and sets the index aside. Any write
/// by another program, an older binary or a copy changes the times: checked at start, as always.
extension CacheIndex {
    static let startSummaryName = "start_summary"

    /// The status totals as a clean stop leaves them: by folder place, not by this process's
    /// folder numbers.
    struct StoredTotals: Codable, Sendable, Equatable {
        struct Folder: Codable, Sendable, Equatable {
            var origin: String
            var path: String
            var files: Int
            var listings: Int
            var lengthBytes: Int64
            var cachedBytes: Int64
            var withErrors: Int
        }
        var entries: Int
        var cachedBytes: Int64
        var slices: Int
        var folders: [Folder]
    }

    /// The row's contents.
    struct StartSummary: Codable, Sendable, Equatable {
        var bytes: Int64
        var scanBytes: Int64
        var lastGeneration: Int64
        var totals: StoredTotals?
        /// Nil in a row of a binary before it: done again, whole.
        var cleanUp: CleanUpProgress?

        var summary: Summary { Summary(bytes: bytes, scanBytes: scanBytes, lastGeneration: lastGeneration) }
    }

    /// How far the clean-up after a start got (`StartCleanUp`), in the order it goes.
    struct CleanUpProgress: Codable, Sendable, Equatable {
        /// The rows of versions that are not their entry's current one are dropped.
        var oldVersionsDropped: Bool
        /// Data folders looked through for files no row describes, from `data/00` on
        /// (`DataFileWalk`): the next start walks the rest.
        var foldersWalked: Int

        /// Nothing done yet (after a crash, or a new cache).
        static let none = CleanUpProgress(oldVersionsDropped: false, foldersWalked: 0)
        static let done = CleanUpProgress(oldVersionsDropped: true, foldersWalked: DataFileWalk.folders)
    }

    /// Makes the trigger that voids the row when the cache is marked in use (at every open: not a
    /// migration, so an older binary still opens the cache).
    static func makeStartSummaryTriggers(_ db: Database) throws {
        for event in ["INSERT", "UPDATE"] {
            try db.execute(sql: """
                CREATE TRIGGER IF NOT EXISTS start_summary_void_on_\(event.lowercased()) AFTER \(event) ON meta
                WHEN NEW.name = 'stop' AND NEW.value != 'clean'
                BEGIN DELETE FROM meta WHERE name = '\(startSummaryName)'; END
                """)
        }
    }

    /// The row, if the last stop was clean and left one (read in `beginUse`'s transaction).
    static func readStartSummary(_ db: Database) throws -> StartSummary? {
        guard let text = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE name = ?", arguments: [startSummaryName]) else {
            return nil
        }
        return try? JSONDecoder().decode(StartSummary.self, from: Data(text.utf8))
    }

    /// The row a clean close writes: the summaries as a start would sum them now, and `totals`
    /// if they agree with the index's entries and bytes. Runs under the writer, everything committed.
    func makeStartSummary(_ db: Database, totals: StoredTotals?, cleanUp: CleanUpProgress?) throws -> StartSummary {
        let s = try Self.summary(db)
        var kept = totals
        if let t = totals {
            let entries = try Int.fetchOne(db, sql: "SELECT count(*) FROM entry") ?? 0
            if t.entries != entries || t.cachedBytes != s.bytes { kept = nil }
        }
        return StartSummary(bytes: s.bytes, scanBytes: s.scanBytes, lastGeneration: s.lastGeneration, totals: kept, cleanUp: cleanUp)
    }

    static func writeStartSummary(_ summary: StartSummary, _ db: Database) throws {
        let text = String(decoding: try JSONEncoder().encode(summary), as: UTF8.self)
        try writeMeta(db, startSummaryName, text)
    }
}

/// `index.clean`: the index file as a clean close left it (see `CacheIndex`'s start summary note).
struct CleanStopStamp: Equatable {
    var inode: UInt64
    var size: Int64
    var modified: Int64
    var changed: Int64

    static let name = "index.clean"

    /// The index file's stamp now, nil if it cannot be looked at.
    static func of(_ indexPath: String) -> CleanStopStamp? {
        var st = stat()
        guard stat(indexPath, &st) == 0 else { return nil }
        return CleanStopStamp(inode: UInt64(st.st_ino), size: Int64(st.st_size),
                              modified: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec),
                              changed: Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec))
    }

    var text: String { "\(inode) \(size) \(modified) \(changed)\n" }

    init(inode: UInt64, size: Int64, modified: Int64, changed: Int64) {
        (self.inode, self.size, self.modified, self.changed) = (inode, size, modified, changed)
    }

    init?(text: String) {
        let w = text.split(whereSeparator: \.isWhitespace)
        guard w.count == 4, let i = UInt64(w[0]), let s = Int64(w[1]), let m = Int64(w[2]), let c = Int64(w[3]) else { return nil }
        self.init(inode: i, size: s, modified: m, changed: c)
    }

    /// Whether the index is as the last clean close left it; the stamp is gone afterwards (the
    /// start is about to write the index). Read through `held` when given.
    static func takeMatches(indexPath: String, held: HeldDirectory?) -> Bool {
        let stampPath = (indexPath as NSString).deletingLastPathComponent + "/" + name
        let fd = held.map { $0.open(name, O_RDONLY) } ?? Glibc.open(stampPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        Glibc.close(fd)
        if let held { _ = held.unlink(name) } else { unlink(stampPath) }
        guard n > 0, let stamp = CleanStopStamp(text: String(decoding: buffer[0..<n], as: UTF8.self)) else { return false }
        return of(indexPath) == stamp
    }

    /// Writes the stamp of the index as it is now (after a clean close).
    static func write(indexPath: String, held: HeldDirectory?) {
        guard let stamp = of(indexPath) else { return }
        let stampPath = (indexPath as NSString).deletingLastPathComponent + "/" + name
        let fd = held.map { $0.open(name, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600) }
            ?? Glibc.open(stampPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return }
        let bytes = Array(stamp.text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        Glibc.close(fd)
    }
}
