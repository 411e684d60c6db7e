import CacheCore
import Foundation
import Proxy

/// What `cache ls` and `cache info` show while a daemon holds the cache: its index as last
/// written, with each file's live figures from the daemon's status document laid over it.
///
/// The daemon writes a file's row to the index when a fetch changes it and when it stops, not on
/// every read, so a file read only from the cache since its last fetch has stale hits, bytes
/// served and last access in the index, while the status page shows the live ones. Asking the
/// daemon makes both agree. A daemon without a proxy (`--no-proxy`) has no document to ask: then
/// the index is all there is.
struct DaemonListing: CacheListing {
    let snapshot: CacheSnapshot
    /// The document's files by URL (as the document shows it: passwords masked).
    let live: [String: FileStatus]

    init(snapshot: CacheSnapshot, document: StatusDocument?) {
        self.snapshot = snapshot
        self.live = Self.liveFiles(document)
    }

    var configuration: CacheConfiguration { snapshot.configuration }

    var usage: CacheUsage {
        let files = list()
        return CacheUsage(bytes: files.reduce(0) { $0 + $1.cachedBytes }, capacity: snapshot.usage.capacity, entries: files.count)
    }

    func list() -> [EntryStatus] { snapshot.list().map(overlaid) }

    /// Pins are committed to the index before the daemon reports them: the snapshot has them all.
    func pinnedRanges(url: String) -> [Range<Int64>] { snapshot.pinnedRanges(url: url) }
    func pinnedBytes(url: String) -> Int64 { snapshot.pinnedBytes(url: url) }
    var pinnedBytes: Int64 { snapshot.pinnedBytes }

    func status(url: String) -> EntryStatus? { snapshot.status(url: url).map(overlaid) }

    /// `s` with the daemon's figures for the same URL and version (a file that changed remotely
    /// since the index was written keeps the index's view rather than mixing two versions).
    func overlaid(_ s: EntryStatus) -> EntryStatus { Self.overlaid(s, live: live) }

    /// `s` with the figures of `live` (the document's files by URL), as `overlaid(_:)`.
    static func overlaid(_ s: EntryStatus, live: [String: FileStatus]) -> EntryStatus {
        guard let f = live[DisplayURL.redacted(s.info.url)], f.generation == s.info.generation else { return s }
        var s = s
        s.cachedRanges = f.cachedRanges.compactMap { $0.count == 2 && $0[0] < $0[1] ? $0[0]..<$0[1] : nil }
        s.cachedBytes = f.cachedBytes
        s.hits = f.hits
        s.misses = f.misses
        s.bytesFromCache = f.bytesFromCache
        s.bytesFromOrigin = f.bytesFromOrigin
        s.lastAccess = f.lastAccess
        s.info.validatedAt = f.validatedAt
        s.recentErrors = f.errors
        s.fetchedFromTier = f.fetchedFromTier
        s.fetchedFromOrigin = f.fetchedFromOrigin
        return s
    }

    /// The document's files by URL.
    static func liveFiles(_ document: StatusDocument?) -> [String: FileStatus] {
        Dictionary((document?.files ?? []).map { ($0.url, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// What the daemon holding `cacheDirectory` knows beyond its index, if it runs a proxy that
    /// answers (see `URLCommand.findProxy`: only the holder's own proxy is asked). Blocking.
    ///
    /// Its files whose figures the index does not hold yet (`status.json?view=unsaved`): a few
    /// whatever the cache holds, so `cache ls` prints its first line at once beside a daemon of
    /// a million entries, whose whole document took seconds to make. Only a daemon of a version
    /// before that view, which refuses it (400), is asked its whole document, as then: one that
    /// did not answer in time is not asked for more (a million entries' document took gigabytes).
    static func liveDocument(cacheDirectory: String) -> StatusDocument? {
        guard case .found = URLCommand.findProxy(cacheDirectory: cacheDirectory),
              let file = ProxyStatus.readRuntimeFile(cacheDirectory: cacheDirectory) else { return nil }
        for query in ["?view=unsaved", ""] {
            guard let (status, body) = DaemonControl.ownerRequest(file.tokenPath(ProxyRouter.documentPath + query),
                                                                  from: file, timeout: 60) else { return nil }
            if status == 200 { return try? StatusDocument.decode(body) }
            guard status == 400 else { return nil }
        }
        return nil
    }
}
