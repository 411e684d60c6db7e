import CacheCore
import Foundation
import Logging

/// How a folder's listing is fetched and parsed: a GET (HTML autoindex, nginx JSON), else a WebDAV
/// `PROPFIND` with `Depth: 1` (`WebDAVListing`), so every user of listings (the mount's tree, its
/// refresh, the mount check, `preload --recursive`) reads WebDAV folders the same way.
///
/// The PROPFIND is tried when the GET does not list: an error a WebDAV folder gives to GET (403
/// from nginx with autoindex off, 405, 501), an answer that is no listing, or a listing with no
/// entries; and when the GET's answer carried a `DAV:` header (a WebDAV server's folder page,
/// whose links need not be the folder's files). If that PROPFIND fails, the GET's listing stands. A folder once listed by PROPFIND is remembered (`ListingKinds`), and its subfolders
/// with it: their next listings go to PROPFIND first, and to GET only if that fails. So is a
/// folder whose PROPFIND answer the cache keeps (`ListingTransport.hasKeptListing`): a mount
/// started while its WebDAV origin is down lists from the kept answers at once.
///
/// PROPFIND answers are kept by the transport with the same `maxAge` as GET listings, so a
/// WebDAV listing is answered from the cache while fresh, asked again when older, and served as
/// it is while the origin is down (`CacheEngine.fetchDocument`).
public enum ListingFetch {
    /// The most bytes a listing may have at the least: more are refused (someone pointed
    /// --index at a video), and one without a length is stopped there. A larger listing
    /// memory raises it (`limit(listingBudget:)`).
    public static let limit = 64 << 20

    /// The most bytes a listing may have under `listingBudget` (`--listing-memory`): half of it,
    /// at least `limit`. A listed name takes about 100 bytes of an nginx or Apache page and 184
    /// of the budget once kept, so a folder the budget can hold can be fetched too: a million
    /// names (about 100 MB of page) under the default 256 MiB.
    public static func limit(listingBudget: Int64) -> Int {
        max(limit, Int(clamping: listingBudget / 2))
    }

    /// What a listing came from.
    public enum Kind: Sendable, Equatable { case page, webDAV, s3 }

    public struct Listing: Sendable {
        public var entries: [ListingEntry]
        public var kind: Kind
    }

    /// Fetches and parses the listing at `url`. `webDAVFirst`: it was a WebDAV folder before.
    /// `maxEntries`: a page with more fails as it is parsed (`DirectoryListing.parse`).
    /// `progress`: told at each page of a listing of several (an S3 folder's) but the last.
    /// `timers`: the caller's scheduler, where a large page's freed heap is given back once its
    /// bytes are let go (`HeapTrim`).
    public static func fetch(url: String, through transport: ListingTransport, limit: Int, maxAge: TimeInterval,
                             webDAVFirst: Bool, timers: Scheduler, logger: Logger, maxEntries: Int = .max, progress: (@Sendable () -> Void)? = nil,
                             completion: @escaping @Sendable (Result<Listing, CacheError>) -> Void) {
        // A folder of an S3 bucket (from an s3:// URL) lists by ListObjectsV2, and only so.
        if let s3 = S3Listing.location(of: url) {
            return S3Listing.fetch(url: url, listingBase: s3.listingBase, prefix: s3.prefix, through: transport, limit: limit,
                                   maxAge: maxAge, logger: logger, maxEntries: maxEntries, progress: progress, completion: completion)
        }
        if webDAVFirst || transport.hasKeptListing(WebDAVListing.request(url: url)) {
            propfind(url: url, through: transport, limit: limit, maxAge: maxAge, timers: timers, logger: logger, maxEntries: maxEntries) { result in
                switch result {
                case .success: completion(result)
                case .failure:
                    page(url: url, through: transport, limit: limit, maxAge: maxAge, tryWebDAV: false, timers: timers, logger: logger,
                         maxEntries: maxEntries, completion: completion)
                }
            }
        } else {
            page(url: url, through: transport, limit: limit, maxAge: maxAge, tryWebDAV: true, timers: timers, logger: logger,
                 maxEntries: maxEntries, completion: completion)
        }
    }

