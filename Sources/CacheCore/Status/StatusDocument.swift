import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a running cache shows of itself: the JSON of `/.httpcachefs/status.json`, which the
/// status page draws and `httpcachefs status` prints. Documented field by field in docs/reference.md;
/// add fields, never rename them (scripts read this).
///
/// Map of this folder (`Status/`): what the cache shows of itself.
/// - `StatusDocument.swift` (this file): the JSON of the status page and `httpcachefs status`.
/// - `CacheMetrics.swift`: every counter, through swift-metrics, plus totals for the document.
/// - `CacheSnapshot.swift`: a read-only view of another process's index (`cache ls`).
/// - `RecentErrors.swift`: the last failed reads and opens. `RecentResults.swift`: a small memo of
///   pure string functions (URL parsing on the proxy's path).
/// Neighbours: filled from `Engine/` (shards, transfers from `Fetch/`, counts from `Read/`);
/// read by Proxy (status page, `/metrics`), MetricsExport and the executable.
public struct StatusDocument: Sendable, Codable, Equatable {
    /// Always "httpcachefs".
    public var service = "httpcachefs"
    public var version: String
    public var pid: Int32
    public var startedAt: Date
    public var uptimeSeconds: Double
    /// The mounts and proxy listeners of this process.
    public var doors: [DoorInfo]
    public var cache: CacheSummary
    public var totals: Totals
    /// One per file the cache knows, in URL order.
    public var files: [FileStatus]
    /// Origin transfers running now, oldest first.
    public var fetches: [FetchInFlight]
    /// Newest first.
    public var errors: [ErrorRecord]
    /// Origins that cannot be reached now (offline mode: cached bytes are served, the rest fails
    /// at once), by name; empty while every origin answers. Absent in documents of older versions.
    public var originsDown: [OriginDown]? = nil
    /// Each origin's egress budget (`--egress-budget`): used, left, when it resets, whether it is
    /// spent and which readers yield; absent without a budget.
    public var budgets: [EgressBudgetStatus]? = nil
    /// Requests and bytes by origin since the start, and requests a second now (the last 10 s),
    /// by name; `requestRateLimit`: `--tpslimit` (requests a second to each origin), absent
    /// without one. Absent in documents of older versions.
    public var origins: [OriginTrafficStatus]? = nil
    public var requestRateLimit: Double? = nil
    /// The cache tier's counters (`--tier`); absent without one.
    public var tier: TierStatus?
    /// The bandwidth limit in force (`--bwlimit`) and its timetable's next change; absent
    /// without a limit.
    public var bandwidth: BandwidthLimitStatus? = nil
    /// Which view of the cache this is (`StatusView`): absent for the full document (every file),
    /// "summary" (no files, folder totals), "folder" (one page of one folder's files), "unsaved"
    /// (the files whose figures the index does not hold yet).
    public var view: String? = nil
    /// Summary and folder views: the filter they were asked with (a substring of names and URLs).
    public var filter: String? = nil
    /// Summary view: the folders holding files that match the filter, by origin then path, at
    /// most `StatusView.folderLimit` of them (`foldersTotal` counts them all).
    public var folders: [FolderTotals]? = nil
    public var foldersTotal: Int? = nil
    /// Folder view: which page of which folder `files` is.
    public var page: FilePage? = nil

    public static func decode(_ bytes: [UInt8]) throws -> StatusDocument {
        try makeDecoder().decode(StatusDocument.self, from: Data(bytes))
    }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return ((try? encoder.encode(self)).map(Array.init) ?? Array("{}".utf8)) + [0x0A]
    }

    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}

