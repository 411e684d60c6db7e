import CacheCore
import Foundation
import Logging

/// One child of a listed directory.
public struct ListingEntry: Equatable, Sendable {
    /// Percent-decoded name, without the trailing slash of directories.
    public var name: String
    public var isDirectory: Bool
    /// Absolute URL of the child (directories end in `/`).
    public var url: String
    /// Exact size in bytes when the listing gives one; approximate sizes ("1.2M") are dropped,
    /// since st_size must be exact: the size is then fetched lazily on lookup.
    public var size: Int64?
    public var modified: Date?

    public init(name: String, isDirectory: Bool, url: String, size: Int64? = nil, modified: Date? = nil) {
        self.name = name
        self.isDirectory = isDirectory
        self.url = url
        self.size = size
        self.modified = modified
    }
}

/// Parses web-server directory listings: nginx HTML autoindex, Apache mod_autoindex (plain list,
/// `<pre>` fancy index and HTML table), lighttpd-style tables, and nginx JSON autoindex.
///
/// The HTML parsers share one idea instead of one grammar per server: every `<a href>` that
/// resolves to a direct child of the directory is an entry, and the text between its `</a>` and
/// the next link (the rest of the `<pre>` line or table row, tags stripped) holds the date and
/// the size columns, which are recognised by shape. Sorting links (`?C=N;O=D`), the parent link,
/// absolute links elsewhere and icon links to the same child are ignored or merged.
///
/// A listing is outside input: an entry whose name the mount cannot show (a control character,
/// which would break `ls` output and log lines, or more than 255 bytes, which the kernel refuses)
/// is skipped with a log line, and the rest of the listing is served.
///
/// Cost, for hostile pages too: one pass over the bytes (no String of the whole page, no scan
/// that goes back), an href over `maxHrefBytes` measured and skipped, at most `maxTailBytes`
/// after each link read for its columns, other attributes stepped over. What the result holds
/// is its entries alone, which the listing budget counts (`FileSystemCore.listingCost`). Runs on
/// whichever thread delivered the page (a backend thread); blocks on nothing.
///
/// Map of this folder (`Listings/`): folders listed by origins, fetched, parsed, filtered.
/// - `DirectoryListing.swift` (this file): which parser a page takes; the HTML autoindex parser,
///   one pass. `NginxJSONListing.swift`: nginx's JSON autoindex, decoded a run of elements at a
///   time (`JSONArrayRuns.swift`).
/// - `WebDAVListing.swift`: `PROPFIND` and its multistatus parser.
/// - `ListingFetch.swift`: GET, else PROPFIND, for every user of listings;
///   `FileSystemCore+ListingFetch.swift` the mount's use of it.
/// - `FileSystemCore+Listings.swift`: readdir snapshots, TTL, stale-while-revalidate.
/// - `ListingFilter.swift`: `--include` / `--exclude` as rclone reads them.
/// - `URLListParser.swift`: `--url-list` files. `HeapTrim.swift`: the heap given back after a
///   large page.
/// Neighbours: fills `Core/`'s tree; fetches through `Kernel/`'s `MountBackend`
/// (`ListingTransport`); `Tree/` refreshes through it. The executable's mount check and
/// `preload --recursive` use `ListingFetch` too.
public enum DirectoryListing {
    /// Longest href taken as a link: far longer than any URL a server or browser uses (a name
    /// the mount can show is at most 255 bytes, 765 percent-encoded). A longer one is skipped by
    /// the tokenizer as it is found, before any String, entity decoding or URL resolution is
    /// made of it, so a hostile page costs a byte scan, not Foundation work per megabyte.
    public static let maxHrefBytes = 8 << 10
    /// How much of the text after a link is read for its date and size columns: a real row's
    /// columns are within a few hundred bytes of its link.
    static let maxTailBytes = 4 << 10

