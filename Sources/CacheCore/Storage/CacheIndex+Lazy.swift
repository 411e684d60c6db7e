import Foundation
import GRDB

/// The index read an entry or a summary at a time, for an engine that keeps in memory only the
/// entries in use (`EntryLoader`): what the start needs (the totals, the last generation) as
/// summaries, one entry's row and extents when it is looked up, and the oldest entries' slices
/// for eviction, in last-access order on `entry_access`. Each costs the same whatever the cache
/// holds, except the start's sums (one pass over the extent rows, no entry built).
extension CacheIndex {
    /// What the start needs of the whole index.
    struct Summary: Sendable, Equatable {
        /// Bytes the extent rows of current versions describe.
        var bytes: Int64
        /// Of those, the bytes of slices a scanner read (`ScanShare`).
        var scanBytes: Int64
        /// The highest generation any row has.
        var lastGeneration: Int64
    }

    func summary() throws -> Summary {
        try pool.read { db in try Self.summary(db) }
    }

    static func summary(_ db: Database) throws -> Summary {
        let bytes = try Int64.fetchOne(db, sql: """
            SELECT coalesce(sum(x."end" - x.start), 0) FROM extent x
            JOIN entry n ON n.id = x.entry_id AND n.generation = x.generation
            """) ?? 0
        // From the scan marks (CROSS JOIN keeps that order): SQLite, with no statistics,
        // otherwise walks every extent row to find the few marked.
        let scan = try Int64.fetchOne(db, sql: """
            SELECT coalesce(sum(x."end" - x.start), 0) FROM scan_slice s
            CROSS JOIN entry n ON n.id = s.entry_id AND n.generation = s.generation
            CROSS JOIN extent x ON x.entry_id = s.entry_id AND x.generation = s.generation AND x.slice = s.slice
            """) ?? 0
        let generation = try Int64.fetchOne(db, sql: "SELECT coalesce(max(generation), 0) FROM entry") ?? 0
        return Summary(bytes: bytes, scanBytes: scan, lastGeneration: generation)
    }

    /// What the status totals count of one entry (`RunningTotals`): the fields its folder and
    /// kind come from, its length, whether an error is noted, its current version's bytes.
    struct CountedEntry {
        var url: String
        var contentType: String?
        var length: Int64?
        var withErrors: Bool
        var coverage: RangeSet
    }

    /// Hands `each` every entry, in id order, in one read: what the index holds at the moment
    /// `begun` runs (once, when the read's snapshot is taken, before the first entry), nothing
    /// committed after. Stops early, returning false, once `stop` says so.
    func countEntries(begun: () -> Void, stop: () -> Bool, each: (CountedEntry) -> Void) throws -> Bool {
        var saidBegun = false
        defer { if !saidBegun { begun() } }
        return try pool.read { db in
            let rows = try Row.fetchCursor(db, sql: """
                SELECT e.id, e.url, e.content_type, e.length, e.last_error IS NOT NULL, x.start, x."end" FROM entry e
                LEFT JOIN extent x ON x.entry_id = e.id AND x.generation = e.generation ORDER BY e.id
                """)
            var current: (id: Int64, entry: CountedEntry)?
            var n = 0
            while let r = try rows.next() {
                if !saidBegun { saidBegun = true; begun() }
                let id: Int64 = r[0]
                if current?.id != id {
                    if let c = current { each(c.entry) }
                    n += 1
                    if n & 4095 == 0 && stop() { return false }
                    current = (id, CountedEntry(url: r[1], contentType: r[2], length: r[3], withErrors: r[4], coverage: RangeSet()))
                }
                if let start: Int64 = r[5], let end: Int64 = r[6], start < end { current!.entry.coverage.insert(start..<end) }
            }
            if !saidBegun { saidBegun = true; begun() }
            if let c = current { each(c.entry) }
            return true
        }
    }

