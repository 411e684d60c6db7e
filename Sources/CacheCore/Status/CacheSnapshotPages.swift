import Foundation
import GRDB

/// `CacheSnapshot` a page at a time: the same read-only view of a cache's index (no lock taken,
/// nothing changed, only this user's cache), read in pages of entries in URL order, so a listing
/// prints its first line at once and holds one page in memory whatever the cache holds.
///
/// Runs on the caller's thread; each page is one read transaction, so pages taken while a daemon
/// writes may each see a later index than the one before (an entry added behind the cursor is
/// not shown, one removed ahead of it is not shown; none is shown twice).
public struct CacheSnapshotPages: Sendable {
    public let configuration: CacheConfiguration
    private let index: CacheIndex
    private let pins: PinTable

    /// Where the next page starts.
    public struct Cursor: Sendable, Equatable {
        let position: CacheIndex.PageCursor
    }

    /// Nil when the index cannot be paged without sorting it whole: it does not exist yet, or was
    /// last opened by a version without the URL index (`v6-entry-url`; the next open adds it).
    public init?(configuration: CacheConfiguration) throws {
        var configuration = configuration
        let path = configuration.directory + "/index.sqlite"
        guard access(path, F_OK) == 0 else { return nil }
        try CacheSnapshot.checkOwned(configuration.directory)
        do {
            index = try CacheIndex(path: path, readOnly: true)
            let paged = try index.pool.read { db in
                try Bool.fetchOne(db, sql: "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'index' AND name = 'entry_url'") ?? false
            }
            guard paged else { return nil }
            let loaded = try index.loadPins()
            let lengths = try index.lengths(keys: Array(loaded.keys))
            pins = PinTable(loaded, sliceSize: index.recordedSliceSize() ?? CacheConfiguration.defaultSliceSize,
                            lengths: Dictionary(uniqueKeysWithValues: lengths.map { (CacheKey(rawValue: $0.key), $0.value) }))
            if let capacity = index.recordedCapacity() { configuration.capacity = capacity }
        } catch {
            throw CacheError.storage(path: path, message: "\(error)")
        }
        configuration.keyRules.credentialKey = CredentialKey.existing(directory: configuration.directory)
        self.configuration = configuration
    }

    /// Up to `limit` entries after `cursor` (from the first without one) in URL order, as
    /// `CacheSnapshot.list()` shows them, and where the next page starts (nil: this was the last).
    public func page(after cursor: Cursor?, limit: Int = 1000) throws -> (entries: [EntryStatus], next: Cursor?) {
        let loaded: (entries: [CacheIndex.EntryRow], extents: [CacheIndex.ExtentRow])
        do { loaded = try index.entryPage(after: cursor?.position, limit: limit) } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "\(error)")
        }
        var coverage: [Int64: RangeSet] = [:]
        for x in loaded.extents { coverage[x.entryID, default: RangeSet()].insert(x.start..<x.end) }
        let entries = loaded.entries.map { r in
            let cached = coverage[r.id] ?? RangeSet()
            return EntryStatus(info: r.info, cachedRanges: cached.ranges, cachedBytes: cached.count,
                               hits: r.hits, misses: r.misses, bytesFromCache: r.bytesFromCache,
                               bytesFromOrigin: r.bytesFromOrigin, lastAccess: Date(timeIntervalSince1970: r.lastAccess),
                               recentErrors: r.lastError.map { [$0] } ?? [])
        }
        let next = loaded.entries.count < limit ? nil : loaded.entries.last.map { Cursor(position: .init(url: $0.url, id: $0.id)) }
        return (entries, next)
    }

    /// The bytes the pins of `url`'s file keep (whole slices, up to its end).
    public func pinnedBytes(url: String) -> Int64 {
        (try? configuration.keyRules.key(for: url)).map { pins.heldBytes($0) } ?? 0
    }

    /// The bytes the pins keep over every file.
    public var pinnedBytes: Int64 { pins.totalBytes }
}