    /// Told the URL of every listing `parse` is called for (nil: nobody listens), for the tests
    /// that pin that each fetched listing is parsed once.
    static let parseObserver = LockedValue<(@Sendable (String) -> Void)?>(nil)

    /// The entries of the listing in `bytes`. One pass over the bytes: the page is never copied
    /// into a String whole, and what the result holds is its entries alone (the caller drops the
    /// bytes after this returns). `maxEntries`: more fail with `tooManyEntries` as soon as they
    /// are found (a listing the memory budget could never hold is not built whole first).
    public static func parse(_ bytes: [UInt8], url: String,
                             logger: Logger = Logger(label: "httpcachefs.listing"),
                             maxEntries: Int = .max) throws -> [ListingEntry] {
        if let observe = parseObserver.withLock({ $0 }) { observe(url) }
        guard let base = URL(string: url) else { throw ListingError.badBaseURL(url) }
        let first = bytes.first(where: { !isSpace($0) && $0 != 11 && $0 != 12 })
        if first == UInt8(ascii: "[") { return try parseNginxJSON(bytes, base: base, logger: logger, maxEntries: maxEntries) }
        guard bytes.contains(UInt8(ascii: "<")) else { throw ListingError.notAListing(url: url) }
        let entries = parseHTML(bytes, base: base, logger: logger, maxEntries: maxEntries)
        guard entries.count <= maxEntries else { throw ListingError.tooManyEntries(url: url, limit: maxEntries) }
        return entries
    }

    // MARK: HTML (nginx, Apache, lighttpd)

    /// Stops once it has more than `maxEntries` entries (the caller fails the listing then).
    static func parseHTML(_ bytes: [UInt8], base: URL, logger: Logger, maxEntries: Int = .max) -> [ListingEntry] {
        var result: [ListingEntry] = []
        var index: [EntryName: Int] = [:]
        var tooLong = 0, longest = 0
        let resolver = ChildResolver(base: base)
        extractLinks(bytes) { link in
            guard result.count <= maxEntries else { return false }
            let href: String
            switch link.href {
            case let .tooLong(length):
                tooLong += 1
                longest = max(longest, length)
                return true
            case let .text(text): href = text
            }
            guard let resolver, let (name, isDir, url) = resolver.child(href),
                  index[EntryName(name)] != nil || isUsable(name, in: base, logger: logger) else { return true }
            let columns = ColumnScanner.scan(bytes[link.tail])
            let entry = ListingEntry(name: name, isDirectory: isDir, url: url,
                                     size: isDir ? nil : columns.size, modified: columns.date)
            if let i = index[EntryName(name)] {
                // An icon link and a name link to the same child: keep what either one knew.
                if result[i].size == nil { result[i].size = entry.size }
                if result[i].modified == nil { result[i].modified = entry.modified }
            } else {
                index[EntryName(name)] = result.count
                result.append(entry)
            }
            return true
        }
        if tooLong > 0 {
            logger.warning("listing \(DisplayURL.redacted(base.absoluteString)): skipped \(tooLong) link\(tooLong == 1 ? "" : "s") longer than \(maxHrefBytes) bytes (the longest: \(longest) bytes); no file has such a URL")
        }
        return result
    }

    /// The child named by `href`, if it is a direct child of `base` (its name not yet checked:
    /// see `isUsable`).
    static func child(href rawHref: String, base: URL) -> (String, Bool, String)? {
        ChildResolver(base: base)?.child(rawHref)
    }

    /// Resolves hrefs against one folder: the folder's parts are taken apart once per listing,
    /// not once per link.
    struct ChildResolver {
        let base: URL
        let components: URLComponents
        /// The folder's percent-encoded path, ending in `/`.
        let basePath: String
        /// The folder's URL as children's URLs start (`folderPrefix`).
        let prefix: String
        /// `prefix` in its one spelling (`URLSpelling`), if it has one.
        let normalPrefix: String?
        /// A plain relative segment resolves under the folder without Foundation: the folder's
        /// path ends in `/` (else a relative href replaces its last segment).
        let plainSegmentsAreChildren: Bool

