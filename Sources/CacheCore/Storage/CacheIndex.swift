import Foundation
import GRDB

/// The persistent index: entries and the extents of their slices, in SQLite (WAL mode).
///
/// The in-memory state of the engine is authoritative while it runs; this index is written behind
/// it, in batches, one writer at a time, in the order things happened. Two rules keep a crash
/// harmless:
/// - an extent is enqueued only after its bytes were written to the data file, so the index
///   never records a byte that is not on disk;
/// - data is deleted only after the rows that describe it are committed (`deleteSlices`).
/// A crash can therefore lose recently fetched bytes, never make wrong ones appear present.
///
/// Entry ids are handed out in memory (`newEntryID`) and their rows written behind like every
/// other change, so no caller waits for SQLite under a lock. A full disk must not stop commits
/// (eviction itself is a commit): `index.reserve`, a few MiB set aside at start, is given up when
/// SQLite reports the disk full, the commit is tried again, and the reserve is made anew once
/// there is room. Write errors are logged, counted and kept for status pages.
///
/// Threads: the writer is a lock (`writer`), not a thread. A write the caller waits for (a pin,
/// an eviction's commit, a removal, a check's flush) runs on the caller's thread holding it, as
/// GCD's `queue.sync` on the serial queue it replaces did. Work nobody waits for (the batched
/// flush, 50 ms after the first row pending; the deletion of an entry's other generations) is a
/// job of the engine pool's `index` lane (1 thread), submitted by a timer of the `Scheduler`
/// (`writeBehind(on:)`). Why nothing deadlocks: the lock is held only by a thread running SQLite
/// or deleting files, which waits for nothing of the engine (no job, no shard or eviction lock),
/// so a writer lane or an engine job waiting for it waits for a thread that is running, never
/// for a job queued behind it; and the `index` lane's bound is reserved in the pool's, so its
/// job always finds a thread, whatever every other thread waits on.
final class CacheIndex: Sendable {
    /// One entry's row (`EntryRow`, in EntryMachine: the machine makes the rows it saves).
    typealias EntryRow = EntryMachine.EntryRow

    struct ExtentRow: Sendable {
        var entryID: Int64
        var generation: Int64
        var slice: Int64
        var start: Int64
        var end: Int64
        var checksum: UInt64
    }

    struct SliceID: Hashable, Sendable {
        var entryID: Int64
        var generation: Int64
        var slice: Int64
    }

    let pool: DatabasePool
    /// The one writer: held for each write and commit (see the type's note). Nothing of the
    /// engine is waited for under it.
    private let writer = LockedValue(())
    /// Where work nobody waits for runs (`writeBehind(on:)`); none: it waits for `flush()`.
    struct Behind: Sendable {
        let pool: BlockingIOPool
        let lane: BlockingIOPool.Lane
        let scheduler: Scheduler
        func run(_ job: @escaping @Sendable () -> Void) { pool.submit(lane: lane, job) }
    }
    /// What waits for the writer, and the counters. A leaf lock: nothing is called under it.
    private struct State {
        var pendingExtents: [ExtentRow] = []
        var pendingEntries: [Int64: EntryRow] = [:]
        /// Slices marked as read by a scanner (`addScanSlice`), written behind with the extents.
        var pendingScanSlices: [SliceID] = []
        var flushScheduled = false
        /// Deletions of entries' other generations (`deleteOtherGenerations`), in order: the
        /// writer's next holder commits them before anything else, as the serial queue's FIFO did.
        var pendingDeletions: [(entryID: Int64, keep: Int64, afterCommit: @Sendable () -> Void)] = []
        var behind: Behind?
        var nextID: Int64 = 1
        var lastWriteError: String?
        var writeErrors = 0
        var onWriteError: (@Sendable (String) -> Void)?
    }
    private let state = LockedValue(State())
    /// Changed under `writer` only.
    private let closed = LockedValue(false)
    /// Told about every failed write (the engine logs it).
    var onWriteError: (@Sendable (String) -> Void)? {
        get { state.withLock { $0.onWriteError } }
        set { state.withLock { $0.onWriteError = newValue } }
    }

