import CacheCore
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Logging

/// S3 buckets as folders: a folder under a bucket's root is listed by `ListObjectsV2` with
/// `delimiter=/` and the folder's key prefix, page after page (continuation tokens), and the
/// answers' common prefixes are its subfolders, its objects its files (size, LastModified).
///
/// Which folders are S3 is told, not guessed: the executable registers each bucket root it made
/// from an s3:// URL (`register`), and `ListingFetch` asks `location(of:)` for every folder
/// (process-wide, as the tree, its refresh, the mount check and `preload` all list through
/// `ListingFetch`). Requests go through the same transport as GET listings, so pages are cached,
/// revalidated and served while the endpoint is down like any listing, and signed by the fetcher.
///
/// Parsing follows `WebDAVListing`: the answer is outside input, size-bounded before parsing,
/// refused with a DTD or anything FoundationXML cannot take safely; elements count by local name
/// (servers differ in namespaces). Keys are asked URL-encoded (`encoding-type=url`, so a key
/// with a control character survives XML) and decoded when the answer says so. A key whose last
/// part is no valid file name (a control or bidi character, too long) is shown
/// under an escaped name (`escapedName`), not dropped: its URL is made from the key itself. Only a
/// key part that is `.`, `..` or empty is skipped (with a warning): URLs drop such segments, so
/// its URL would name another object.
public enum S3Listing {
    /// Bucket roots (folder URLs ending in `/`) and the URL each is listed at.
    private static let buckets = LockedValue([String: String]())
    /// Pages fetched for one folder at most (1000 keys a page): a bound on a server that never
    /// stops handing out continuation tokens.
    static let maxPages = 2_000

    /// Makes `root` (a bucket's root folder URL) an S3 bucket listed at `listingBase`.
    public static func register(root: String, listingBase: String) {
        buckets.withLock { $0[root] = listingBase }
    }

    /// `root` is no S3 bucket any more (the mount that named it ended).
    public static func unregister(root: String) {
        buckets.withLock { $0[root] = nil }
    }

    /// The listing base and key prefix of the folder at `url`, if it is under a registered bucket.
    public static func location(of url: String) -> (listingBase: String, prefix: String)? {
        guard url.hasSuffix("/") else { return nil }
        return buckets.withLock { roots in
            for (root, base) in roots where url.hasPrefix(root) {
                let rest = url.dropFirst(root.count)
                return (base, String(decoding: SigV4.percentDecodedBytes(String(rest)), as: UTF8.self))
            }
            return nil
        }
    }

    /// Whether this process made any s3:// URL an HTTP URL (a mount that did cannot join a daemon).
    public static var hasBuckets: Bool { buckets.withLock { !$0.isEmpty } }

    /// The root of the registered bucket `url` is in (a folder or an object), if any.
    public static func bucketRoot(of url: String) -> String? {
        buckets.withLock { roots in roots.keys.first { url.hasPrefix($0) } }
    }

    /// The ListObjectsV2 URL of one page.
    public static func pageURL(listingBase: String, prefix: String, continuation: String?) -> String {
        var url = listingBase + "?list-type=2&delimiter=%2F&encoding-type=url&prefix=" + SigV4.encode(prefix, keepSlash: false)
        if let continuation { url += "&continuation-token=" + SigV4.encode(continuation, keepSlash: false) }
        return url
    }

    /// Lists the folder at `url` (under `listingBase`, key prefix `prefix`): every page, in order,
    /// one at a time. A transport that answers at once (pages the cache holds) is driven in a
    /// loop, not by recursion, so a folder of many pages never deepens the stack.
    /// `progress`: told at each page taken that has a next one (a caller's deadline for the
    /// whole listing may count from the last page: a folder of 100k keys is 100 pages).
    static func fetch(url: String, listingBase: String, prefix: String, through transport: ListingTransport, limit: Int,
                      maxAge: TimeInterval, logger: Logger, maxEntries: Int, progress: (@Sendable () -> Void)? = nil,
                      completion: @escaping @Sendable (Result<ListingFetch.Listing, CacheError>) -> Void) {
        let run = Run(url: url, prefix: prefix, maxEntries: maxEntries, logger: logger)
        /// Asks for pages from `token` on while their answers come at once; returns when one
        /// will come later (its completion goes on from there) or the listing has ended.
        @Sendable func pages(from token: String?) {
            var token = token
            while true {
                let pageURL = pageURL(listingBase: listingBase, prefix: prefix, continuation: token)
                // Whether fetchPage has returned, and the next token if its answer came before that.
                let handoff = LockedValue<(returned: Bool, next: String?, answered: Bool)>((false, nil, false))
                transport.fetchPage(url: pageURL, limit: limit, maxAge: maxAge) { fetched in
                    guard let next = run.take(fetched, pageURL: pageURL, completion: completion) else { return }
                    progress?()
                    let later = handoff.withLock { h -> Bool in
                        if h.returned { return true }
                        (h.next, h.answered) = (next, true)
                        return false
                    }
                    if later { pages(from: next) }
                }
                let (answered, next) = handoff.withLock { h -> (Bool, String?) in
                    h.returned = true
                    return (h.answered, h.next)
                }
                guard answered, let next else { return }
                token = next
            }
        }
        pages(from: nil)
    }