        init?(base: URL) {
            guard let bc = URLComponents(url: base, resolvingAgainstBaseURL: false),
                  let prefix = DirectoryListing.folderPrefix(base) else { return nil }
            self.base = base
            components = bc
            basePath = bc.percentEncodedPath.hasSuffix("/") ? bc.percentEncodedPath : bc.percentEncodedPath + "/"
            self.prefix = prefix
            normalPrefix = try? URLSpelling.normalize(prefix)
            plainSegmentsAreChildren = bc.percentEncodedPath.hasSuffix("/")
        }

        func child(_ rawHref: String) -> (String, Bool, String)? {
            guard rawHref.utf8.count <= DirectoryListing.maxHrefBytes else { return nil }
            if plainSegmentsAreChildren, let segment = Self.plainSegment(rawHref) {
                return make(rest: segment.name, isDir: segment.isDir)
            }
            return resolved(rawHref)
        }

        /// `child` through Foundation's URL resolution: every href that is no plain segment.
        func resolved(_ rawHref: String) -> (String, Bool, String)? {
            // Some servers leave spaces unencoded in links; URL(string:) would refuse them.
            let href = DirectoryListing.decodeEntities(rawHref).trimmingCharacters(in: .whitespaces)
                .replacingOccurrences(of: " ", with: "%20")
            if href.isEmpty || href.hasPrefix("?") || href.hasPrefix("#") { return nil }
            let lower = href.lowercased()
            if lower.hasPrefix("javascript:") || lower.hasPrefix("mailto:") || lower.hasPrefix("data:") { return nil }
            guard let resolved = URL(string: href, relativeTo: base)?.absoluteURL,
                  let rc = URLComponents(url: resolved, resolvingAgainstBaseURL: false) else { return nil }
            let bc = components
            guard rc.query == nil,
                  rc.scheme?.lowercased() == bc.scheme?.lowercased(),
                  rc.host?.lowercased() == bc.host?.lowercased(),
                  rc.port == bc.port else { return nil }
            let path = rc.percentEncodedPath
            guard path.hasPrefix(basePath) else { return nil }
            var rest = String(path.dropFirst(basePath.count))
            let isDir = rest.hasSuffix("/")
            if isDir { rest.removeLast() }
            guard !rest.isEmpty, !rest.contains("/") else { return nil }
            return make(rest: rest, isDir: isDir)
        }

        /// The child whose last segment, as the server encoded it, is `rest`.
        private func make(rest: String, isDir: Bool) -> (String, Bool, String) {
            let name = rest.utf8.contains(37) ? rest.removingPercentEncoding ?? rest : rest   // '%'
            // The child's URL is the folder's own with the href's last segment (as the server encoded
            // it): an absolute href's spelling of the host ("MEDIA.example") or its lack of the
            // folder's credentials must not make a second URL, and cache key, for one file.
            // A segment of unreserved characters alone is spelled the same in any spelling: only
            // the folder's part needs normalizing, and that was done once.
            if let normalPrefix, rest != ".", rest != "..", rest.utf8.allSatisfy(Self.isUnreserved) {
                return (name, isDir, normalPrefix + rest + (isDir ? "/" : ""))
            }
            let url = prefix + rest + (isDir ? "/" : "")
            return (name, isDir, (try? URLSpelling.normalize(url)) ?? url)   // one spelling per resource
        }