/// What part of the cache a status document holds: the whole of it (every file: the document of
/// older versions, kept for scripts), a summary small enough to poll at any library size (totals,
/// transfers, errors, origins, folder totals: no file), or one page of one folder's files.
/// The query of `status.json` names it (`?view=summary`, `?folder=ID&page=N`, `?url=URL`).
public enum StatusView: Sendable, Equatable {
    case full
    /// Folder totals of the files whose name or URL contains `filter` (case-insensitive; empty:
    /// every file).
    case summary(filter: String)
    /// Page `page` (from 0) of folder `folder` (`FolderTotals.id`), `pageSize` files a page, of
    /// the files matching `filter`, in `order`.
    case folder(id: String, page: Int, pageSize: Int, filter: String, order: FileOrder)
    /// The page of its folder that holds `url`'s file (a deep link), `pageSize` files a page.
    case locate(url: String, pageSize: Int, order: FileOrder)
    /// The files whose figures the index does not hold yet (read statistics are written every
    /// fifth second; an entry's first row is written behind), in URL order: what a reader of the
    /// index beside the daemon (`cache ls`) lays over what it reads there, instead of the
    /// whole document.
    case unsaved

    /// The most folders a summary lists: past it the filter narrows them (a summary stays small
    /// however the library is laid out).
    public static let folderLimit = 200
    public static let defaultPageSize = 100
    public static let maxPageSize = 1000
}

/// The order of a folder's files in its pages.
public enum FileOrder: String, Sendable, Equatable, CaseIterable {
    /// By name, A to Z.
    case name
    /// Largest first.
    case size
    /// Most cached (by fraction) first.
    case cached
    /// Last read first.
    case access
}

/// One folder of the status page: the files of one origin whose URL paths share everything up
/// to the last `/`, added up.
/// `--bwlimit` as the status document shows it: the origin bytes per second allowed now, across
/// all transfers (0: none now, a timetable's `off`), and when a timetable next changes it, to what.
public struct BandwidthLimitStatus: Sendable, Codable, Equatable {
    public var bytesPerSecond: Int64
    /// nil: a fixed limit, or a timetable that never changes it.
    public var nextChange: Date?
    public var nextBytesPerSecond: Int64?

    public init(bytesPerSecond: Int64, nextChange: Date? = nil, nextBytesPerSecond: Int64? = nil) {
        self.bytesPerSecond = bytesPerSecond
        self.nextChange = nextChange
        self.nextBytesPerSecond = nextBytesPerSecond
    }
}

public struct FolderTotals: Sendable, Codable, Equatable {
    /// Stable while the folder exists: what `status.json?folder=` takes.
    public var id: String
    public var origin: String
    /// Percent-decoded, ending in `/` (`FileStatus.folder`).
    public var path: String
    /// Entries that are files, and directory listings.
    public var files: Int
    public var listings: Int
    /// Of the files whose length is known.
    public var lengthBytes: Int64
    public var cachedBytes: Int64
    /// What the pins of its files keep (`preload --pin`).
    public var pinnedBytes: Int64
    /// Files being fetched now, and files with errors noted.
    public var fetching: Int
    public var withErrors: Int
}

/// Which page of a folder a folder view holds.
public struct FilePage: Sendable, Codable, Equatable {
    public var folder: FolderTotals
    /// From 0.
    public var page: Int
    public var pageSize: Int
    /// Files of the folder matching the filter, over all pages.
    public var matching: Int
    public var pages: Int
    public var order: String
}

/// The cache as a whole.
public struct CacheSummary: Sendable, Codable, Equatable {
    /// Nil unless the client is on this machine.
    public var directory: String?
    public var usedBytes: Int64
    public var capacityBytes: Int64
    /// Free space kept on the file system (the floor: evicting below the cap if needed).
    public var freeFloorBytes: Int64
    /// Free space on the file system now.
    public var filesystemFreeBytes: Int64
    public var files: Int
    public var slices: Int
    public var sliceSize: Int64
    /// Hits over reads since the start, failed reads counted as reads (a read that failed is
    /// not a hit); nil before the first read.
    public var hitRatio: Double?
    /// The cap's scan share (`--scan-share`); nil where it is not known (a snapshot of the index).
    public var scanShare: ScanShareStatus? = nil
    /// True while the entries the index held at start are still being counted (a large cache,
    /// seconds after the start): `files`, `slices` and the folder totals are not whole yet.
    /// Absent once they are.
    public var counting: Bool? = nil
}

