import Foundation

/// A read-only view of a cache's index, for `cache ls` and `cache info` while another process
/// (a mount daemon) holds the cache. It takes no lock and changes nothing; it shows the index as
/// last written, which trails the daemon's memory by a fraction of a second.
public struct CacheSnapshot: Sendable {
    public let configuration: CacheConfiguration
    private let entries: [CacheKey: EntryStatus]
    private let pins: PinTable

    /// - Parameter configuration: where the cache is; its capacity is replaced by the one the
    ///   process using the cache recorded.
    public init(configuration: CacheConfiguration) throws {
        var configuration = configuration
        let loaded: (entries: [CacheIndex.EntryRow], extents: [CacheIndex.ExtentRow])
        do {
            let index = try CacheIndex(path: configuration.directory + "/index.sqlite")
            loaded = try index.loadAll()
            let lengths = Dictionary(loaded.entries.compactMap { r in r.info.length.map { (r.info.key, $0) } },
                                     uniquingKeysWith: { a, _ in a })
            pins = PinTable(try index.loadPins(), sliceSize: index.recordedSliceSize() ?? CacheConfiguration.defaultSliceSize,
                            lengths: lengths)
            if let capacity = index.recordedCapacity() { configuration.capacity = capacity }
        } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "\(error)")
        }
        configuration.keyRules.credentialKey = CredentialKey.load(directory: configuration.directory)
        self.configuration = configuration
        var coverage: [Int64: RangeSet] = [:]
        var generationOf: [Int64: Int64] = [:]
        for r in loaded.entries { generationOf[r.id] = r.generation }
        for x in loaded.extents where generationOf[x.entryID] == x.generation {
            coverage[x.entryID, default: RangeSet()].insert(x.start..<x.end)
        }
        var entries: [CacheKey: EntryStatus] = [:]
        for r in loaded.entries {
            let cached = coverage[r.id] ?? RangeSet()
            let info = r.info
            entries[info.key] = EntryStatus(info: info, cachedRanges: cached.ranges, cachedBytes: cached.count,
                                            hits: r.hits, misses: r.misses, bytesFromCache: r.bytesFromCache,
                                            bytesFromOrigin: r.bytesFromOrigin,
                                            lastAccess: Date(timeIntervalSince1970: r.lastAccess),
                                            recentErrors: r.lastError.map { [$0] } ?? [])
        }
        self.entries = entries
    }

    public func list() -> [EntryStatus] { entries.values.sorted { $0.info.url < $1.info.url } }

    public func status(url: String) -> EntryStatus? {
        (try? configuration.keyRules.key(for: url)).flatMap { entries[$0] }
    }

    /// The pinned ranges of `url`'s file (`preload --pin`).
    public func pinnedRanges(url: String) -> [Range<Int64>] {
        (try? configuration.keyRules.key(for: url)).map { pins.ranges($0).ranges } ?? []
    }

    /// The bytes the pins of `url`'s file keep (whole slices, up to its end).
    public func pinnedBytes(url: String) -> Int64 {
        (try? configuration.keyRules.key(for: url)).map { pins.heldBytes($0) } ?? 0
    }

    /// The bytes the pins keep over every file.
    public var pinnedBytes: Int64 { pins.totalBytes }

    public var usage: CacheUsage {
        CacheUsage(bytes: entries.values.reduce(0) { $0 + $1.cachedBytes }, capacity: configuration.capacity,
                   entries: entries.count)
    }
}

extension CacheIndex.EntryRow {
    /// The entry as the front doors see it.
    var info: EntryInfo {
        EntryInfo(key: CacheKey(rawValue: key), url: url, finalURL: finalURL, length: length, contentType: contentType,
                  etag: etag, lastModified: lastModified, acceptsRanges: acceptsRanges, generation: generation,
                  validatedAt: Date(timeIntervalSince1970: validatedAt))
    }
}