    /// The space kept for commits on a full disk.
    let reservePath: String
    /// `index.sqlite`'s path (the clean stamp is taken of it).
    let path: String
    /// Set when the check in the background found the index damaged (`backgroundCheck`): the
    /// close then leaves no clean stamp, so the next start checks it and sets it aside.
    let damageFound = LockedValue(false)
    /// True when the start skipped the full check (`openSettingAsideIfDamaged`) and left it to
    /// the background (`backgroundCheck`).
    let checkLeft = LockedValue(false)
    /// The check in the background's own connection while it runs, and whether it was asked to
    /// stop (`stopBackgroundCheck`): a stop interrupts that connection, never the pool's.
    let backgroundChecking = LockedValue<(connection: DatabaseQueue?, stopped: Bool)>((nil, false))
    /// True when the index file was found exactly as its last clean close left it (its stamp,
    /// `CleanStopStamp`): only then is that close's row (`StartSummary`) trusted. A write by
    /// another program (a tool, a copy, the bench's fill) leaves the row but changes the file.
    let untouchedSinceCleanClose = LockedValue(false)
    static let reserveSize = 4 << 20

    /// The cache directory, held open by the engine: the reserve is made and given up through
    /// it (nil: by path, for a snapshot read by another process).
    private let held: HeldDirectory?