/// The cap's scan share: what it may hold and what it holds (bytes on disk of the slices
/// scanner-class readers read). A `limitBytes` of 0: the share is off.
public struct ScanShareStatus: Sendable, Codable, Equatable {
    public var limitBytes: Int64
    public var usedBytes: Int64
}

extension CacheSummary {
    /// The summary of `files` (all of a cache's entries) in a cache of `configuration`.
    init(files: [EntryStatus], configuration config: CacheConfiguration, showDirectory: Bool, totals: Totals?) {
        var slices = 0
        for f in files {
            var last: Int64 = -1
            for r in f.cachedRanges where !r.isEmpty {
                let first = r.lowerBound / config.sliceSize, end = (r.upperBound - 1) / config.sliceSize
                if end > last { slices += Int(end - max(first, last + 1) + 1) }
                last = max(last, end)
            }
        }
        self.init(entries: files.count, usedBytes: files.reduce(0) { $0 + $1.cachedBytes }, slices: slices, configuration: config,
                  showDirectory: showDirectory, totals: totals)
    }

    /// The summary of a cache of `entries` entries holding `usedBytes` in `slices` slices.
    init(entries: Int, usedBytes: Int64, slices: Int, configuration config: CacheConfiguration, showDirectory: Bool, totals: Totals?) {
        var fs = statvfs()
        var floor: Int64 = 0, free: Int64 = 0
        if statvfs(config.directory, &fs) == 0 {
            floor = Int64(Double(fs.f_blocks) * Double(fs.f_frsize) * config.freeSpaceFloor)
            free = Int64(fs.f_bavail) * Int64(fs.f_frsize)
        }
        let reads = totals.map { $0.hits + $0.misses + ($0.failedReads ?? 0) } ?? 0
        self.init(directory: showDirectory ? config.directory : nil,
                  usedBytes: usedBytes, capacityBytes: config.capacity,
                  freeFloorBytes: floor, filesystemFreeBytes: free, files: entries, slices: slices,
                  sliceSize: config.sliceSize,
                  hitRatio: reads > 0 ? Double(totals!.hits) / Double(reads) : nil)
    }

}

extension CacheSnapshot {
    /// The cache as the index last recorded it (no counters: nothing runs here).
    public var summary: CacheSummary {
        CacheSummary(files: list(), configuration: configuration, showDirectory: true, totals: nil)
    }
}

/// One file the cache knows.
public struct FileStatus: Sendable, Codable, Equatable {
    public var url: String
    public var finalURL: String
    /// The last path segment, for display.
    public var name: String
    /// Nil while unknown.
    public var length: Int64?
    public var cachedBytes: Int64
    /// Half-open `[start, end)` pairs, in order.
    public var cachedRanges: [[Int64]]
    /// Ranges being fetched now (`[position, end)`, end -1 for "to the end"), in order.
    public var fetchingRanges: [[Int64]]
    public var contentType: String?
    public var etag: String?
    public var lastModified: String?
    public var generation: Int64
    public var validatedAt: Date
    public var lastAccess: Date
    /// Kept in the index across restarts.
    public var hits: Int64
    public var misses: Int64
    public var bytesFromCache: Int64
    public var bytesFromOrigin: Int64
    /// Reads since the start, by door.
    public var reads: DoorReads
    /// What the cache noted for this file (failed reads and fetches, refused old readers).
    public var errors: [String]
    /// The path of its proxy URL (`/u/...`), filled in by the proxy that serves the document.
    public var proxyPath: String?
    /// `scheme://host[:port]` of its URL, the group the status page shows it under.
    public var origin: String?
    /// Its URL's path up to and including the last `/`, percent-decoded: the folder the status
    /// page shows it in (so `a/index.m3u8` and `b/index.m3u8` are told apart).
    public var folder: String?
    /// "listing" for a directory listing (a URL ending in `/`, or an HTML page), else "file";
    /// the status page shows listings in their own table.
    public var kind: String?
    /// With a cache tier (`--tier`): of the bytes this process fetched for the file, those from
    /// the tier and those from the origin itself (`bytesFromOrigin` counts both).
    public var fetchedFromTier: Int64? = nil
    public var fetchedFromOrigin: Int64? = nil
}