    /// One entry as the index has it (after committing what is pending, so a row or an extent
    /// handed over before is in it): its row, its current version's extents, its scan slices.
    struct StoredEntry: Sendable {
        var row: EntryRow
        var extents: [ExtentRow]
        var scanSlices: [Int64]
    }

    func storedEntry(key: String) throws -> StoredEntry? {
        flush()
        // One cached statement, one step per extent (one for a small file): the row's columns come
        // with each extent and are read from the first. The scan marks that count are those of
        // slices with extents (a mark without bytes is not loaded), so they come in the same join.
        // An open of a file not in memory loads its entry: three statements per load, each a
        // step of its own through GRDB, were most of what such an open cost (issue 51). Outside a
        // transaction (`unsafeRead`): one statement reads one snapshot by itself, and GRDB's
        // BEGIN and COMMIT around it (each compiled again) cost as much as the statement.
        return try pool.unsafeRead { db in
            let rows = try Row.fetchCursor(db.cachedStatement(sql: Self.storedEntrySQL), arguments: [key])
            guard let first = try rows.next() else { return nil }
            let row = Self.entry(from: first)
            var extents: [ExtentRow] = []
            var scans: [Int64] = []
            var r: Row? = first
            while let x = r {
                if let slice: Int64 = x[17] {
                    extents.append(ExtentRow(entryID: row.id, generation: row.generation, slice: slice, start: x[18], end: x[19],
                                             checksum: UInt64(bitPattern: x[20] as Int64)))
                    if x[21] as Bool, scans.last != slice, !scans.contains(slice) { scans.append(slice) }
                }
                r = try rows.next()
            }
            return StoredEntry(row: row, extents: extents, scanSlices: scans)
        }
    }

    /// `storedEntry`'s statement: the row (`entryColumns`, 0-16), then each extent of its current
    /// version in order (slice, start, end, checksum: 17-20) and whether its slice is a scan's (21).
    private static let storedEntrySQL = """
        SELECT \(entryColumns.split(separator: ",").map { "e." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")),
               x.slice, x.start, x."end", x.checksum,
               EXISTS (SELECT 1 FROM scan_slice s WHERE s.entry_id = e.id AND s.generation = e.generation AND s.slice = x.slice)
        FROM entry e LEFT JOIN extent x ON x.entry_id = e.id AND x.generation = e.generation
        WHERE e.key = ? ORDER BY x.start
        """