    /// One listing's entries so far. Pages are taken one at a time (the next is asked only
    /// after this one was taken), so the lock only orders the hand-over between threads.
    private final class Run: @unchecked Sendable {
        let url: String
        let prefix: String
        let maxEntries: Int
        let logger: Logger
        private let lock = NSLock()
        private var entries: [ListingEntry] = []
        private var names = Set<String>()
        private var tokens = Set<String>()

        init(url: String, prefix: String, maxEntries: Int, logger: Logger) {
            (self.url, self.prefix, self.maxEntries, self.logger) = (url, prefix, maxEntries, logger)
        }

        /// Takes one page's answer: the next page's token, or nil when the listing ended (then
        /// `completion` has been called).
        func take(_ fetched: Result<[UInt8], CacheError>, pageURL: String,
                  completion: @Sendable (Result<ListingFetch.Listing, CacheError>) -> Void) -> String? {
            let parsed: Result<Page, CacheError> = fetched.flatMap { bytes in
                do { return .success(try S3Listing.parse(bytes, url: url, prefix: prefix)) } catch {
                    return .failure(.badResponse(url: pageURL, message: "\(error)"))
                }
            }
            let page: Page
            switch parsed {
            case let .failure(error):
                completion(.failure(error))
                return nil
            case let .success(p): page = p
            }
            let outcome: Result<ListingFetch.Listing, CacheError>? = lock.withLock {
                for item in page.items {
                    // A key part "." or ".." (or empty, from "//") has no URL of its own: URLs
                    // drop such segments (RFC 3986), and its URL would fetch another object.
                    guard !item.name.isEmpty, item.name != ".", item.name != ".." else {
                        logger.warning("listing \(DisplayURL.redacted(url)): skipped the key \(prefix + item.name)\(item.isDirectory ? "/" : ""): a key part '.', '..' or empty cannot be fetched by URL")
                        continue
                    }
                    let name = unique(escapedName(item.name), in: &names)
                    let child = url + SigV4.encode(item.name, keepSlash: false) + (item.isDirectory ? "/" : "")
                    entries.append(ListingEntry(name: name, isDirectory: item.isDirectory,
                                                url: (try? URLSpelling.normalize(child)) ?? child,
                                                size: item.size, modified: item.modified))
                }
                if entries.count > maxEntries {
                    return .failure(.badResponse(url: url, message: ListingError.tooManyEntries(url: url, limit: maxEntries).reason))
                }
                guard page.truncated, let next = page.continuation else { return .success(ListingFetch.Listing(entries: entries, kind: .s3)) }
                // A token handed out twice would list the same keys forever.
                guard tokens.insert(next).inserted else {
                    return .failure(.badResponse(url: url, message: "the endpoint handed out a continuation token twice"))
                }
                guard tokens.count < maxPages else { return .failure(.badResponse(url: url, message: "more than \(maxPages) pages of keys")) }
                return nil
            }
            if let outcome {
                completion(outcome)
                return nil
            }
            return page.continuation
        }
    }

    /// One entry of a page: the part of the key after the folder's prefix (without the
    /// delimiter of a common prefix), as S3 has it.
    struct Item: Equatable {
        var name: String
        var isDirectory: Bool
        var size: Int64?
        var modified: Date?
        var etag: String?
    }

    struct Page: Equatable {
        var items: [Item]
        var truncated: Bool
        var continuation: String?
    }