extension FileStatus {
    /// Where `url` sits, for grouping: its origin, its folder, and whether it is a listing.
    static func placement(url: String, contentType: String?) -> (origin: String, folder: String, kind: String) {
        let parts: PlainURL
        if let plain = PlainURL(url) {
            parts = plain
        } else if let c = URLComponents(string: url), let scheme = c.scheme, let host = c.host {
            parts = PlainURL(origin: scheme + "://" + (host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host) + (c.port.map { ":\($0)" } ?? ""),
                             path: c.percentEncodedPath.isEmpty ? "/" : Substring(c.percentEncodedPath))
        } else {
            return (url, "/", "file")
        }
        let cut = parts.folder
        let folder = cut.utf8.contains(0x25) ? (String(cut).removingPercentEncoding ?? String(cut)) : String(cut)
        let html = HeadDecision.Provenance.mediaType(contentType) == "text/html"
        return (parts.origin, folder, parts.path.utf8.last == 0x2F || html ? "listing" : "file")
    }
}

/// The origin and the percent-encoded path of a URL as the cache keeps it (`http(s)://`,
/// authority, path, query; every byte printable ASCII, none that needs escaping), split by hand.
/// The status views split every cached URL at each request: with `URLComponents` that is most
/// of their cost (39% of a summary's CPU at 10k files, measured with perf), and a poll of 100k
/// files takes seconds. Anything else (nil) goes through `URLComponents`.
struct PlainURL {
    /// `scheme://host[:port]`, without user-info.
    var origin: String
    /// The path, still percent-encoded; "/" for none.
    var path: Substring

    init(origin: String, path: Substring) {
        self.origin = origin
        self.path = path
    }

    init?(_ url: String) {
        // Printable ASCII without the characters a URL must escape (RFC 3986 §2; what
        // `URLComponents` would refuse or read otherwise) and without a fragment. All ASCII, so
        // every UTF-8 index below is a character boundary (no grapheme walking).
        let u = url.utf8
        for byte in u {
            switch byte {
            case 0x21, 0x24...0x3B, 0x3D, 0x3F...0x5B, 0x5D, 0x5F, 0x61...0x7A, 0x7E: continue
            default: return nil
            }
        }
        // `scheme://`: the first `:` ends the scheme and is followed by `//`.
        guard let colon = u.firstIndex(of: 0x3A), colon > u.startIndex else { return nil }
        let slash = u.index(after: colon)
        guard slash < u.endIndex, u[slash] == 0x2F, u.index(after: slash) < u.endIndex, u[u.index(after: slash)] == 0x2F else { return nil }
        let authorityStart = u.index(slash, offsetBy: 2)
        let authorityEnd = u[authorityStart...].firstIndex { $0 == 0x2F || $0 == 0x3F } ?? u.endIndex
        let hostStart = u[authorityStart..<authorityEnd].lastIndex(of: 0x40).map { u.index(after: $0) } ?? authorityStart   // after user-info
        // A host, or a bracketed IPv6 literal, then at most `:` and a port of digits.
        guard hostStart < authorityEnd, u[hostStart] != 0x3A else { return nil }
        let hostEnd: String.Index?
        if u[hostStart] == 0x5B {
            guard let close = u[hostStart..<authorityEnd].firstIndex(of: 0x5D) else { return nil }
            hostEnd = u.index(after: close)
        } else {
            hostEnd = u[hostStart..<authorityEnd].firstIndex(of: 0x3A)
        }
        if let hostEnd, hostEnd < authorityEnd {
            let port = u[hostEnd..<authorityEnd].dropFirst()
            guard u[hostEnd] == 0x3A, !port.isEmpty, port.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        }
        let pathEnd = u[authorityEnd...].firstIndex(of: 0x3F) ?? u.endIndex
        origin = String(url[..<authorityStart]) + url[hostStart..<authorityEnd]
        path = authorityEnd == pathEnd ? "/" : url[authorityEnd..<pathEnd]
    }

