import CacheCore
import Foundation
import FuseMount
import Logging

/// What `mount` does before it reports ready: one request for each URL and listing it was given
/// (through the engine, so the answers seed the cache), a few at a time, so that a 404, an
/// unknown host or an `--index` on a file is told on the terminal instead of only in the log.
///
/// An entry fails (and is left out of the mount) when the origin answers with an error, cannot be
/// reached and nothing of it is cached, or a listing is not one. An origin that cannot be reached
/// for an entry the cache holds is only a warning: cached content stays usable offline. An entry
/// that gets no answer within `timeout` stays in the mount, with a warning.
struct MountCheck {
    enum Verdict: Equatable {
        case ok
        /// Mounted, with this warning.
        case warning(String)
        /// Left out of the mount for this reason.
        case failed(String)
    }

    enum Target: Equatable {
        case file(MountTreeSpec.File)
        case index(MountTreeSpec.Index)

        var isIndex: Bool { if case .index = self { return true } else { return false } }

        var url: String {
            switch self {
            case let .file(f): return f.url
            case let .index(i): return i.url
            }
        }
    }

    let engine: CacheEngine
    let listingTTL: TimeInterval
    /// The listings the check fetched and parsed, by URL: the mount takes them as its first
    /// (`FuseFileSystem.seedListings`) rather than parsing each page again.
    let listings = LockedValue<[String: ListingFetch.Listing]>([:])
    var timeout: TimeInterval = 15
    /// More entries than the listing memory budget could hold fail a listing as it is parsed.
    var maxListingEntries = Int.max
    /// More bytes than this fail a listing (`MountOptions.maxListingBytes`).
    var maxListingBytes = ListingFetch.limit
    var concurrency = 8

    /// Every target of `tree` with its verdict, in the tree's order.
    func run(_ tree: MountTreeSpec) async -> [(target: Target, verdict: Verdict)] {
        let targets = tree.files.map(Target.file) + tree.indexes.map(Target.index)
        var verdicts = [Verdict](repeating: .ok, count: targets.count)
        await withTaskGroup(of: (Int, Verdict).self) { group in
            var next = 0
            func addNext() {
                guard next < targets.count else { return }
                let (i, target) = (next, targets[next])
                next += 1
                group.addTask { (i, await check(target)) }
            }
            for _ in 0..<min(concurrency, targets.count) { addNext() }
            while let (i, verdict) = await group.next() {
                verdicts[i] = verdict
                addNext()
            }
        }
        return Array(zip(targets, verdicts)).map { ($0.0, $0.1) }
    }

    /// The tree without the entries that failed.
    static func keeping(_ tree: MountTreeSpec, _ results: [(target: Target, verdict: Verdict)]) -> MountTreeSpec {
        let failed = results.filter { if case .failed = $0.verdict { return true } else { return false } }.map(\.target)
        var kept = tree
        kept.files.removeAll { failed.contains(.file($0)) }
        kept.indexes.removeAll { failed.contains(.index($0)) }
        return kept
    }

    func check(_ target: Target) async -> Verdict {
        let url = target.url
        let started = Date()
        let answer: Result<EntryInfo?, CacheError>? = await withCheckedContinuation { continuation in
            let once = Once { continuation.resume(returning: $0) }
            Scheduler.shared.after(.seconds(timeout)) { once.fire(nil) }   // resumes the task: brief
            switch target {
            case .file:
                // maxAge 0: asked now even when cached and fresh, so an origin that is down is
                // told at mount (one small revalidation per entry). One byte, not the first
                // 256 KiB an open takes along: nobody reads the file yet, and on a thin link the
                // headers of every entry would share it with the first play (four films on a
                // 10 Mbit/s link: ffmpeg's first frame after mounting 1.40 s instead of 0.52 s).
                engine.open(url: url, maxAge: 0, takeFirstBytes: false) { once.fire($0.map { $0 }) }
            case .index:
                checkListing(url) { once.fire($0) }
            }
        }
        switch answer {
        case let .success(info)?:
            // The engine serves a stale copy when the origin cannot be asked (or is known to be
            // down): not validated since the check started means nobody answered. (A WebDAV
            // listing, nil, was just answered: it is never cached.)
            if let info, info.validatedAt < started {
                return .warning("\(DisplayURL.redacted(url)): the origin did not answer; serving what the cache holds")
            }
            return .ok
        case nil:
            return .warning("\(DisplayURL.redacted(url)): no answer within \(Int(timeout))s; mounted anyway")
        case let .failure(error)?:
            var why = Self.reason(error) + (S3Listing.bucketRoot(of: url) != nil ? Self.s3Hint(error, folder: target.isIndex) : "")
            // `--index URL` of a file: the slash it was given to ask for a listing finds nothing.
            if case let .index(index) = target, case let .index(given) = index.source, case .notFound = error,
               S3Listing.bucketRoot(of: url) == nil,
               !(given.split(separator: "?", maxSplits: 1).first ?? "").trimmingCharacters(in: .whitespaces).hasSuffix("/") {
                why += " (--index takes a folder's listing; a file's URL mounts without --index)"
            }
            if Self.isOriginAway(error),
               engine.status(url: url) != nil || (target.isIndex && engine.hasKeptDocument(WebDAVListing.request(url: url))) {
                return .warning("\(DisplayURL.redacted(url)): \(why); serving what the cache holds")
            }
            return .failed("\(DisplayURL.redacted(url)): \(why)")
        }
    }