    /// Parses one ListObjectsV2 answer for the folder whose key prefix is `prefix`.
    static func parse(_ bytes: [UInt8], url: String, prefix: String) throws -> Page {
        if WebDAVListing.containsDTD(bytes) { throw ListingError.notS3Listing(url: url, reason: "a document type declaration (refused: no entities)") }
        if let why = WebDAVListing.unsafeForParser(bytes) { throw ListingError.notS3Listing(url: url, reason: why) }
        let reader = ListBucketResultReader()
        let parser = XMLParser(data: Data(bytes))
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        guard parser.parse(), reader.closedRoot else {
            let why = parser.parserError.map { "\($0.localizedDescription)" } ?? "no ListBucketResult element"
            throw ListingError.notS3Listing(url: url, reason: why)
        }
        let urlEncoded = reader.encodingType?.lowercased() == "url"
        func key(_ raw: String) -> String {
            urlEncoded ? String(decoding: SigV4.percentDecodedBytes(raw.replacingOccurrences(of: "+", with: " ")), as: UTF8.self) : raw
        }
        var items: [Item] = []
        for p in reader.prefixes {
            let k = key(p)
            // A common prefix is this folder's prefix, a name, and the delimiter.
            guard k.hasPrefix(prefix), k.hasSuffix("/"), k.utf8.count > prefix.utf8.count else { continue }
            items.append(Item(name: String(k.dropFirst(prefix.count).dropLast()), isDirectory: true))
        }
        for o in reader.objects {
            guard let raw = o.key else { continue }
            let k = key(raw)
            // The folder's own marker object ("films/") is the folder, not an entry.
            guard k.hasPrefix(prefix), k.utf8.count > prefix.utf8.count else { continue }
            let name = String(k.dropFirst(prefix.count))
            guard !name.contains("/") else { continue }   // not this folder's (a server ignoring the delimiter)
            items.append(Item(name: name, isDirectory: false, size: o.size, modified: o.modified, etag: o.etag))
        }
        return Page(items: items, truncated: reader.truncated, continuation: reader.continuation)
    }

    /// A key's name as the mount shows it: itself when it can be a file name, else escaped
    /// (`%2E` for `.`, each control or bidi character, `/` and `%` as `%XX`; the empty name of a
    /// `//` in a key is `%`; a name too long keeps its start and gains a hash of the whole).
    public static func escapedName(_ name: String) -> String {
        guard DirectoryListing.rejection(of: name) != nil else { return name }
        if name.isEmpty { return "%" }
        if name == "." { return "%2E" }
        if name == ".." { return "%2E%2E" }
        var out = ""
        for scalar in name.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F || scalar == "/" || scalar == "%" || DirectoryListing.isBidiControl(scalar) {
                for b in String(scalar).utf8 { out += String(format: "%%%02X", b) }
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if out.utf8.count > PathName.maxComponentBytes {
            let digest = SHA256.hash(Array(name.utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
            var head = ""
            for c in out where head.utf8.count + c.utf8.count <= PathName.maxComponentBytes - 12 { head.append(c) }
            out = head + "…" + digest
        }
        return out
    }

    /// `name`, or `name~2`, `name~3`… when an escaped name met an existing one.
    static func unique(_ name: String, in names: inout Set<String>) -> String {
        var candidate = name
        var n = 1
        while names.contains(candidate) {
            n += 1
            candidate = "\(name)~\(n)"
        }
        names.insert(candidate)
        return candidate
    }
}

/// The `XMLParser` delegate of a ListObjectsV2 answer.
final class ListBucketResultReader: NSObject, XMLParserDelegate {
    struct Object {
        var key: String?
        var size: Int64?
        var modified: Date?
        var etag: String?
    }

    private(set) var objects: [Object] = []
    private(set) var prefixes: [String] = []
    private(set) var truncated = false
    private(set) var continuation: String?
    private(set) var encodingType: String?
    private(set) var closedRoot = false
    private var path: [String] = []
    private var object: Object?
    private var text = ""
    private static let maxText = 8192

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]) {
        path.append(name)
        text = ""
        if name == "Contents", path.count == 2 { object = Object() }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard text.utf8.count < Self.maxText else { return }
        text += string
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        let depth = path.count
        path.removeLast()
        let value = text
        text = ""
        guard path.first == "ListBucketResult" || (depth == 1 && name == "ListBucketResult") else { return }
        switch (depth, name) {
        case (1, _): closedRoot = true
        case (2, "IsTruncated"): truncated = value.trimmingCharacters(in: .whitespaces) == "true"
        case (2, "NextContinuationToken"): continuation = value
        case (2, "EncodingType"): encodingType = value
        case (2, "Contents"):
            if let o = object { objects.append(o) }
            object = nil
        case (3, "Key") where path.last == "Contents": object?.key = value
        case (3, "Size") where path.last == "Contents":
            let t = value.trimmingCharacters(in: .whitespaces)
            if !t.isEmpty, t.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) { object?.size = Int64(t) }
        case (3, "LastModified") where path.last == "Contents": object?.modified = HTTPDate.parseISO8601(value)
        case (3, "ETag") where path.last == "Contents": object?.etag = value
        case (3, "Prefix") where path.last == "CommonPrefixes": prefixes.append(value)
        default: break
        }
    }
}