    /// Its folder: the path up to and including its last `/`, still percent-encoded.
    var folder: Substring {
        path.utf8.lastIndex(of: 0x2F).map { path[...$0] } ?? "/"
    }

    /// The last non-empty segment of the path, still percent-encoded; nil for none (`/`).
    var lastSegment: Substring? {
        let u = path.utf8
        var end = u.endIndex
        while end > u.startIndex, u[u.index(before: end)] == 0x2F { end = u.index(before: end) }
        guard end > u.startIndex else { return nil }
        let start = u[..<end].lastIndex(of: 0x2F).map { u.index(after: $0) } ?? u.startIndex
        return path[start..<end]
    }
}


extension CacheEngine {
    /// The bytes `f` is still to bring (to `Int64.max`: to the end of the file), or nil. A
    /// transfer's position can pass the end it asked for: an origin that ignores Range answers
    /// with the whole file from byte 0, and the transfer reads on through it (such a position
    /// once made `position..<end` trap, ending the daemon, its mount and its proxy).
    static func stillToCome(_ f: FetchInFlight) -> Range<Int64>? {
        let end = f.end ?? Int64.max
        return f.position < end ? f.position..<end : nil
    }

    /// The status document as of now.
    /// - Parameters:
    ///   - version: the program's version.
    ///   - showDirectory: include the cache directory (clients on this machine only).
    ///   - view: the whole cache (every file), a summary, or one page of one folder.
    public func statusDocument(version: String, showDirectory: Bool, view: StatusView = .full) -> StatusDocument {
        let now = core.configuration.clock()
        // The summary without a filter comes from the running totals; every other view lists the
        // entries (a filter, a folder's page).
        let walks: Bool
        switch view {
        case let .summary(filter): walks = !filter.isEmpty
        case .unsaved: walks = false
        default: walks = true
        }
        let list = walks ? list() : []
        let fetches = transfers?.inFlight(now: now) ?? []
        var fetching: [CacheKey: RangeSet] = [:]
        for f in fetches {
            guard let rest = Self.stillToCome(f), let key = try? key(for: f.url) else { continue }
            fetching[key, default: RangeSet()].insert(rest)
        }
        let totals = metrics.totals
        var document = StatusDocument(
            version: version, pid: getpid(), startedAt: metrics.startedAt,
            uptimeSeconds: now.timeIntervalSince(metrics.startedAt), doors: metrics.currentDoors,
            cache: summary(showDirectory: showDirectory, totals: totals),
            totals: totals, files: [], fetches: fetches, errors: metrics.recentErrors,
            originsDown: originsDown.map { o in
                var o = o
                o.lastError = DisplayURL.redactingPasswords(in: o.lastError)
                return o
            },
            tier: tier.map { t in
                var status = t.tierStatus()
                status.readAheadMax = configuration.maxReadAhead
                return status
            })
        document.budgets = configuration.egressLedger?.status()
        document.origins = metrics.originTraffic.status()
        document.requestRateLimit = configuration.requestRateLimit
        document.bandwidth = configuration.bandwidthLimit?(now)
        switch view {
        case .full:
            document.files = list.map { fileStatus($0, fetching: fetching) }
        case let .summary(filter):
            let folders = walks ? folderGroups(list, filter: filter, fetching: fetching).map(\.totals) : runningFolderTotals(fetching: fetching)
            document.view = "summary"
            document.filter = filter
            document.folders = Array(folders.prefix(StatusView.folderLimit))
            document.foldersTotal = folders.count
        case let .folder(id, page, pageSize, filter, order):
            document.view = "folder"
            document.filter = filter
            guard let folder = folderGroups(list, filter: filter, fetching: fetching).first(where: { $0.totals.id == id }) else { break }
            fill(&document, folder: folder, page: page, pageSize: pageSize, order: order, fetching: fetching)
        case .unsaved:
            document.view = "unsaved"
            document.files = core.commands.unsaved().map { fileStatus($0, fetching: fetching) }
        case let .locate(url, pageSize, order):
            document.view = "folder"
            document.filter = ""
            guard let entry = list.first(where: { $0.info.url == url }) ?? (try? key(for: url)).flatMap({ k in list.first { $0.info.key == k } }),
                  let folder = folderGroups(list, filter: "", fetching: fetching).first(where: { $0.entries.contains { $0.info.key == entry.info.key } })
            else { break }
            let index = Self.ordered(folder.entries, by: order).firstIndex { $0.info.key == entry.info.key } ?? 0
            fill(&document, folder: folder, page: index / max(1, pageSize), pageSize: pageSize, order: order, fetching: fetching)
        }
        return document
    }

