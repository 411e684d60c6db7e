import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a running cache shows of itself: the JSON of `/.httpcachefs/status.json`, which the
/// status page draws and `httpcachefs status` prints. Documented field by field in docs/reference.md;
/// add fields, never rename them (scripts read this).
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
    /// The cache tier's counters (`--tier`); absent without one.
    public var tier: TierStatus?

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
}

extension CacheSummary {
    /// The summary of `files` (all of a cache's entries) in a cache of `configuration`.
    init(files: [EntryStatus], configuration config: CacheConfiguration, showDirectory: Bool, totals: Totals?) {
        var fs = statvfs()
        var floor: Int64 = 0, free: Int64 = 0
        if statvfs(config.directory, &fs) == 0 {
            floor = Int64(Double(fs.f_blocks) * Double(fs.f_frsize) * config.freeSpaceFloor)
            free = Int64(fs.f_bavail) * Int64(fs.f_frsize)
        }
        var slices = 0
        for f in files {
            var last: Int64 = -1
            for r in f.cachedRanges where !r.isEmpty {
                let first = r.lowerBound / config.sliceSize, end = (r.upperBound - 1) / config.sliceSize
                if end > last { slices += Int(end - max(first, last + 1) + 1) }
                last = max(last, end)
            }
        }
        let reads = totals.map { $0.hits + $0.misses + ($0.failedReads ?? 0) } ?? 0
        self.init(directory: showDirectory ? config.directory : nil,
                            usedBytes: files.reduce(0) { $0 + $1.cachedBytes }, capacityBytes: config.capacity,
                            freeFloorBytes: floor, filesystemFreeBytes: free, files: files.count, slices: slices,
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
        guard let c = URLComponents(string: url), let scheme = c.scheme, let host = c.host else {
            return (url, "/", "file")
        }
        let origin = scheme + "://" + (host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host) + (c.port.map { ":\($0)" } ?? "")
        let path = c.percentEncodedPath.isEmpty ? "/" : c.percentEncodedPath
        let cut = path.lastIndex(of: "/").map { path[...$0] } ?? "/"
        let folder = String(cut).removingPercentEncoding ?? String(cut)
        let html = HeadDecision.Provenance.mediaType(contentType) == "text/html"
        return (origin, folder, path.hasSuffix("/") || html ? "listing" : "file")
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
    public func statusDocument(version: String, showDirectory: Bool) -> StatusDocument {
        let now = Date()
        let list = list()
        let fetches = tracker.inFlight(now: now)
        var fetching: [CacheKey: RangeSet] = [:]
        for f in fetches {
            guard let rest = Self.stillToCome(f), let key = try? key(for: f.url) else { continue }
            fetching[key, default: RangeSet()].insert(rest)
        }
        let files = list.map { s -> FileStatus in
            let place = FileStatus.placement(url: s.info.url, contentType: s.info.contentType)
            return FileStatus(
                url: s.info.url, finalURL: s.info.finalURL, name: Self.displayName(s.info.url), length: s.info.length,
                cachedBytes: s.cachedBytes, cachedRanges: s.cachedRanges.map { [$0.lowerBound, $0.upperBound] },
                fetchingRanges: (fetching[s.info.key]?.ranges ?? []).map { [$0.lowerBound, $0.upperBound == Int64.max ? -1 : $0.upperBound] },
                contentType: s.info.contentType, etag: s.info.etag, lastModified: s.info.lastModified,
                generation: s.info.generation, validatedAt: s.info.validatedAt, lastAccess: s.lastAccess,
                hits: s.hits, misses: s.misses, bytesFromCache: s.bytesFromCache, bytesFromOrigin: s.bytesFromOrigin,
                reads: s.readsByDoor, errors: s.recentErrors, proxyPath: nil,
                origin: place.origin, folder: place.folder, kind: place.kind,
                fetchedFromTier: tier?.tierSplit(ofKey: s.info.key.string)?.tier,
                fetchedFromOrigin: tier?.tierSplit(ofKey: s.info.key.string)?.origin)
        }
        let totals = metrics.totals
        return StatusDocument(
            version: version, pid: getpid(), startedAt: metrics.startedAt,
            uptimeSeconds: now.timeIntervalSince(metrics.startedAt), doors: metrics.currentDoors,
            cache: summary(files: list, showDirectory: showDirectory, totals: totals),
            totals: totals, files: files, fetches: fetches, errors: metrics.recentErrors,
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
    }

    /// Sets the metric gauges (bytes used, capacity, entries, fetches in flight) from the cache's
    /// state: the metrics backend's owner calls this just before it renders a scrape.
    public func recordMetricGauges() {
        metrics.recordGauges(summary: summary(files: list(), showDirectory: false, totals: nil), fetchesInFlight: tracker.inFlightCount,
                             originsDown: originHealth.downOrigins().count)
    }

    func summary(files: [EntryStatus], showDirectory: Bool, totals: Totals?) -> CacheSummary {
        CacheSummary(files: files, configuration: configuration, showDirectory: showDirectory, totals: totals)
    }

    /// The last path segment of `url`, percent-decoded (the URL itself if it has none).
    static func displayName(_ url: String) -> String {
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