        /// RFC 3986 unreserved: letters, digits, `-`, `.`, `_`, `~`.
        static func isUnreserved(_ c: UInt8) -> Bool {
            (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c == 45 || c == 46 || c == 95 || c == 126
        }

        /// `rawHref` when it is one path segment that resolves to itself under any folder (with a
        /// trailing `/` for a folder): unreserved characters, sub-delimiters but `&`, `@` and valid
        /// percent escapes; no `:`, which could start a scheme, no entity, space, query or dot
        /// segment. What nginx, Apache and lighttpd write for almost every file; the rest goes
        /// through Foundation's resolution.
        static func plainSegment(_ rawHref: String) -> (name: String, isDir: Bool)? {
            var utf8 = Substring(rawHref).utf8
            let isDir = utf8.last == UInt8(ascii: "/")
            if isDir { utf8 = utf8.dropLast() }
            guard !utf8.isEmpty else { return nil }
            var pendingHex = 0
            for c in utf8 {
                if pendingHex > 0 {
                    guard isHex(c) else { return nil }
                    pendingHex -= 1
                    continue
                }
                switch c {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"):
                    continue
                case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"),
                     UInt8(ascii: "$"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
                     UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: "@"):
                    continue
                case UInt8(ascii: "%"):
                    pendingHex = 2
                default:
                    return nil
                }
            }
            guard pendingHex == 0 else { return nil }
            let segment = String(Substring(utf8))
            if segment == "." || segment == ".." { return nil }
            return (segment, isDir)
        }

        static func isHex(_ c: UInt8) -> Bool {
            (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)
        }
    }

    /// The folder's URL as children's URLs start: no query or fragment, ending in `/`.
    static func folderPrefix(_ base: URL) -> String? {
        guard var c = URLComponents(url: base, resolvingAgainstBaseURL: false) else { return nil }
        c.query = nil
        c.fragment = nil
        if !c.percentEncodedPath.hasSuffix("/") { c.percentEncodedPath += "/" }
        return c.string
    }

    /// Why a listed name cannot be an entry of the mount.
    enum Rejection: Equatable {
        /// Empty, `.`, `..`, or holding `/` or NUL: the parent link and its like, not worth a log line.
        case notAName
        /// A C0 control character or DEL (CR and LF included): legal in a Linux name, but it would
        /// break every `ls`, script and log line that shows it.
        case controlCharacter
        /// A character that reorders the text around it (U+202A–U+202E, U+2066–U+2069, the marks
        /// U+200E, U+200F, U+061C): `‮4pm.exe` would show in `ls` and on the status page as
        /// something it is not ("Trojan Source" names).
        case bidiControl
        /// Longer than `PathName.maxComponentBytes` in UTF-8: the kernel refuses such names.
        case tooLong
    }

    /// Nil when `name` can be an entry of the mount.
    static func rejection(of name: String) -> Rejection? {
        // Bytes, not Characters: every character checked here but the bidi controls is ASCII.
        let utf8 = name.utf8
        if utf8.isEmpty || name == "." || name == ".." || utf8.contains(47) || utf8.contains(0) { return .notAName }
        if utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return .controlCharacter }
        if utf8.contains(where: { $0 >= 0x80 }), name.unicodeScalars.contains(where: isBidiControl) { return .bidiControl }
        if name.utf8.count > PathName.maxComponentBytes { return .tooLong }
        return nil
    }