    /// One entry as the document shows it.
    private func fileStatus(_ s: EntryStatus, fetching: [CacheKey: RangeSet]) -> FileStatus {
        let place = FileStatus.placement(url: s.info.url, contentType: s.info.contentType)
        let split = tier?.tierSplit(ofKey: s.info.key.string)
        return FileStatus(
            url: s.info.url, finalURL: s.info.finalURL, name: Self.displayName(s.info.url), length: s.info.length,
            cachedBytes: s.cachedBytes, cachedRanges: s.cachedRanges.map { [$0.lowerBound, $0.upperBound] },
            fetchingRanges: (fetching[s.info.key]?.ranges ?? []).map { [$0.lowerBound, $0.upperBound == Int64.max ? -1 : $0.upperBound] },
            contentType: s.info.contentType, etag: s.info.etag, lastModified: s.info.lastModified,
            generation: s.info.generation, validatedAt: s.info.validatedAt, lastAccess: s.lastAccess,
            hits: s.hits, misses: s.misses, bytesFromCache: s.bytesFromCache, bytesFromOrigin: s.bytesFromOrigin,
            reads: s.readsByDoor, errors: s.recentErrors, proxyPath: nil,
            origin: place.origin, folder: place.folder, kind: place.kind,
            fetchedFromTier: split?.tier, fetchedFromOrigin: split?.origin)
    }

    /// A folder's totals and its entries (those matching the filter).
    struct FolderGroup {
        var totals: FolderTotals
        var entries: [EntryStatus]
    }

    /// The entries matching `filter` (case-insensitive, in the URL or the displayed name), by
    /// folder, folders by origin then path. One pass over the list: no file is encoded.
    func folderGroups(_ list: [EntryStatus], filter: String, fetching: [CacheKey: RangeSet]) -> [FolderGroup] {
        let needle = filter.lowercased()
        var groups: [FolderGroup] = []
        var index: [String: Int] = [:]
        for s in list {
            if !needle.isEmpty, !s.info.url.lowercased().contains(needle), !Self.displayName(s.info.url).lowercased().contains(needle) { continue }
            let place = FileStatus.placement(url: s.info.url, contentType: s.info.contentType)
            let name = place.origin + "\n" + place.folder
            let i: Int
            if let known = index[name] {
                i = known
            } else {
                i = groups.count
                index[name] = i
                groups.append(FolderGroup(totals: FolderTotals(id: Self.folderID(name), origin: place.origin, path: place.folder, files: 0, listings: 0,
                                                               lengthBytes: 0, cachedBytes: 0, pinnedBytes: 0, fetching: 0, withErrors: 0), entries: []))
            }
            if place.kind == "listing" { groups[i].totals.listings += 1 } else { groups[i].totals.files += 1 }
            groups[i].totals.lengthBytes += s.info.length ?? 0
            groups[i].totals.cachedBytes += s.cachedBytes
            groups[i].totals.pinnedBytes += core.userPins.heldBytes(s.info.key)
            if fetching[s.info.key] != nil { groups[i].totals.fetching += 1 }
            if !s.recentErrors.isEmpty { groups[i].totals.withErrors += 1 }
            groups[i].entries.append(s)
        }
        return groups.sorted { ($0.totals.origin, $0.totals.path) < ($1.totals.origin, $1.totals.path) }
    }

