import CacheCore
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Logging

/// WebDAV folder listings: the `PROPFIND` (Depth: 1) request that asks for one, and the parser of
/// its `207 Multi-Status` answer (RFC 4918 section 9.1), for origins that list folders on no GET
/// (nginx with dav_ext and autoindex off, WebDAV media servers).
///
/// The answer is outside input, parsed with the platform's XML parser (libxml2 through
/// FoundationXML), namespace-aware: elements count by their namespace (`DAV:`) and local name,
/// whatever prefix the server chose. Hostile input is bounded: the caller's size limit applies
/// before parsing, a document with a DTD (`<!DOCTYPE`, where entities are declared) is refused
/// outright, so no entity is ever expanded, and external entities are off as well. Each
/// `<response>` is an entry when its `href` names a direct child of the folder (the folder itself,
/// other folders, other hosts and queries are ignored, as in `DirectoryListing.child`); it is a
/// folder when its `resourcetype` holds `collection` (or its href ends in `/`). Sizes
/// (`getcontentlength`) and dates (`getlastmodified`) are taken only from a `propstat` whose status
/// is 200: a server answers 404 for properties it lacks.
public enum WebDAVListing {
    /// The body of the PROPFIND: just the properties a listing needs.
    public static let propfindBody = Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <propfind xmlns="DAV:"><prop><resourcetype/><getcontentlength/><getlastmodified/></prop></propfind>
        """.utf8)

    /// The PROPFIND for the folder at `url`.
    public static func request(url: String) -> FetchRequest {
        var request = FetchRequest(url: url)
        request.method = "PROPFIND"
        request.headers = ["Depth: 1", "Content-Type: application/xml; charset=utf-8"]
        request.body = propfindBody
        return request
    }

    /// `maxEntries`: an answer with more fails with `tooManyEntries` as soon as they are read.
    public static func parse(_ bytes: [UInt8], url: String,
                             logger: Logger = Logger(label: "httpcachefs.listing"),
                             maxEntries: Int = .max) throws -> [ListingEntry] {
        guard let base = URL(string: url) else { throw ListingError.badBaseURL(url) }
        if containsDTD(bytes) { throw ListingError.notMultistatus(url: url, reason: "a document type declaration (refused: no entities)") }
        if let why = unsafeForParser(bytes) { throw ListingError.notMultistatus(url: url, reason: why) }
        let delegate = MultistatusReader()
        // The folder's own response comes on top of its entries.
        delegate.maxResponses = maxEntries == .max ? .max : maxEntries + 1
        let parser = XMLParser(data: Data(bytes))
        parser.shouldProcessNamespaces = true
        parser.shouldReportNamespacePrefixes = false
        parser.shouldResolveExternalEntities = false
        parser.delegate = delegate
        // A document cut short can still parse without an error: it must have closed its root.
        let parsed = parser.parse()
        if delegate.tooMany { throw ListingError.tooManyEntries(url: url, limit: maxEntries) }
        guard parsed, delegate.closedMultistatus else {
            let why = parser.parserError.map { "\($0.localizedDescription)" } ?? "no DAV: multistatus element"
            throw ListingError.notMultistatus(url: url, reason: why)
        }
        var result: [ListingEntry] = []
        var seen = Set<EntryName>()
        // Children's URLs are made from the folder's own (not the href's spelling of its host or
        // its encoding), so one file has one URL, and cache key, however the server writes it.
        let prefix = url.hasSuffix("/") ? url : url + "/"
        guard let resolver = DirectoryListing.ChildResolver(base: base) else { throw ListingError.badBaseURL(url) }
        for response in delegate.responses {
            // An href longer than any URL is skipped before it is encoded or resolved.
            guard let href = response.href, href.utf8.count <= DirectoryListing.maxHrefBytes,
                  let (name, slashed, _) = resolver.child(encodedHref(href)) else { continue }
            guard !seen.contains(EntryName(name)), DirectoryListing.isUsable(name, in: base, logger: logger) else { continue }
            seen.insert(EntryName(name))
            let isDir = response.isCollection || slashed
            let encoded = name.addingPercentEncoding(withAllowedCharacters: DirectoryListing.pathSegmentAllowed) ?? name
            let url = prefix + encoded + (isDir ? "/" : "")
            result.append(ListingEntry(name: name, isDirectory: isDir, url: (try? URLSpelling.normalize(url)) ?? url,
                                       size: isDir ? nil : response.length, modified: response.modified))
        }
        return result
    }

    /// Why `bytes` must not reach `XMLParser`, or nil. FoundationXML ends the process on some
    /// input libxml2 hands it (found by fuzzing: bytes that are no UTF-8 in an element name, a
    /// processing instruction without data), so only what a multistatus is made of gets through:
    /// valid UTF-8, no declared encoding but UTF-8, no control characters but tab, CR and LF, and
    /// no `<?` or `<!` construct but the leading XML declaration.
    static func unsafeForParser(_ bytes: [UInt8]) -> String? {
        guard String(validating: bytes, as: UTF8.self) != nil else { return "not UTF-8" }
        if bytes.contains(where: { $0 < 0x20 && $0 != 9 && $0 != 10 && $0 != 13 }) { return "a control character" }
        // Processing instructions (FoundationXML reads one without data through a null pointer),
        // comments, CDATA and declarations: a multistatus needs none, only its XML declaration.
        let start = bytes.firstIndex(where: { $0 != 32 && $0 != 9 && $0 != 10 && $0 != 13 }) ?? 0
        let declaration = Array("<?xml ".utf8)
        for i in bytes.indices.dropLast() where bytes[i] == 60 && (bytes[i + 1] == 63 || bytes[i + 1] == 33) {
            if i == start, bytes[i...].starts(with: declaration) { continue }
            return bytes[i + 1] == 63 ? "a processing instruction" : "a comment, CDATA or declaration"
        }
        // `<?xml ... encoding="X"?>`: only UTF-8 (what the bytes were checked as).
        let head = String(decoding: bytes.prefix(256), as: UTF8.self).lowercased()
        if let decl = head.range(of: "encoding="), head.hasPrefix("<?xml") || head.drop(while: { $0.isWhitespace }).hasPrefix("<?xml") {
            let value = head[decl.upperBound...].dropFirst().prefix(while: { $0 != "\"" && $0 != "'" })
            if value != "utf-8" && value != "utf8" { return "an encoding other than UTF-8 (\(value))" }
        }
        return nil
    }

    /// True when the document declares a DTD (before its first element is all that matters, but
    /// anywhere is refused: a multistatus never needs one).
    static func containsDTD(_ bytes: [UInt8]) -> Bool {
        let marker = Array("<!DOCTYPE".utf8)
        guard bytes.count >= marker.count else { return false }
        func lower(_ c: UInt8) -> UInt8 { (c >= 65 && c <= 90) ? c + 32 : c }
        let lowered = marker.map(lower)
        outer: for i in 0...(bytes.count - marker.count) where bytes[i] == 60 {
            for k in 1..<marker.count where lower(bytes[i + k]) != lowered[k] { continue outer }
            return true
        }
        return false
    }

    /// Servers differ in how much of an href they percent-encode: every byte a URL may not hold as
    /// it is (a space, non-ASCII, a quote) is encoded here, and what is encoded stays so.
    static func encodedHref(_ href: String) -> String {
        let trimmed = href.trimmingCharacters(in: .whitespacesAndNewlines)
        var out = ""
        out.reserveCapacity(trimmed.utf8.count)
        for b in trimmed.utf8 {
            if b < 0x80, hrefAllowed.contains(b) {
                out.unicodeScalars.append(UnicodeScalar(b))
            } else {
                out += String(format: "%%%02X", b)
            }
        }
        return out
    }

    /// RFC 3986 unreserved and reserved characters, and `%` (what is encoded already).
    static let hrefAllowed: Set<UInt8> = Set(Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%".utf8))
}

/// The `XMLParser` delegate: collects each `response` of a `multistatus`.
final class MultistatusReader: NSObject, XMLParserDelegate {
    struct Response {
        var href: String?
        var isCollection = false
        var length: Int64?
        var modified: Date?
    }

    /// One propstat's findings, kept only if its status says 200.
    private struct PropStat {
        var status: Int?
        var isCollection = false
        var length: Int64?
        var modified: Date?
    }

    private(set) var responses: [Response] = []
    private(set) var closedMultistatus = false
    /// More responses than this stop the parse (`tooMany`).
    var maxResponses = Int.max
    private(set) var tooMany = false
    /// Local names of the open DAV: elements (nil for elements of other namespaces).
    private var path: [String?] = []
    private var response: Response?
    private var propstat: PropStat?
    private var text = ""
    /// Text is collected only inside these elements, and only so much of it.
    private static let textElements: Set<String> = ["href", "status", "getcontentlength", "getlastmodified"]
    private static let maxText = 8192

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]) {
        let local = namespaceURI == "DAV:" ? name : nil
        path.append(local)
        text = ""
        switch local {
        case "response" where path.dropLast().last == "multistatus": response = Response()
        case "propstat" where response != nil: propstat = PropStat()
        case "collection" where propstat != nil && path.dropLast().last == "resourcetype": propstat?.isCollection = true
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard let local = path.last ?? nil, Self.textElements.contains(local), text.utf8.count < Self.maxText else { return }
        text += string
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        let local = path.popLast() ?? nil
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        text = ""
        switch local {
        case "multistatus" where path.isEmpty: closedMultistatus = true
        case "href" where propstat == nil && response != nil && response?.href == nil:
            response?.href = value
        case "status" where propstat != nil:
            // "HTTP/1.1 200 OK": the code is the second word.
            let words = value.split(separator: " ")
            propstat?.status = words.count >= 2 ? Int(words[1]) : nil
        case "getcontentlength" where propstat != nil:
            if !value.isEmpty, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) { propstat?.length = Int64(value) }
        case "getlastmodified" where propstat != nil:
            propstat?.modified = HTTPDate.parse(value)
        case "propstat":
            if let p = propstat, p.status == 200, response != nil {
                if p.isCollection { response?.isCollection = true }
                if let l = p.length { response?.length = l }
                if let m = p.modified { response?.modified = m }
            }
            propstat = nil
        case "response":
            if let r = response { responses.append(r) }
            response = nil
            if responses.count > maxResponses {
                tooMany = true
                parser.abortParsing()
            }
        default: break
        }
    }
}