    static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: return true
        default: return false
        }
    }

    /// True when `name` can be an entry; logs why not when that is news to the user.
    static func isUsable(_ name: String, in base: URL, logger: Logger) -> Bool {
        switch rejection(of: name) {
        case nil: return true
        case .notAName: return false
        case .controlCharacter:
            // debugDescription escapes the control characters, so the log line stays one line.
            logger.debug("listing \(base.absoluteString): skipped \(name.debugDescription): a control character in the name")
            return false
        case .bidiControl:
            logger.warning("listing \(base.absoluteString): skipped \(name.unicodeScalars.map { isBidiControl($0) ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined()): a character that reorders text, which would make the name read as something else")
            return false
        case .tooLong:
            logger.warning("listing \(base.absoluteString): skipped a name of \(name.utf8.count) bytes (longest allowed: \(PathName.maxComponentBytes)): \(String(name.prefix(64)).debugDescription)…")
            return false
        }
    }

    static let pathSegmentAllowed: CharacterSet = {
        var s = CharacterSet.urlPathAllowed
        s.remove(charactersIn: "/;?#%")
        return s
    }()

    /// A link found by `extractLinks`.
    struct Link {
        enum Href: Equatable {
            case text(String)
            /// Longer than `maxHrefBytes`: its length only, no String made of it.
            case tooLong(Int)
        }
        var href: Href
        /// Where the text after `</a>` lies in the page, up to the next link or the end of the
        /// table row, at most `maxTailBytes` of it.
        var tail: Range<Int>
    }

    /// Every `<a ... href=...>...</a>` with the text that follows it, in order, handed to `visit`.
    /// A byte scanner in one pass (every byte is looked at a bounded number of times, whatever
    /// the page holds: no tag, quote or `</a>` missing makes it go back): listings can be large
    /// and hostile, and this needs no HTML grammar beyond tags and quoted attributes.
    /// `visit` returns false to stop the scan.
    static func extractLinks(_ b: [UInt8], _ visit: (Link) -> Bool) {
        var pendingHref: Link.Href?
        var tailStart = 0
        var stopped = false
        var i = 0
        let n = b.count
        func startsTag(_ at: Int, _ name: [UInt8]) -> Bool {
            guard at + 1 + name.count <= n else { return false }
            for (k, ch) in name.enumerated() where lower(b[at + 1 + k]) != ch { return false }
            let after = at + 1 + name.count
            return after == n || b[after] == 62 || isSpace(b[after]) || b[after] == 47
        }
        func finishPending(upTo end: Int) {
            if let href = pendingHref {
                let start = min(tailStart, end)
                stopped = !visit(Link(href: href, tail: start..<min(end, start + maxTailBytes)))
                pendingHref = nil
            }
        }
        while i < n, !stopped {
            // '<' followed by 'a' or '/': any other tag is stepped over at once.
            guard b[i] == 60, i + 1 < n, b[i + 1] == 47 || lower(b[i + 1]) == 97 else { i += 1; continue }
            if startsTag(i, [97]) {  // <a
                finishPending(upTo: i)
                let (href, end) = readTag(b, from: i)
                i = end
                guard let href else { continue }
                // Skip the link text: up to </a>, or to the next <a> when this one is not closed.
                var j = i
                while j < n {
                    if b[j] == 60, j + 3 < n, b[j + 1] == 47, lower(b[j + 2]) == 97, b[j + 3] == 62 { j += 4; break }
                    if b[j] == 60, startsTag(j, [97]) { break }
                    j += 1
                }
                i = min(j, n)
                pendingHref = href
                tailStart = i
            } else if startsTag(i, [47, 116, 114]) || startsTag(i, [47, 112, 114, 101]) || startsTag(i, [47, 117, 108]) {
                finishPending(upTo: i)  // </tr>, </pre>, </ul>
                i += 1
            } else {
                i += 1
            }
        }
        if !stopped { finishPending(upTo: n) }
    }

    /// The first `href` of the tag starting at `start`, and the index after its `>`. Other
    /// attributes are stepped over without a String made of them; an href longer than
    /// `maxHrefBytes` is only measured.
    static func readTag(_ b: [UInt8], from start: Int) -> (Link.Href?, Int) {
        var href: Link.Href?
        var i = start + 1
        let n = b.count
        while i < n, !isSpace(b[i]), b[i] != 62 { i += 1 }  // tag name
        while i < n {
            while i < n, isSpace(b[i]) || b[i] == 47 { i += 1 }
            if i >= n { break }
            if b[i] == 62 { return (href, i + 1) }
            let nameStart = i
            while i < n, b[i] != 61, b[i] != 62, !isSpace(b[i]) { i += 1 }
            let isHref = i - nameStart == 4 && lower(b[nameStart]) == 104 && lower(b[nameStart + 1]) == 114
                && lower(b[nameStart + 2]) == 101 && lower(b[nameStart + 3]) == 102   // "href"
            while i < n, b[i] == 32 || b[i] == 9 { i += 1 }
            var value = i..<i
            if i < n, b[i] == 61 {  // '='
                i += 1
                while i < n, b[i] == 32 || b[i] == 9 { i += 1 }
                if i < n, b[i] == 34 || b[i] == 39 {
                    let q = b[i]
                    let vs = i + 1
                    i = vs
                    while i < n, b[i] != q { i += 1 }
                    value = vs..<min(i, n)
                    i += 1
                } else {
                    let vs = i
                    while i < n, !isSpace(b[i]), b[i] != 62 { i += 1 }
                    value = vs..<i
                }
            }
            if isHref, href == nil {
                href = value.count > maxHrefBytes ? .tooLong(value.count) : .text(String(decoding: b[value], as: UTF8.self))
            }
        }
        return (href, n)
    }

    static func lower(_ c: UInt8) -> UInt8 { (c >= 65 && c <= 90) ? c + 32 : c }

    /// Space, tab, CR or LF.
    static func isSpace(_ c: UInt8) -> Bool { c == 32 || c == 9 || c == 10 || c == 13 }

    static func decodeEntities(_ s: String) -> String {
        guard s.utf8.contains(38) else { return s }   // '&'
        var out = s
        for (entity, char) in [("&quot;", "\""), ("&#39;", "'"), ("&#x27;", "'"), ("&apos;", "'"),
                               ("&lt;", "<"), ("&gt;", ">"), ("&nbsp;", " "), ("&amp;", "&")] {
            out = out.replacingOccurrences(of: entity, with: char)
        }
        return out
    }

    /// RFC 1123 dates as nginx JSON gives them ("Thu, 04 Jan 2024 10:00:00 GMT").
    static func parseHTTPDate(_ s: String) -> Date? {
        HTTPDate.parse(s)
    }
}