    /// Fetches the listing (the mount's first `ls` finds it in the cache) and parses it; a folder
    /// that lists on no GET is asked by WebDAV PROPFIND (`ListingFetch`), whose answer the cache
    /// keeps. The info is the GET's (nil for a WebDAV listing, with the time its kept answer was
    /// confirmed at, `.distantPast` when it was served because the origin is away).
    private func checkListing(_ url: String, completion: @escaping @Sendable (Result<EntryInfo?, CacheError>) -> Void) {
        let ttl = listingTTL
        let backend = EngineBackend(engine: engine)
        let timers = engine.configuration.engineClock.scheduler
        let logger = Logger(label: "httpcachefs.listing")
        // A bucket's folder is no object: only its ListObjectsV2 pages answer (`S3Listing`).
        if S3Listing.location(of: url) != nil {
            return ListingFetch.fetch(url: url, through: backend, limit: maxListingBytes, maxAge: 0, webDAVFirst: false,
                                      timers: timers, logger: logger, maxEntries: maxListingEntries) { [listings] listed in
                if case let .success(listing) = listed { listings.withLock { $0[url] = listing } }
                completion(listed.map { _ in nil })
            }
        }
        engine.open(url: url, maxAge: 0, unknownLengthLimit: Int64(maxListingBytes)) { [engine] result in
            switch result {
            case let .failure(error):
                let kept = engine.hasKeptDocument(WebDAVListing.request(url: url))
                guard ListingFetch.mayBeWebDAV(.failure(error)) || (kept && Self.isOriginAway(error)) else {
                    return completion(.failure(error))
                }
                ListingFetch.propfind(url: url, through: backend, limit: maxListingBytes, maxAge: 0, timers: timers, logger: logger) { [listings] listed in
                    if case let .success(listing) = listed { listings.withLock { $0[url] = listing } }
                    // The GET's error says more than the PROPFIND's when neither lists. A kept
                    // answer served for an origin that is away is a warning, as a cached GET's is.
                    if case .success = listed, Self.isOriginAway(error) {
                        return completion(.failure(error))
                    }
                    completion(listed.map { _ in nil }.mapError { _ in error })
                }
            case let .success(info):
                if let type = info.contentType?.lowercased(), !Self.mayBeListing(type) {
                    return completion(.failure(.badResponse(url: url, message: "not a listing (\(type))")))
                }
                ListingFetch.fetch(url: url, through: backend, limit: maxListingBytes, maxAge: ttl,
                                   webDAVFirst: false, timers: timers, logger: logger, maxEntries: maxListingEntries) { [listings] listed in
                    if case let .success(listing) = listed { listings.withLock { $0[url] = listing } }
                    // Its error says why as it is: not a listing (and what was tried), or past
                    // which limit and how to raise it (`ListingError.reason`).
                    completion(listed.map { _ in info })
                }
            }
        }
    }

    static func mayBeListing(_ contentType: String) -> Bool {
        ["html", "json", "xml", "text/plain"].contains { contentType.contains($0) }
    }

    /// The origin could not be asked (rather than answering no).
    static func isOriginAway(_ error: CacheError) -> Bool {
        switch error {
        case .unreachable, .timeout, .budgetSpent: return true
        case let .httpStatus(_, status): return status >= 500
        default: return false
        }
    }

    /// The reason alone, without the URL (the line starts with it).
    /// Why an S3 endpoint refused, after the status: its error document's code and message
    /// when the fetcher read one (`S3ErrorLog`), else what such a status usually means.
    static func s3Hint(_ error: CacheError, folder: Bool) -> String {
        switch error {
        case let .notFound(url, _), let .forbidden(url, _), let .httpStatus(url, _):
            if let document = S3ErrorLog.last(url: url) { return " (S3: \(document))" }
        default: break
        }
        switch error {
        case .forbidden: return " (S3: access denied or a wrong signature: check the keys, --s3-region and the bucket's policy)"
        case .notFound: return folder ? " (S3: no such bucket)" : " (S3: no such key)"
        case .httpStatus(_, 400): return " (S3: a request the endpoint refused, often signed for the wrong --s3-region)"
        case .httpStatus(_, 301): return " (S3: the bucket is in another region: give its --s3-region)"
        default: return ""
        }
    }

    static func reason(_ error: CacheError) -> String {
        switch error {
        case let .notFound(_, status), let .forbidden(_, status), let .httpStatus(_, status): return "HTTP \(status)"
        case let .unreachable(_, message): return message
        case .timeout: return "timed out"
        case let .badResponse(_, message): return message
        case let .refusedAddress(_, reason): return "refused: \(reason)"
        case let .invalidURL(_, reason): return "invalid URL: \(reason)"
        default: return error.description
        }
    }
}

/// Runs its body for the first value only.
private final class Once<T: Sendable>: Sendable {
    private let body: LockedValue<(@Sendable (T) -> Void)?>
    init(_ body: @escaping @Sendable (T) -> Void) { self.body = LockedValue(body) }
    func fire(_ value: T) {
        let b = body.withLock { b in defer { b = nil }; return b }
        b?(value)
    }
}
