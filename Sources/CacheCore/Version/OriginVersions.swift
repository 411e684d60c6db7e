import Foundation
import Logging

/// How the engine tells one version of a remote file from another: by the validators a head
/// carries (`RemoteVersion`), without ETags where they cannot be trusted (`--ignore-etag`, or an
/// origin whose ETags change on every answer), and never by a head that names no version where a
/// version must be confirmed (`cannotConfirm`).
///
/// It owns the origins found to rotate their ETags (in this process: logged once each, their
/// versions then compared by length and Last-Modified, their `If-Range` carrying Last-Modified).
///
/// Threads: the fetch thread (a head arriving, under the entry's shard lock), a reader's (a
/// launch); a leaf lock around the set of origins.
final class OriginVersions: Sendable {
    /// `--ignore-etag`: no origin's ETags are trusted.
    let ignoreETag: Bool
    private let logger: Logger
    /// Origins whose ETags changed while length and Last-Modified did not (`differs`).
    private let rotatingETagOrigins = LockedValue<Set<String>>([])

    init(ignoreETag: Bool, logger: Logger) {
        self.ignoreETag = ignoreETag
        self.logger = logger
    }

    /// True when `head` describes a different version than `info` (call with a known info). An
    /// ETag that changed alone (same length and Last-Modified) with evidence that the origin's
    /// ETags rotate (`ResponseHead.etagRotating`) marks the origin: logged once, its versions then
    /// compared without ETags, and its entries' `If-Range` carries Last-Modified. Without such
    /// evidence it is a change, as any other.
    func differs(_ info: EntryInfo, _ head: ResponseHead) -> Bool {
        var ignoreETag = ignoresETag(url: info.url)
        if !ignoreETag, head.etagRotating,
           RemoteVersion.etagRotated(etag: info.etag, lastModified: info.lastModified, length: info.length,
                                     to: head.etag, head.lastModified, head.totalLength) {
            noteRotatingETags(info.url)
            ignoreETag = true
        }
        return RemoteVersion.changeReason(etag: info.etag, lastModified: info.lastModified, length: info.length,
                                          to: head.etag, head.lastModified, head.totalLength, ignoringETag: ignoreETag) != nil
    }

    /// A probe's whole answer that names no version and no length (nginx's chunked autoindex
    /// page) cannot show that the cached version is still the origin's: taken as the same, its
    /// bytes would be written over the cached copy while the entry kept the old length, so a
    /// listing that grew would be read cut at the old length (`refresh` would never show a new
    /// file) and one that shrank would keep the old copy's tail. The probe starts a new version, whose length its end
    /// gives. (Only a probe: a read's transfer of such a file is the version the probe bound.)
    ///
    /// A listing page's probe (`EntryState.isListingPage`: a refresh, a listing past its TTL)
    /// that names no version cannot confirm it either, length or not: a page changed to one of
    /// the same length (a size "300" become "400", a name swapped for one as long) would look
    /// like the same version, the whole answer's bytes would be dropped as cached already, and
    /// the refresh would serve the old page as a success. Its answer is the page's new version, read
    /// anew (a 206 of it is asked again as a new version's).
    static func cannotConfirm(_ head: ResponseHead, listingPage: Bool = false) -> Bool {
        guard head.etag == nil, head.lastModified == nil else { return false }
        if listingPage { return head.status == 200 || head.status == 206 }
        return head.status == 200 && head.totalLength == nil
    }

    /// Versions of `url`'s file are compared without ETags (`--ignore-etag`, or its origin's
    /// ETags rotate).
    func ignoresETag(url: String) -> Bool {
        ignoreETag || hasRotatingETags(url)
    }

    /// "scheme://host:port" of a URL: what "an origin" is for rotating ETags, range answers and
    /// offline mode.
    static func originName(_ url: String) -> String {
        recentOriginNames.value(for: url) { url in
            guard let c = URLComponents(string: url), let host = c.host else { return url }
            return "\(c.scheme ?? "http")://\(host.lowercased())" + (c.port.map { ":\($0)" } ?? "")
        }
    }

    /// `originName` is asked several times per fetch (health, rotating ETags, If-Range).
    private static let recentOriginNames = RecentResults<String>()

    private func hasRotatingETags(_ url: String) -> Bool {
        let origin = Self.originName(url)
        return rotatingETagOrigins.withLock { $0.contains(origin) }
    }

    private func noteRotatingETags(_ url: String) {
        let origin = Self.originName(url)
        let first = rotatingETagOrigins.withLock { $0.insert(origin).inserted }
        if first {
            logger.notice("the origin's ETags change on every answer; using length and Last-Modified", metadata: [
                "origin": "\(origin)", "url": "\(url)"])
        }
    }
}