/// Finds the date and size columns in the text that follows a listing link.
enum ColumnScanner {
    struct Columns {
        var date: Date?
        var size: Int64?
    }

    /// The columns in `tail`, the bytes after a link (bounded by the caller: `maxTailBytes`).
    static func scan(_ tail: ArraySlice<UInt8>) -> Columns {
        // A date needs a `-` and a `:` (`parseDay`, `parseTime`); without one there is nothing to find.
        guard tail.contains(45), tail.contains(58) else { return Columns(date: nil, size: nil) }
        let tokens = self.tokens(stripTags(tail))
        var i = 0
        while i + 1 < tokens.count {
            if let day = parseDay(tokens[i]), let time = parseTime(tokens[i + 1]) {
                let date = makeDate(day, time)
                let size = i + 2 < tokens.count ? parseExactSize(tokens[i + 2]) : nil
                return Columns(date: date, size: size)
            }
            i += 1
        }
        // No date column (plain lists): a lone exact size may still be there.
        return Columns(date: nil, size: nil)
    }

    static func scan(_ tail: String) -> Columns { scan(Array(tail.utf8)[...]) }

    /// The words of `text`. ASCII text (what listings' columns are) is split on its bytes; other
    /// text on `isWhitespace`, which also knows U+00A0 and its kind. Not a list of characters for
    /// the latter: nginx ends lines with CRLF, which Swift sees as one Character "\r\n" (neither
    /// "\r" nor "\n"), and "1005\r\n" is no size.
    static func tokens(_ text: String) -> [String] {
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return text.split(whereSeparator: \.isWhitespace).map(String.init) }
        return text.utf8.split(whereSeparator: { $0 == 32 || ($0 >= 9 && $0 <= 13) }).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The text of `bytes` without its tags (each tag a space), entities decoded.
    static func stripTags(_ bytes: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var inTag = false
        for c in bytes {
            if c == 60 { inTag = true; out.append(32) } else if c == 62 { inTag = false } else if !inTag { out.append(c) }
        }
        return DirectoryListing.decodeEntities(String(decoding: out, as: UTF8.self))
    }

    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// `04-Jan-2024` (nginx, Apache 2.2), `2024-01-04` (Apache 2.4), `2024-Jan-04` (lighttpd).
    static func parseDay(_ t: String) -> (Int, Int, Int)? {
        let p = t.split(separator: "-").map(String.init)
        guard p.count == 3 else { return nil }
        func month(_ s: String) -> Int? {
            if let i = months.firstIndex(of: s.lowercased()) { return i + 1 }
            if s.count == 2, let m = Int(s), (1...12).contains(m) { return m }
            return nil
        }
        if p[0].count == 4, let y = Int(p[0]), let m = month(p[1]), let d = Int(p[2]), p[2].count == 2 { return (y, m, d) }
        if p[2].count == 4, let y = Int(p[2]), let m = month(p[1]), let d = Int(p[0]), p[0].count <= 2 { return (y, m, d) }
        return nil
    }

