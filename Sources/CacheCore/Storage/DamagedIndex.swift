import Foundation
import GRDB
import Logging

/// A damaged index (a bad sector, a disk that lied about a flush, another program writing into
/// it) must not lock the user out of the cache: `mount`, `cache ls`, `cache verify` and `cache
/// clear` all failed with "database disk image is malformed", and the only way out was deleting
/// the directory by hand.
///
/// At open, `PRAGMA quick_check` looks at every page. A damaged index is set aside, renamed
/// `index.sqlite.damaged-TIMESTAMP` (kept for a post-mortem, never read again), with a warning,
/// and the cache starts empty: the data files it described are then orphans, which the start's
/// check deletes. Rebuilding rows from the data files is not attempted (a data file knows its
/// bytes, not their URL, validators or checksums). Errors that are not damage (busy, I/O, no
/// permission, a full disk) are thrown as they are: they say nothing about the file's contents.
/// An index exactly as a clean close left it (`CleanStopStamp`: nothing wrote it since) is
/// checked after the start instead, in the background (`backgroundCheck`): the check walks every
/// page, ~0.35 CPU-s at a million entries.
extension CacheIndex {
    /// Opens the index at `path`, setting it aside and starting a new one if it is damaged.
    static func openSettingAsideIfDamaged(path: String, held: HeldDirectory? = nil, logger: Logger,
                                          now: @Sendable () -> Date) throws -> CacheIndex {
        do {
            // Untouched since a clean close (its stamp): checked in the background instead.
            let untouched = CleanStopStamp.takeMatches(indexPath: path, held: held)
            let index = try CacheIndex(path: path, held: held)
            // The small tables the start reads are checked now all the same (a start must not
            // fail on them): a few pages.
            if untouched, try index.quickCheck(tables: ["meta", "pin", "grdb_migrations", "sqlite_sequence"]).isEmpty {
                index.checkLeft.withLock { $0 = true }
                index.untouchedSinceCleanClose.withLock { $0 = true }
                return index
            }
            let problems = try index.quickCheck()
            guard !problems.isEmpty else { return index }
            try? index.pool.close()
            try setAside(path: path, cause: problems.prefix(3).joined(separator: "; "), logger: logger, at: now())
        } catch let error as DatabaseError where isDamage(error) {
            try setAside(path: path, cause: "\(error)", logger: logger, at: now())
        }
        return try CacheIndex(path: path, held: held)
    }

    /// The check a start skipped (an index as its clean close left it), run after the start (a
    /// job of the pool): a damage found is logged, and the index is set aside at the next start
    /// (the close leaves no clean stamp). Returns what it found. On a connection of its own, so
    /// that a stop (`stopBackgroundCheck`) interrupts it without touching the pool's: a check
    /// cut short says nothing, and the next start after a clean stop checks in the background
    /// again.
    @discardableResult
    func backgroundCheck(logger: Logger) -> [String] {
        guard checkLeft.withLock({ $0 }) else { return [] }
        checkLeft.withLock { $0 = false }
        let problems: [String]
        do {
            var c = Configuration()
            c.readonly = true
            c.busyMode = .timeout(10)
            let connection = try DatabaseQueue(path: path, configuration: c)
            defer {
                backgroundChecking.withLock { $0.connection = nil }
                try? connection.close()
            }
            guard backgroundChecking.withLock({ state -> Bool in
                state.connection = connection
                return !state.stopped
            }) else { return [] }
            problems = try connection.read { db in
                let rows = try String.fetchAll(db, sql: "PRAGMA quick_check")
                return rows == ["ok"] ? [] : rows
            }
        } catch let error as DatabaseError where Self.isDamage(error) {
            problems = ["\(error)"]
        } catch {
            return []   // not damage (busy, I/O, interrupted): nothing said of the file's contents
        }
        guard !problems.isEmpty else { return [] }
        damageFound.withLock { $0 = true }
        logger.error("the cache index is damaged; it is set aside at the next start (its files are then fetched again)",
                     metadata: ["cause": "\(problems.prefix(3).joined(separator: "; "))"])
        return problems
    }

    /// Stops the check in the background: one not begun does not begin, one running is
    /// interrupted (SQLite stops it at its next step). A stop that comes between the check's
    /// last look at this and its first step waits for the check (a fraction of a second at a
    /// million entries).
    func stopBackgroundCheck() {
        backgroundChecking.withLock { state in
            state.stopped = true
            state.connection?.interrupt()
        }
    }

    /// What `PRAGMA quick_check` found wrong (in `tables` and their indexes only, when given);
    /// empty when the index is sound.
    func quickCheck(tables: [String]? = nil) throws -> [String] {
        try pool.read { db in
            var problems: [String] = []
            for table in tables ?? [""] {
                let rows = try String.fetchAll(db, sql: table.isEmpty ? "PRAGMA quick_check" : "PRAGMA quick_check(\(table))")
                if rows != ["ok"] { problems += rows }
            }
            return problems
        }
    }

    /// SQLITE_CORRUPT and SQLITE_NOTADB: the file's contents are wrong, not its access.
    static func isDamage(_ error: DatabaseError) -> Bool {
        error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB
    }

    /// Renames the index and its WAL and shared-memory files out of the way.
    private static func setAside(path: String, cause: String, logger: Logger, at time: Date) throws {
        let stamp = Self.stamp(time)
        let target = path + ".damaged-" + stamp
        guard rename(path, target) == 0 else {
            throw StorageError(path: path, message: "the index is damaged (\(cause)) and cannot be set aside: "
                               + String(cString: strerror(errno)))
        }
        for suffix in ["-wal", "-shm"] { _ = rename(path + suffix, target + suffix) }
        logger.warning("the cache index is damaged; set it aside and starting with an empty cache (its data files will be deleted)",
                       metadata: ["damaged": "\(target)", "cause": "\(cause)"])
    }

    /// `20261123T204500Z`: sorts by time, no characters a shell or file system minds.
    static func stamp(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d%02d%02dT%02d%02d%02dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}