    /// The GET, then the PROPFIND if the GET does not list (and `tryWebDAV`).
    private static func page(url: String, through transport: ListingTransport, limit: Int, maxAge: TimeInterval,
                             tryWebDAV: Bool, timers: Scheduler, logger: Logger, maxEntries: Int,
                             completion: @escaping @Sendable (Result<Listing, CacheError>) -> Void) {
        transport.fetchPage(url: url, limit: limit, maxAge: maxAge) { fetched in
            var tooMany = false
            let parsed: Result<[ListingEntry], CacheError> = fetched.flatMap { bytes in
                do { return .success(try DirectoryListing.parse(bytes, url: url, logger: logger, maxEntries: maxEntries)) } catch {
                    if case .tooManyEntries? = error as? ListingError { tooMany = true }
                    return .failure(.badResponse(url: url, message: (error as? ListingError)?.reason ?? "\(error)"))
                }
            }
            // The page's bytes are let go once this returns (only its entries are kept, and
            // counted by the listing budget); a large page's freed heap goes back to the system.
            if case let .success(bytes) = fetched, bytes.count >= HeapTrim.threshold {
                timers.after(.zero) { HeapTrim.releaseFreedMemory() }   // after the bytes go: a timer, not this stack
            }
            // A page that lists too much is a listing: no PROPFIND for it.
            guard tryWebDAV, !tooMany, mayBeWebDAV(parsed) || transport.answeredDAV(url: url) else { return completion(parsed.map { Listing(entries: $0, kind: .page) }) }
            propfind(url: url, through: transport, limit: limit, maxAge: maxAge, timers: timers, logger: logger, maxEntries: maxEntries) { dav in
                switch dav {
                case .success: completion(dav)
                case let .failure(error):
                    logger.debug("no WebDAV listing either: \(DisplayURL.redacted(url)): \(error)")
                    // The GET's answer stands: its error says more than the PROPFIND's.
                    completion(parsed.map { Listing(entries: $0, kind: .page) })
                }
            }
        }
    }

    /// The PROPFIND alone, parsed (its answer kept by the transport, younger than `maxAge` used).
    public static func propfind(url: String, through transport: ListingTransport, limit: Int, maxAge: TimeInterval,
                                timers: Scheduler, logger: Logger, maxEntries: Int = .max,
                                completion: @escaping @Sendable (Result<Listing, CacheError>) -> Void) {
        transport.fetchDocument(WebDAVListing.request(url: url), limit: limit, maxAge: maxAge) { fetched in
            if case let .success(bytes) = fetched, bytes.count >= HeapTrim.threshold {
                timers.after(.zero) { HeapTrim.releaseFreedMemory() }   // after the bytes go: a timer, not this stack
            }
            completion(fetched.flatMap { bytes in
                do { return .success(Listing(entries: try WebDAVListing.parse(bytes, url: url, logger: logger, maxEntries: maxEntries), kind: .webDAV)) } catch {
                    return .failure(.badResponse(url: url, message: (error as? ListingError)?.reason ?? "\(error)"))
                }
            })
        }
    }

    /// True when a GET's outcome is what a folder that lists only by PROPFIND answers.
    public static func mayBeWebDAV(_ parsed: Result<[ListingEntry], CacheError>) -> Bool {
        switch parsed {
        case let .success(entries): return entries.isEmpty
        case let .failure(.forbidden(_, status)): return status == 403
        case let .failure(.httpStatus(_, status)): return status == 405 || status == 501
        case .failure(.badResponse): return true
        case .failure: return false
        }
    }
}

/// The two requests a listing may need. `MountBackend` provides both through the cache engine;
/// `preload` through a daemon provides them through the daemon's proxy and its own fetcher.
public protocol ListingTransport: Sendable {
    /// The whole body of a GET, at most `limit` bytes, revalidated when older than `maxAge`.
    func fetchPage(url: String, limit: Int, maxAge: TimeInterval,
                   completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void)
    /// The whole answer to `request` (a PROPFIND), at most `limit` bytes; a transport that keeps
    /// answers answers from the kept one when it is younger than `maxAge` or the origin is away.
    func fetchDocument(_ request: FetchRequest, limit: Int, maxAge: TimeInterval,
                       completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void)
    /// True when the transport keeps an answer to `request` (the folder listed by PROPFIND before).
    func hasKeptListing(_ request: FetchRequest) -> Bool
    /// True when the last GET of `url` carried a `DAV:` header.
    func answeredDAV(url: String) -> Bool
}

extension ListingTransport {
    /// Default: nothing kept.
    public func hasKeptListing(_ request: FetchRequest) -> Bool { false }
    /// Default: no headers seen.
    public func answeredDAV(url: String) -> Bool { false }
}

/// The folders known to list by PROPFIND (their listing URLs), so that their next listings, and
/// their subfolders' first ones, skip the GET. Thread-safe.
public final class ListingKinds: Sendable {
    /// The listing URLs of WebDAV folders.
    private let webDAV = LockedValue(Set<String>())

    public init() {}

    public func isWebDAV(_ url: String) -> Bool { webDAV.withLock { $0.contains(url) } }

    /// Records what `url` listed as; a WebDAV folder's subfolders are taken to be WebDAV too.
    public func note(_ listing: ListingFetch.Listing, url: String) {
        webDAV.withLock { webDAV in
            switch listing.kind {
            case .page, .s3: webDAV.remove(url)
            case .webDAV:
                // A bound on what a hostile origin's folders can make this hold: forgetting only
                // costs a GET before the next PROPFIND.
                if webDAV.count > 100_000 { webDAV.removeAll() }
                webDAV.insert(url)
                for e in listing.entries where e.isDirectory { webDAV.insert(e.url) }
            }
        }
    }
}