    static func parseTime(_ t: String) -> (Int, Int, Int)? {
        let p = t.split(separator: ":").compactMap { Int($0) }
        guard (p.count == 2 || p.count == 3), t.split(separator: ":").count == p.count,
              (0...23).contains(p[0]), (0...59).contains(p[1]) else { return nil }
        return (p[0], p[1], p.count == 3 ? p[2] : 0)
    }

    static let utc: Calendar = {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        return c
    }()

    /// Listings give wall-clock times without a zone; nginx's default is UTC, so UTC it is.
    static func makeDate(_ d: (Int, Int, Int), _ t: (Int, Int, Int)) -> Date? {
        utc.date(from: DateComponents(year: d.0, month: d.1, day: d.2, hour: t.0, minute: t.1, second: t.2))
    }

    /// Plain digits are exact bytes; `1.2K`, `3M`, `-` are not sizes we can use.
    static func parseExactSize(_ t: String) -> Int64? {
        guard !t.isEmpty, t.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int64(t)
    }

}

public enum ListingError: Error, Equatable, CustomStringConvertible {
    case badBaseURL(String)
    case notAListing(url: String)
    /// A PROPFIND answer that is no WebDAV multistatus (see `WebDAVListing`).
    case notMultistatus(url: String, reason: String)
    /// An S3 bucket's answer that is no ListBucketResult (see `S3Listing`).
    case notS3Listing(url: String, reason: String)
    /// More entries than the listing memory budget could hold (`--listing-memory`).
    case tooManyEntries(url: String, limit: Int)
    /// More bytes than a listing may have (`MountOptions.maxListingBytes`).
    case tooLarge(url: String, limit: Int)

    public var description: String {
        switch self {
        case let .badBaseURL(url): return "not a listing URL: \(url)"
        case let .notAListing(url), let .notMultistatus(url, _), let .notS3Listing(url, _),
             let .tooManyEntries(url, _), let .tooLarge(url, _):
            return "\(reason): \(url)"
        }
    }

    /// What went wrong, without the URL (for a line that starts with it).
    public var reason: String {
        switch self {
        case .badBaseURL: return "not a listing URL"
        case .notAListing: return "not a directory listing (neither HTML nor nginx JSON)"
        case let .notMultistatus(_, reason): return "not a WebDAV listing (\(reason))"
        case let .notS3Listing(_, reason): return "not an S3 bucket listing (\(reason))"
        case let .tooManyEntries(_, limit):
            return "a listing of more than \(limit) entries, more than the listing memory budget can hold (each costs at least \(MountOptions.listingEntryCost) bytes; --listing-memory raises it)"
        case let .tooLarge(_, limit):
            return "a listing larger than \(limit >> 20) MiB, the most a listing may be (half of --listing-memory, at least \(ListingFetch.limit >> 20) MiB; --listing-memory raises it)"
        }
    }
}