    /// Every folder's totals, from the running totals (`RunningTotals`), folders by origin then
    /// path: what `folderGroups` adds up with no filter, without walking the entries. Pins and
    /// transfers are few: each is looked up in its shard.
    /// While the start's count runs, none: a folder would hold the changes since the start only
    /// (a file removed before it was counted makes its folder's figures negative).
    func runningFolderTotals(fetching: [CacheKey: RangeSet]) -> [FolderTotals] {
        let running = core.totals
        guard running.counted else { return [] }
        let sums = running.totals
        var folders: [Int32: FolderTotals] = [:]
        for (n, f) in sums.folders {
            guard let place = running.place(n) else { continue }
            folders[n] = FolderTotals(id: Self.folderID(place.origin + "\n" + place.path), origin: place.origin, path: place.path,
                                      files: f.files, listings: f.listings, lengthBytes: f.lengthBytes, cachedBytes: f.cachedBytes,
                                      pinnedBytes: 0, fetching: 0, withErrors: f.withErrors)
        }
        func folder(ofLive key: CacheKey) -> Int32? {
            if let n = core.shard(for: key).locked({ $0[key].flatMap { $0.isPersisted ? $0.reported?.folder : nil } }) { return n }
            // Not in memory (a pinned entry not looked up since the start): its row says where.
            guard let info = core.loader.storedInfo(key) else { return nil }
            let place = FileStatus.placement(url: info.url, contentType: info.contentType)
            return running.folderNumber(FolderPlace(origin: place.origin, path: place.folder))
        }
        for (key, held) in core.userPins.heldByKey() where held > 0 {
            if let n = folder(ofLive: key) { folders[n]?.pinnedBytes += held }
        }
        for key in fetching.keys {
            if let n = folder(ofLive: key) { folders[n]?.fetching += 1 }
        }
        return folders.values.sorted { ($0.origin, $0.path) < ($1.origin, $1.path) }
    }

    /// Page `page` of `folder` into `document` (an empty page past the last).
    private func fill(_ document: inout StatusDocument, folder: FolderGroup, page: Int, pageSize: Int, order: FileOrder,
                      fetching: [CacheKey: RangeSet]) {
        let size = max(1, pageSize)
        let ordered = Self.ordered(folder.entries, by: order)
        let start = min(ordered.count, page * size)
        document.files = ordered[start..<min(ordered.count, start + size)].map { fileStatus($0, fetching: fetching) }
        document.page = FilePage(folder: folder.totals, page: page, pageSize: size, matching: ordered.count,
                                 pages: (ordered.count + size - 1) / size, order: order.rawValue)
    }

    /// `entries` in `order`, ties by URL. Each entry's sort key is worked out once (a name is a
    /// URL parse), not at each of the n log n comparisons.
    static func ordered(_ entries: [EntryStatus], by order: FileOrder) -> [EntryStatus] {
        func key(_ s: EntryStatus) -> (String, Double) {
            switch order {
            case .name: return (displayName(s.info.url).lowercased(), 0)
            case .size: return ("", -Double(s.info.length ?? 0))
            case .cached: return ("", -(s.info.length.map { $0 > 0 ? Double(s.cachedBytes) / Double($0) : 0 } ?? 0))
            case .access: return ("", -s.lastAccess.timeIntervalSinceReferenceDate)
            }
        }
        return entries.map { (key($0), $0) }
            .sorted { a, b in a.0 != b.0 ? a.0 < b.0 : a.1.info.url < b.1.info.url }
            .map(\.1)
    }

