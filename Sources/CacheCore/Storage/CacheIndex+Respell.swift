import GRDB

/// Migration `v4-url-spelling`: keys written before URLs had one spelling (`URLSpelling`) are
/// rewritten in it, once, when the index is opened, so an entry cached under
/// `Alpha%20Centauri%20%281971%29.mp4` is found by the key of `Alpha Centauri (1971).mp4`.
///
/// Data files are named by entry id, not key, so only rows change. Two old rows that come out
/// as one key (both spellings were cached) keep the one with more bytes cached; the other's
/// extents go with it, and its data files become orphans that the start-up
/// check removes like any other. A key that cannot be normalized is left as it is. Pins are keyed
/// by key too and are respelled the same way (ranges of two spellings are kept together).
extension CacheIndex {
    static func respellKeys(_ db: Database) throws {
        let rows = try Row.fetchAll(db, sql: "SELECT id, key, url FROM entry")
        var taken: [String: (id: Int64, bytes: Int64)] = [:]
        for row in rows { taken[row["key"]] = (row["id"], 0) }
        for row in rows {
            let id: Int64 = row["id"], key: String = row["key"], url: String = row["url"]
            guard let respelled = URLSpelling.respell(storedKey: key), respelled != key else { continue }
            let normalURL = (try? URLSpelling.normalize(url)) ?? url
            if let other = taken[respelled], other.id != id {
                // Both spellings are cached: the one with more bytes stays, under the new key.
                let mine = try cachedBytes(db, id), theirs = try cachedBytes(db, other.id)
                if mine <= theirs {
                    try delete(db, id)
                    taken[key] = nil
                    continue
                }
                try delete(db, other.id)
            }
            try db.execute(sql: "UPDATE entry SET key = ?, url = ? WHERE id = ?", arguments: [respelled, normalURL, id])
            taken[key] = nil
            taken[respelled] = (id, 0)
        }
        for row in try Row.fetchAll(db, sql: "SELECT key, start, \"end\" FROM pin") {
            let key: String = row["key"]
            guard let respelled = URLSpelling.respell(storedKey: key), respelled != key else { continue }
            try db.execute(sql: "DELETE FROM pin WHERE key = ? AND start = ?", arguments: [key, row["start"] as Int64])
            try db.execute(sql: "INSERT OR IGNORE INTO pin (key, start, \"end\") VALUES (?, ?, ?)",
                           arguments: [respelled, row["start"] as Int64, row["end"] as Int64])
        }
    }

    /// Foreign keys are off while GRDB migrates (and checked after), so no cascade: by hand.
    private static func delete(_ db: Database, _ id: Int64) throws {
        try db.execute(sql: "DELETE FROM extent WHERE entry_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM entry WHERE id = ?", arguments: [id])
    }

    private static func cachedBytes(_ db: Database, _ id: Int64) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(\"end\" - start), 0) FROM extent WHERE entry_id = ?", arguments: [id]) ?? 0
    }
}
