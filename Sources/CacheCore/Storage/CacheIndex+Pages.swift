import Foundation
import GRDB

/// Reading the index a page at a time, for listings that must not hold every entry
/// (`CacheSnapshotPages`): keyset pagination in URL order on `entry_url`, so each page costs the
/// same whatever the cache holds and the first arrives at once.
extension CacheIndex {
    /// Where a page ended: the next page starts after this URL and row id (URLs need not be
    /// unique across keys, the pair is).
    struct PageCursor: Sendable, Equatable {
        var url: String
        var id: Int64
    }

    /// Up to `limit` entries after `cursor` (from the first without one), in URL then id order,
    /// with the extents of their current versions.
    func entryPage(after cursor: PageCursor?, limit: Int) throws -> (entries: [EntryRow], extents: [ExtentRow]) {
        try pool.read { db in
            let rows: [Row]
            if let cursor {
                rows = try Row.fetchAll(db, sql: "SELECT \(Self.entryColumns) FROM entry WHERE (url, id) > (?, ?) ORDER BY url, id LIMIT ?",
                                        arguments: [cursor.url, cursor.id, limit])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT \(Self.entryColumns) FROM entry ORDER BY url, id LIMIT ?", arguments: [limit])
            }
            let entries = rows.map(Self.entry(from:))
            guard !entries.isEmpty else { return ([], []) }
            let ids = entries.map { String($0.id) }.joined(separator: ",")
            let extents = try Row.fetchAll(db, sql: """
                SELECT x.* FROM extent x JOIN entry n ON n.id = x.entry_id AND n.generation = x.generation
                WHERE x.entry_id IN (\(ids)) ORDER BY x.entry_id, x.generation, x.start
                """).map(Self.extent(from:))
            return (entries, extents)
        }
    }

    /// The lengths of the files with these keys that the index knows (for the pins' bytes).
    func lengths(keys: [String]) throws -> [String: Int64] {
        try pool.read { db in
            var out: [String: Int64] = [:]
            for key in keys {
                if let length = try Int64.fetchOne(db, sql: "SELECT length FROM entry WHERE key = ?", arguments: [key]) { out[key] = length }
            }
            return out
        }
    }

    static func extent(from r: Row) -> ExtentRow {
        ExtentRow(entryID: r["entry_id"], generation: r["generation"], slice: r["slice"],
                  start: r["start"], end: r["end"], checksum: UInt64(bitPattern: r["checksum"] as Int64))
    }
}