    /// A folder's id: FNV-1a (64 bits, hex) of its origin and path, stable across polls and
    /// restarts, short in a query.
    static func folderID(_ name: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Sets the metric gauges (bytes used, capacity, entries, fetches in flight) from the cache's
    /// state: the metrics backend's owner calls this just before it renders a scrape.
    public func recordMetricGauges() {
        metrics.recordGauges(summary: summary(showDirectory: false, totals: nil), fetchesInFlight: transfers?.inFlightCount ?? 0,
                             originsDown: originsDown.count)
        if let budgets = configuration.egressLedger?.status() { metrics.recordBudgets(budgets) }
        metrics.originTraffic.recordGauges()
    }

    /// The cache as a whole, from the running totals. While the start's count of the index
    /// runs (`counting`), files and slices are the changes since the start, never below 0 (a
    /// removal of an entry not counted yet), the bytes the evictor's (counted before the start
    /// ended), and no folder is shown (`runningFolderTotals`).
    func summary(showDirectory: Bool, totals: Totals?) -> CacheSummary {
        let running = core.totals
        let counted = running.counted
        let sums = running.totals
        var s = CacheSummary(entries: max(0, sums.entries), usedBytes: counted ? sums.cachedBytes : core.totalBytes, slices: max(0, sums.slices),
                             configuration: configuration, showDirectory: showDirectory, totals: totals)
        if !counted { s.counting = true }
        s.scanShare = ScanShareStatus(limitBytes: core.evictor.scanShare.bound, usedBytes: core.evictor.scanShare.usedBytes)
        return s
    }

    /// The same by walking `files` (what the running totals must always equal; tests).
    func summary(files: [EntryStatus], showDirectory: Bool, totals: Totals?) -> CacheSummary {
        var s = CacheSummary(files: files, configuration: configuration, showDirectory: showDirectory, totals: totals)
        s.scanShare = ScanShareStatus(limitBytes: core.evictor.scanShare.bound, usedBytes: core.evictor.scanShare.usedBytes)
        return s
    }

    /// The last path segment of `url`, percent-decoded (the URL itself if it has none).
    static func displayName(_ url: String) -> String {
        if let parts = PlainURL(url) {
            // Cut at the encoded slashes, then decoded once: a `%2F` in a name stays in it.
            guard let last = parts.lastSegment else { return url }
            return last.utf8.contains(0x25) ? (String(last).removingPercentEncoding ?? String(last)) : String(last)
        }
        let path = URLComponents(string: url)?.path ?? ""
        let last = path.split(separator: "/").last.map(String.init) ?? ""
        return last.isEmpty ? url : (last.removingPercentEncoding ?? last)
    }
}

extension StatusDocument {
    /// The document as it may be shown: URL passwords masked (`DisplayURL`) in files, fetches and
    /// errors. A file whose URL has a password loses its proxy path too, which carries the URL
    /// (and so the password) in base64.
    public func redactedForDisplay() -> StatusDocument {
        var d = self
        for i in d.files.indices {
            let url = d.files[i].url
            d.files[i].url = DisplayURL.redacted(url)
            d.files[i].finalURL = DisplayURL.redacted(d.files[i].finalURL)
            d.files[i].errors = d.files[i].errors.map(DisplayURL.redactingPasswords(in:))
            if d.files[i].url != url { d.files[i].proxyPath = nil }
        }
        for i in d.fetches.indices { d.fetches[i].url = DisplayURL.redacted(d.fetches[i].url) }
        for i in d.errors.indices {
            d.errors[i].url = DisplayURL.redacted(d.errors[i].url)
            d.errors[i].cause = DisplayURL.redactingPasswords(in: d.errors[i].cause)
        }
        return d
    }
}