    /// The row of `key` alone (committed first), or nil: what the cache knows of a file not in memory.
    func storedRow(key: String) throws -> EntryRow? {
        flush()
        // One statement: no transaction needed around it (see `storedEntry`).
        return try pool.unsafeRead { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.entryColumns) FROM entry WHERE key = ?"), arguments: [key])
                .map(Self.entry(from:))
        }
    }

    /// A slice of an entry as eviction sees it in the index: its bytes, when its entry was last
    /// read (the index keeps no time per slice: every slice of an entry not in memory was last
    /// read when the entry was), and whether a scanner read it.
    struct StoredSlice: Sendable, Equatable {
        var key: String
        var slice: Int64
        var bytes: Int64
        var access: Double
        var scan: Bool
    }

    /// The slices holding bytes of the `limit` least recently read entries that have extents
    /// (committed first), oldest first, from `after` on (a later page).
    func oldestSlices(entries limit: Int, after: Double = -.infinity) throws -> [StoredSlice] {
        flush()
        return try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT e.key, x.slice, sum(x."end" - x.start), e.last_access,
                       EXISTS (SELECT 1 FROM scan_slice s WHERE s.entry_id = e.id AND s.generation = e.generation AND s.slice = x.slice)
                FROM (SELECT id, key, generation, last_access FROM entry WHERE last_access >= ?
                      AND EXISTS (SELECT 1 FROM extent y WHERE y.entry_id = entry.id AND y.generation = entry.generation)
                      ORDER BY last_access LIMIT ?) e
                JOIN extent x ON x.entry_id = e.id AND x.generation = e.generation
                GROUP BY e.id, x.slice ORDER BY e.last_access, e.id, x.slice
                """, arguments: [after, limit]).map {
                StoredSlice(key: $0[0], slice: $0[1], bytes: $0[2], access: $0[3], scan: $0[4])
            }
        }
    }

    /// Keys of entries last read before `cutoff` that hold bytes, oldest first, at most `limit`
    /// (`--cache-max-age`, a page at a time).
    func keysReadBefore(_ cutoff: Double, limit: Int, after: Double = -.infinity) throws -> [(key: String, access: Double)] {
        flush()
        return try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT key, last_access FROM entry WHERE last_access < ? AND last_access > ?
                AND EXISTS (SELECT 1 FROM extent y WHERE y.entry_id = entry.id AND y.generation = entry.generation)
                ORDER BY last_access LIMIT ?
                """, arguments: [cutoff, after, limit]).map { ($0[0], $0[1]) }
        }
    }

    /// Every key, a page at a time in id order after `after` (`cache clear`, `cache verify`).
    func keyPage(after: Int64, limit: Int) throws -> [(id: Int64, key: String)] {
        flush()
        return try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, key FROM entry WHERE id > ? ORDER BY id LIMIT ?",
                             arguments: [after, limit]).map { ($0[0], $0[1]) }
        }
    }

    /// How many entries have a row (committed first).
    func entryCount() throws -> Int {
        flush()
        return try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM entry") ?? 0 }
    }

    /// Whether the start already looked for slice files of the layout before data files (one
    /// listing of the data directory, once per cache, not once per start).
    func layoutChecked() -> Bool {
        (try? pool.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'layout_checked'") }) != nil
    }

    func markLayoutChecked() { try? setMeta("layout_checked", "1") }

    /// Deletes the extent rows and scan marks of versions that are not their entry's current one
    /// (a crash before a remote change's deletion committed), of the entries with ids in `ids`
    /// (the clean-up after a start goes through the ids a range at a time, so that a stop finds
    /// it between two); returns the files they named.
    func deleteOldVersions(ids: Range<Int64>) throws -> [FileID] {
        flush()
        let old = try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT DISTINCT x.entry_id, x.generation, x.slice FROM extent x
                WHERE x.entry_id >= ? AND x.entry_id < ?
                AND NOT EXISTS (SELECT 1 FROM entry n WHERE n.id = x.entry_id AND n.generation = x.generation)
                """, arguments: [ids.lowerBound, ids.upperBound]).map { SliceID(entryID: $0[0], generation: $0[1], slice: $0[2]) }
        }
        guard !old.isEmpty else { return [] }
        try deleteSlices(old) {}
        return Array(Set(old.map { FileID(entry: $0.entryID, generation: $0.generation) }))
    }

    /// The highest entry id an extent row names (0 for none): where `deleteOldVersions` ends.
    func lastExtentEntryID() throws -> Int64 {
        try pool.read { db in try Int64.fetchOne(db, sql: "SELECT coalesce(max(entry_id), 0) FROM extent") ?? 0 }
    }

    /// Which of `files` a row names as its entry's current version now (the clean-up's look for
    /// files no row describes): one query for a batch of files, not one a file.
    func describes(_ files: [FileID]) throws -> Set<FileID> {
        let ids = Array(Set(files.map(\.entry)))
        var current: [Int64: Int64] = [:]
        try pool.read { db in
            for at in stride(from: 0, to: ids.count, by: 500) {   // under SQLite's oldest bound on parameters (999)
                let part = ids[at..<min(at + 500, ids.count)]
                let marks = part.map { _ in "?" }.joined(separator: ",")
                for row in try Row.fetchAll(db, sql: "SELECT id, generation FROM entry WHERE id IN (\(marks))",
                                            arguments: StatementArguments(Array(part))) {
                    current[row[0]] = row[1]
                }
            }
        }
        return Set(files.filter { current[$0.entry] == $0.generation })
    }
}