    /// SQLite opens the database by path, once, at the engine's start (with both locks taken);
    /// its connections then keep their descriptors. Reader connections opened later by path
    /// could in theory meet a replaced directory's index: what they read is only checked against
    /// the held data files' bytes (`SliceVerifier`), so a foreign row drops bytes, never
    /// serves them.
    /// - Parameter readOnly: a snapshot's view (`CacheSnapshot`): the database must exist and is
    ///   opened read-only; nothing is created, migrated or set aside (no reserve). The process
    ///   using the cache migrated it when it opened it.
    init(path: String, held: HeldDirectory? = nil, readOnly: Bool = false) throws {
        self.held = held
        self.path = path
        reservePath = (path as NSString).deletingLastPathComponent + "/index.reserve"
        var config = Configuration()
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        if readOnly {
            config.readonly = true
            pool = try DatabasePool(path: path, configuration: config)
            return
        }
        // SQLite would create the database (and its WAL, which takes the database's mode) 0644:
        // it lists every URL, so it is made 0600 first.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 { Glibc.close(fd) }
        pool = try DatabasePool(path: path, configuration: config)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE entry (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    key TEXT NOT NULL UNIQUE,
                    url TEXT NOT NULL,
                    final_url TEXT NOT NULL,
                    length INTEGER,
                    content_type TEXT,
                    etag TEXT,
                    last_modified TEXT,
                    accepts_ranges INTEGER NOT NULL,
                    generation INTEGER NOT NULL,
                    validated_at REAL NOT NULL,
                    last_access REAL NOT NULL,
                    hits INTEGER NOT NULL DEFAULT 0,
                    misses INTEGER NOT NULL DEFAULT 0,
                    bytes_from_cache INTEGER NOT NULL DEFAULT 0,
                    bytes_from_origin INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT
                );
                CREATE TABLE extent (
                    entry_id INTEGER NOT NULL REFERENCES entry(id) ON DELETE CASCADE,
                    generation INTEGER NOT NULL,
                    slice INTEGER NOT NULL,
                    start INTEGER NOT NULL,
                    "end" INTEGER NOT NULL,
                    checksum INTEGER NOT NULL,
                    PRIMARY KEY (entry_id, generation, start)
                ) WITHOUT ROWID;
                CREATE INDEX extent_slice ON extent(entry_id, generation, slice);
                """)
        }
        migrator.registerMigration("v2-meta") { db in
            try db.execute(sql: "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        }
        // Pinned ranges (`preload --pin`), by cache key rather than entry id: a pin outlives the
        // versions of its file, and may be set before the file is first cached.
        migrator.registerMigration("v3-pin") { db in
            try db.execute(sql: """
                CREATE TABLE pin (
                    key TEXT NOT NULL,
                    start INTEGER NOT NULL,
                    "end" INTEGER NOT NULL,
                    PRIMARY KEY (key, start)
                ) WITHOUT ROWID
                """)
        }
        migrator.registerMigration("v4-url-spelling") { db in try Self.respellKeys(db) }
        // Slices a scanner read (the cap's scan share, `ScanShare`): a mark per slice, gone with
        // the slice's extents, its generation or its entry. A cache from before starts with no
        // marks (nothing recorded which reader read what); its next scan marks them.
        migrator.registerMigration("v5-scan-slice") { db in
            try db.execute(sql: """
                CREATE TABLE scan_slice (
                    entry_id INTEGER NOT NULL REFERENCES entry(id) ON DELETE CASCADE,
                    generation INTEGER NOT NULL,
                    slice INTEGER NOT NULL,
                    PRIMARY KEY (entry_id, generation, slice)
                ) WITHOUT ROWID
                """)
        }
        // Listings page through the entries in URL order (`entryPage`): the index on the URL
        // lets each page start where the last ended without sorting every entry.
        migrator.registerMigration("v6-entry-url") { db in
            try db.execute(sql: "CREATE INDEX entry_url ON entry(url)")
        }
        try migrator.migrate(pool)
        // Entries not in memory are evicted oldest first (`oldestSlices`): the index on the last
        // access gives the oldest without sorting every entry. Not a migration: a binary from
        // before it opens the cache still (GRDB stops on a migration it does not know).
        // The trigger that voids a clean stop's summary once any binary uses the cache (`StartSummary`).
        try pool.write { db in
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS entry_access ON entry(last_access)")
            try Self.makeStartSummaryTriggers(db)
        }
        // Ids are never reused (AUTOINCREMENT's sequence remembers deleted ones), so data files
        // of a removed entry can never be taken for a new one's.
        let firstID = try pool.read { db in
            let seq = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'entry'") ?? 0
            let max = try Int64.fetchOne(db, sql: "SELECT max(id) FROM entry") ?? 0
            return Swift.max(seq, max) + 1
        }
        state.withLock { $0.nextID = firstID }
        makeReserve()
    }

    /// A new entry id; its row is written behind with `updateEntry`.
    func newEntryID() -> Int64 {
        state.withLock { s in
            s.nextID += 1
            return s.nextID - 1
        }
    }

    /// The last write that failed and how many did, for status pages.
    var writeHealth: (errors: Int, last: String?) {
        state.withLock { ($0.writeErrors, $0.lastWriteError) }
    }

    // MARK: The reserve

    /// Sets the reserve aside if it is not there (and there is room for it).
    func makeReserve() {
        guard !hasReserve else { return }
        let fd = held.map { $0.open("index.reserve.new", O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600) }
            ?? open(reservePath + ".new", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let ok = posix_fallocate(fd, 0, off_t(Self.reserveSize)) == 0
        Glibc.close(fd)
        if let held {
            if ok { held.rename("index.reserve.new", to: "index.reserve") } else { held.unlink("index.reserve.new") }
        } else {
            if ok { rename(reservePath + ".new", reservePath) } else { unlink(reservePath + ".new") }
        }
    }

    var hasReserve: Bool { held.map { $0.exists("index.reserve") } ?? (access(reservePath, F_OK) == 0) }

    private func giveUpReserve() {
        if let held { held.unlink("index.reserve") } else { unlink(reservePath) }
    }

    /// Runs a write; if SQLite finds the disk full, gives up the reserve and tries once more.
    private func write(_ body: (Database) throws -> Void) throws {
        do {
            try pool.write(body)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL && hasReserve {
            giveUpReserve()
            try pool.write(body)
        }
    }

    private func noteWriteError(_ error: Error) {
        let text = "\(error)"
        let tell = state.withLock { s in
            s.writeErrors += 1
            s.lastWriteError = text
            return s.onWriteError
        }
        tell?(text)
    }

    /// The cap of the process using the cache, for readers of a snapshot (who have no cap of
    /// their own to show).
    func recordCapacity(_ capacity: Int64) throws {
        try setMeta("capacity", "\(capacity)")
    }

    /// Sets one `meta` value, under the writer.
    func setMeta(_ name: String, _ value: String) throws {
        try writer.withLock { _ in
            try pool.write { db in
                try Self.writeMeta(db, name, value)
            }
        }
    }

    /// One `meta` row written in the caller's transaction (`setMeta`, the stop's marks).
    static func writeMeta(_ db: Database, _ name: String, _ value: String) throws {
        try db.execute(sql: "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", arguments: [name, value])
    }

    /// The highest generation an earlier process may have handed out (`meta` row
    /// `generation_floor`, kept by a clean stop and by a start after a crash; 0 when none was):
    /// a start hands out only generations above it and above every row's (`EngineCore`), so no
    /// new version's data file takes the name of a file an earlier process wrote and never
    /// described.
    func generationFloor() -> Int64 {
        (try? pool.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'generation_floor'") })
            .flatMap { $0.flatMap { Int64($0) } } ?? 0
    }

    /// Keeps `generation` as the floor (`generationFloor`), committed before it returns.
    func recordGenerationFloor(_ generation: Int64) throws {
        try setMeta("generation_floor", "\(generation)")
    }

    /// Every pinned range, by cache key.
    func loadPins() throws -> [String: [Range<Int64>]] {
        try pool.read { db in
            var pins: [String: [Range<Int64>]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key, start, \"end\" FROM pin") {
                let key: String = row[0], start: Int64 = row[1], end: Int64 = row[2]
                if start < end { pins[key, default: []].append(start..<end) }
            }
            return pins
        }
    }

    /// Replaces the pinned ranges of `key` (none: unpinned), committed before it returns.
    func setPins(key: String, _ ranges: [Range<Int64>]) throws {
        try writer.withLock { _ in
            try write { db in
                try db.execute(sql: "DELETE FROM pin WHERE key = ?", arguments: [key])
                for r in ranges {
                    try db.execute(sql: "INSERT INTO pin (key, start, \"end\") VALUES (?, ?, ?)",
                                   arguments: [key, r.lowerBound, r.upperBound])
                }
            }
        }
    }

    func recordedCapacity() -> Int64? {
        (try? pool.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'capacity'") })
            .flatMap { $0.flatMap { Int64($0) } }
    }

    /// The slice size recorded, read only (a snapshot's view).
    func recordedSliceSize() -> Int64? {
        (try? pool.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'slice_size'") })
            .flatMap { $0.flatMap { Int64($0) } }
    }

    /// The slice size this cache was created with. Slice files are laid out by it, so it is fixed
    /// for the life of the cache: the first value given is stored, and later ones are ignored.
    func sliceSize(proposed: Int64) throws -> Int64 {
        try writer.withLock { _ in
            try pool.write { db in
                if let stored = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'slice_size'"),
                   let v = Int64(stored) {
                    return v
                }
                try db.execute(sql: "INSERT INTO meta (name, value) VALUES ('slice_size', ?)", arguments: ["\(proposed)"])
                return proposed
            }
        }
    }

    // MARK: Use and stop

    /// How the process before this one left the cache.
    enum PreviousStop: String, Sendable {
        /// It closed the index (`close()`): everything it knew was committed.
        case clean
        /// It ended with the cache in use (killed, crashed, power lost).
        case unclean
        /// A new cache, or one last used by a version that did not record its stops.
        case unknown
    }

    /// Marks the cache as in use, and says how the last process that used it stopped, with what
    /// that stop left for this start (`StartSummary`; only after a clean stop), which is void from
    /// now on.
    func beginUse() throws -> (stop: PreviousStop, summary: StartSummary?) {
        try writer.withLock { _ in
            try pool.write { db in
                let last = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'stop'")
                let summary = last == "clean" ? try Self.readStartSummary(db) : nil
                try db.execute(sql: "DELETE FROM meta WHERE name = ?", arguments: [Self.startSummaryName])
                try Self.writeMeta(db, "stop", "running")
                switch last {
                case "clean": return (.clean, summary)
                case "running": return (.unclean, nil)
                default: return (.unknown, nil)
                }
            }
        }
    }

    /// Commits what is pending, records a clean stop (only if nothing was left behind) with what
    /// the next start needs (`StartSummary`: `totals`, the engine's status totals, are kept if
    /// they agree with the index; `cleanUp`, how far the clean-up after the start got), moves the write-ahead log into the database and closes it: the
    /// next start finds one file, says the stop was clean and reads one row; the clean stamp
    /// beside it lets that start skip the full check. The index cannot be used afterwards.
    /// `generationFloor`: the last generation the process handed out, kept in the same commit as
    /// the clean stop, so a clean stop always leaves its floor (`generationFloor()`).
    func close(totals: StoredTotals? = nil, cleanUp: CleanUpProgress? = nil, generationFloor: Int64? = nil) throws {
        try writer.withLock { _ in
            guard !closed.withLock({ $0 }) else { return }   // a second shutdown
            flushPendingLocked()
            let complete = state.withLock { $0.pendingExtents.isEmpty && $0.pendingEntries.isEmpty && $0.pendingScanSlices.isEmpty }
            if complete {
                try write { db in
                    try Self.writeStartSummary(try makeStartSummary(db, totals: totals, cleanUp: cleanUp), db)
                    if let generationFloor {
                        try Self.writeMeta(db, "generation_floor", "\(generationFloor)")
                    }
                    try Self.writeMeta(db, "stop", "clean")
                }
            }
            try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
            try pool.close()
            closed.withLock { $0 = true }
            if complete && !damageFound.withLock({ $0 }) { CleanStopStamp.write(indexPath: path, held: held) }
        }
    }

    // MARK: Reading

    func loadAll() throws -> (entries: [EntryRow], extents: [ExtentRow]) {
        try pool.read { db in
            let entries = try Row.fetchAll(db, sql: "SELECT \(Self.entryColumns) FROM entry").map(Self.entry(from:))
            let extents = try Row.fetchAll(db, sql: "SELECT * FROM extent ORDER BY entry_id, generation, start").map {
                ExtentRow(entryID: $0["entry_id"], generation: $0["generation"], slice: $0["slice"],
                          start: $0["start"], end: $0["end"], checksum: UInt64(bitPattern: $0["checksum"] as Int64))
            }
            return (entries, extents)
        }
    }

    /// The slices marked as read by a scanner, after dropping the marks of slices no extent
    /// describes any more (a mark written for bytes that never landed, or whose rows a crash
    /// took before the mark's).
    func loadScanSlices() throws -> [SliceID] {
        try writer.withLock { _ in
            try write { db in
                try db.execute(sql: """
                    DELETE FROM scan_slice WHERE NOT EXISTS (SELECT 1 FROM extent x WHERE x.entry_id = scan_slice.entry_id
                        AND x.generation = scan_slice.generation AND x.slice = scan_slice.slice)
                    """)
            }
        }
        return try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT entry_id, generation, slice FROM scan_slice").map {
                SliceID(entryID: $0[0], generation: $0[1], slice: $0[2])
            }
        }
    }

    /// The columns `entry(from:)` reads, in its order: select these, not `*`.
    static let entryColumns = """
        id, key, url, final_url, length, content_type, etag, last_modified, accepts_ranges, generation, validated_at, \
        last_access, hits, misses, bytes_from_cache, bytes_from_origin, last_error
        """

    /// A row selected as `entryColumns`. By position: GRDB looks a name up case-insensitively,
    /// lowercasing it on every access (a fifth of `cache ls`'s time at a million lines).
    static func entry(from r: Row) -> EntryRow {
        // The final URL is the URL itself unless a redirect was followed: one string then, not two
        // copies, in every entry loaded.
        let url: String = r[2], finalURL: String = r[3]
        return EntryRow(id: r[0], key: r[1], url: url, finalURL: finalURL == url ? url : finalURL, length: r[4],
                 contentType: r[5], etag: r[6], lastModified: r[7],
                 acceptsRanges: r[8], generation: r[9], validatedAt: r[10],
                 lastAccess: r[11], hits: r[12], misses: r[13],
                 bytesFromCache: r[14], bytesFromOrigin: r[15],
                 lastError: r[16])
    }

    // MARK: Writing

    /// Records (behind) the latest state of an entry row.
    func updateEntry(_ row: EntryRow) {
        state.withLock { $0.pendingEntries[row.id] = row }
        scheduleFlush()
    }

    /// Records (behind) that an extent's bytes are on disk. Call only after the write returned.
    func addExtent(_ extent: ExtentRow) {
        state.withLock { $0.pendingExtents.append(extent) }
        scheduleFlush()
    }

    /// Records (behind) that a scanner read `slice` (the cap's scan share). Written with the
    /// rows pending, only while its entry's row is at that generation.
    func addScanSlice(_ slice: SliceID) {
        state.withLock { $0.pendingScanSlices.append(slice) }
        scheduleFlush()
    }

    /// Runs the writes nobody waits for as jobs of `pool`'s `index` lane, and the batched
    /// flushes on `scheduler`'s timers (the engine; before it, and for a snapshot's reader, rows
    /// wait for the next `flush()`, a write waited for, or `close()`).
    func writeBehind(on pool: BlockingIOPool, scheduler: Scheduler) {
        let behind = Behind(pool: pool, lane: pool.lane("index", threads: 1), scheduler: scheduler)
        let pending = state.withLock { s in
            s.behind = behind
            return !s.pendingExtents.isEmpty || !s.pendingEntries.isEmpty || !s.pendingScanSlices.isEmpty
        }
        if pending { scheduleFlush() }
    }

    private func scheduleFlush() {
        let behind: Behind? = state.withLock { s in
            guard !s.flushScheduled, let behind = s.behind else { return nil }
            s.flushScheduled = true
            return behind
        }
        guard let behind else { return }
        // Not kept to cancel: after `close` the flush finds the index closed and does nothing.
        behind.scheduler.after(.milliseconds(50)) { [self] in
            behind.run { [self] in
                state.withLock { $0.flushScheduled = false }
                writer.withLock { _ in
                    guard !closed.withLock({ $0 }) else { return }
                    flushPendingLocked()
                }
            }
        }
    }

    /// Commits everything pending: the deletions queued, each after the rows pending before it,
    /// then the rows. Runs holding `writer`.
    private func flushPendingLocked() {
        let deletions = state.withLock { s in
            defer { s.pendingDeletions = [] }
            return s.pendingDeletions
        }
        for d in deletions {
            commitPendingRows()
            do {
                try write { db in
                    try db.execute(sql: "DELETE FROM extent WHERE entry_id = ? AND generation != ?",
                                   arguments: [d.entryID, d.keep])
                    try db.execute(sql: "DELETE FROM scan_slice WHERE entry_id = ? AND generation != ?",
                                   arguments: [d.entryID, d.keep])
                }
                d.afterCommit()
            } catch { noteWriteError(error) }
        }
        commitPendingRows()
    }

    /// Commits the rows pending. Runs holding `writer`.
    private func commitPendingRows() {
        let (extents, entries, scans) = state.withLock { s in
            defer {
                s.pendingExtents.removeAll(keepingCapacity: true)
                s.pendingEntries.removeAll()
                s.pendingScanSlices.removeAll()
            }
            return (s.pendingExtents, s.pendingEntries, s.pendingScanSlices)
        }
        guard !extents.isEmpty || !entries.isEmpty || !scans.isEmpty else { return }
        do {
            try write { db in
                // Cached statements: a trim lets go of entries whose read counts changed, and their
                // rows are committed by the next load (`storedEntry` flushes first); compiled per
                // row (GRDB's authorizer at each compile), they were that load's largest part.
                let deleteOther = try db.cachedStatement(sql: "DELETE FROM entry WHERE key = ? AND id != ?")
                let upsert = try db.cachedStatement(sql: """
                    INSERT INTO entry (id, key, url, final_url, length, content_type, etag, last_modified,
                        accepts_ranges, generation, validated_at, last_access, hits, misses,
                        bytes_from_cache, bytes_from_origin, last_error)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET url = excluded.url, final_url = excluded.final_url,
                        length = excluded.length, content_type = excluded.content_type, etag = excluded.etag,
                        last_modified = excluded.last_modified, accepts_ranges = excluded.accepts_ranges,
                        generation = excluded.generation, validated_at = excluded.validated_at,
                        last_access = excluded.last_access, hits = excluded.hits, misses = excluded.misses,
                        bytes_from_cache = excluded.bytes_from_cache,
                        bytes_from_origin = excluded.bytes_from_origin, last_error = excluded.last_error
                    """)
                for e in entries.values.sorted(by: { $0.id < $1.id }) {
                    // A row of a removed entry with the same key may still be there (its delete
                    // is queued behind): it goes first, with its extents.
                    try deleteOther.execute(arguments: [e.key, e.id])
                    try upsert.execute(arguments: [e.id, e.key, e.url, e.finalURL, e.length, e.contentType, e.etag,
                                                   e.lastModified, e.acceptsRanges, e.generation, e.validatedAt, e.lastAccess,
                                                   e.hits, e.misses, e.bytesFromCache, e.bytesFromOrigin, e.lastError])
                }
                let insert = try db.cachedStatement(sql: """
                    INSERT OR REPLACE INTO extent (entry_id, generation, slice, start, "end", checksum)
                    SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM entry WHERE id = ? AND generation = ?)
                    """)
                for x in extents {
                    try insert.execute(arguments: [x.entryID, x.generation, x.slice, x.start, x.end,
                                                   Int64(bitPattern: x.checksum), x.entryID, x.generation])
                }
                let mark = try db.cachedStatement(sql: """
                    INSERT OR IGNORE INTO scan_slice (entry_id, generation, slice)
                    SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM entry WHERE id = ? AND generation = ?)
                    """)
                for m in scans {
                    try mark.execute(arguments: [m.entryID, m.generation, m.slice, m.entryID, m.generation])
                }
            }
        } catch {
            noteWriteError(error)
            // Kept for the next flush (a full disk gets room again): dropping them would leave
            // an entry without its row, whose extents could then never be recorded.
            state.withLock { s in
                s.pendingExtents.insert(contentsOf: extents, at: 0)
                s.pendingScanSlices.insert(contentsOf: scans, at: 0)
                for (id, row) in entries where s.pendingEntries[id] == nil { s.pendingEntries[id] = row }
            }
        }
    }

    /// Drops rows still waiting to be written (a flush failed on a full disk) that a delete makes
    /// void: written after it, they would bring back rows for bytes that are gone.
    private func forgetPending(slices: Set<SliceID> = [], entries: Set<Int64> = []) {
        state.withLock { s in
            s.pendingExtents.removeAll {
                entries.contains($0.entryID) || slices.contains(SliceID(entryID: $0.entryID, generation: $0.generation, slice: $0.slice))
            }
            for id in entries { s.pendingEntries[id] = nil }
            s.pendingScanSlices.removeAll { entries.contains($0.entryID) || slices.contains($0) }
        }
    }

    /// Commits everything pending and waits for it.
    func flush() {
        writer.withLock { _ in flushPendingLocked() }
    }

    /// Deletes the rows of these slices (after committing anything pending), then runs `afterCommit`
    /// (which deletes the files): data never goes before the rows that describe it.
    func deleteSlices(_ slices: [SliceID], afterCommit: () -> Void) throws {
        try writer.withLock { _ in
            flushPendingLocked()
            forgetPending(slices: Set(slices))
            try write { db in
                for s in slices {
                    try db.execute(sql: "DELETE FROM extent WHERE entry_id = ? AND generation = ? AND slice = ?",
                                   arguments: [s.entryID, s.generation, s.slice])
                    try db.execute(sql: "DELETE FROM scan_slice WHERE entry_id = ? AND generation = ? AND slice = ?",
                                   arguments: [s.entryID, s.generation, s.slice])
                }
            }
            afterCommit()
        }
    }

    /// Deletes extent rows of an entry's other generations (after a remote change), then the files.
    /// Queued like a row, in order with the rows and the writes waited for: the next holder of
    /// the writer commits it (a job of the `index` lane, submitted now: its caller holds a shard
    /// lock; with no lane, at once).
    func deleteOtherGenerations(entryID: Int64, keep generation: Int64, afterCommit: @escaping @Sendable () -> Void) {
        let behind = state.withLock { s in
            s.pendingDeletions.append((entryID, generation, afterCommit))
            return s.behind
        }
        let job: @Sendable () -> Void = { [self] in
            writer.withLock { _ in
                guard !closed.withLock({ $0 }) else { return }
                flushPendingLocked()
            }
        }
        if let behind { behind.run(job) } else { job() }
    }

    /// Deletes one extent row (a checksum mismatch found by verify).
    func deleteExtent(_ x: ExtentRow) throws {
        try writer.withLock { _ in
            flushPendingLocked()
            try write { db in
                try db.execute(sql: "DELETE FROM extent WHERE entry_id = ? AND generation = ? AND start = ?",
                               arguments: [x.entryID, x.generation, x.start])
            }
        }
    }

    /// Deletes entries and their extents (after committing anything pending), then runs `afterCommit`.
    func deleteEntries(_ ids: [Int64], afterCommit: () -> Void) throws {
        try writer.withLock { _ in
            flushPendingLocked()
            forgetPending(entries: Set(ids))
            try write { db in
                for id in ids { try db.execute(sql: "DELETE FROM entry WHERE id = ?", arguments: [id]) }
            }
            afterCommit()
        }
    }

    /// Extent rows of one generation of one entry, committed (flushes first); only those of
    /// `slices` when given (a read's check asks for its slices: reading all of a film's rows for
    /// each of its slices cost more than hashing the bytes, its rows read once per slice).
    func extents(entryID: Int64, generation: Int64, slices: [Int64]? = nil) throws -> [ExtentRow] {
        flush()
        var sql = "SELECT slice, start, \"end\", checksum FROM extent WHERE entry_id = ? AND generation = ?"
        var arguments: [any DatabaseValueConvertible] = [entryID, generation]
        if let slices {
            guard !slices.isEmpty else { return [] }
            sql += " AND slice IN (" + Array(repeating: "?", count: slices.count).joined(separator: ",") + ")"
            arguments += slices.map { $0 as any DatabaseValueConvertible }
        }
        sql += " ORDER BY start"
        return try pool.read { db in
            // Columns by position: GRDB looks a name up case-insensitively, lowercasing it on
            // every access.
            try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map {
                ExtentRow(entryID: entryID, generation: generation, slice: $0[0],
                          start: $0[1], end: $0[2], checksum: UInt64(bitPattern: $0[3] as Int64))
            }
        }
    }
}
