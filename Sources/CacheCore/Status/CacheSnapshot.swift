import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A read-only view of a cache's index, for `cache ls` and `cache info` while another process
/// (a mount daemon) holds the cache. It takes no lock and changes nothing (the index is opened
/// read-only, `credential.key` only read); it shows the index as last written, which trails the
/// daemon's memory by a fraction of a second. Only this user's cache is read (`checkOwned`).
public struct CacheSnapshot: Sendable {
    public let configuration: CacheConfiguration
    private let entries: [CacheKey: EntryStatus]
    private let pins: PinTable

    /// - Parameter configuration: where the cache is; its capacity is replaced by the one the
    ///   process using the cache recorded.
    public init(configuration: CacheConfiguration) throws {
        var configuration = configuration
        let loaded: (entries: [CacheIndex.EntryRow], extents: [CacheIndex.ExtentRow])
        try Self.checkOwned(configuration.directory)
        do {
            let index = try CacheIndex(path: configuration.directory + "/index.sqlite", readOnly: true)
            loaded = try index.loadAll()
            let lengths = Dictionary(loaded.entries.compactMap { r in r.info.length.map { (r.info.key, $0) } },
                                     uniquingKeysWith: { a, _ in a })
            pins = PinTable(try index.loadPins(), sliceSize: index.recordedSliceSize() ?? CacheConfiguration.defaultSliceSize,
                            lengths: lengths)
            if let capacity = index.recordedCapacity() { configuration.capacity = capacity }
        } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "\(error)")
        }
        configuration.keyRules.credentialKey = CredentialKey.existing(directory: configuration.directory)
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

    /// A snapshot reads only a cache of this user: the directory is this user's, and its index a
    /// regular file of this user, not a symlink (SQLite would follow one, and put its `-shm`
    /// beside the target). Another user's cache is refused, not read: its user controls every
    /// name in it.
    static func checkOwned(_ directory: String) throws {
        guard let owner = OwnedFile.directoryOwner(directory) else {
            throw CacheError.storage(path: directory, message: "not a directory")
        }
        guard owner == geteuid() else {
            throw CacheError.storage(path: directory, message: "the cache belongs to uid \(owner), not this user (uid \(geteuid())): it is not opened; run the command as its owner")
        }
        let path = directory + "/index.sqlite"
        var st = stat()
        guard lstat(path, &st) == 0 else { throw CacheError.storage(path: path, message: String(cString: strerror(errno))) }
        if let refusal = OwnedFile.check(mode: st.st_mode, uid: st.st_uid, size: 0, owner: owner, maxBytes: 0) {
            throw CacheError.storage(path: path, message: "not opened: \(refusal)")
        }
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
