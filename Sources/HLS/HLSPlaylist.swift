import CacheCore
import Foundation

/// HLS playlists (RFC 8216 and its draft successor): recognition, parsing, and the rewrite that
/// sends every URI the player will fetch back through the proxy.
///
/// Every line the parser does not understand is passed through untouched: a malformed or
/// unusual playlist must still play as well as it would without the proxy. Only references that
/// resolve to http(s) are rewritten; `skd://`, `data:` and the like are left alone.
public enum HLSPlaylist {
    /// Content types that name an HLS playlist (compared on the lower-cased essence).
    public static let contentTypes: Set<String> = [
        "application/vnd.apple.mpegurl", "application/x-mpegurl", "application/mpegurl",
        "audio/mpegurl", "audio/x-mpegurl",
    ]

    /// Tags whose `URI="..."` attribute names a resource the player fetches.
    static let uriTags: Set<String> = [
        "EXT-X-KEY", "EXT-X-SESSION-KEY", "EXT-X-MAP", "EXT-X-MEDIA", "EXT-X-I-FRAME-STREAM-INF",
        "EXT-X-PART", "EXT-X-PRELOAD-HINT", "EXT-X-RENDITION-REPORT", "EXT-X-SESSION-DATA",
    ]

    /// True for an HLS content type, or a body that starts with `#EXTM3U` (after an optional
    /// UTF-8 byte order mark and whitespace).
    public static func isPlaylist(contentType: String?, firstBytes: [UInt8]) -> Bool {
        if let ct = contentType, contentTypes.contains(ct.mediaTypeEssence) { return true }
        return startsWithEXTM3U(firstBytes)
    }

    /// True when the content type alone says "playlist".
    public static func isPlaylistContentType(_ contentType: String?) -> Bool {
        contentType.map { contentTypes.contains($0.mediaTypeEssence) } ?? false
    }

    static func startsWithEXTM3U(_ bytes: [UInt8]) -> Bool {
        var i = 0
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0D || bytes[i] == 0x0A { i += 1 }
        return bytes[i...].starts(with: Array("#EXTM3U".utf8))
    }

    /// Rewrites every URI line and every `URI="..."` attribute of the tags that name fetchable
    /// resources. References are resolved against `playlistURL` (the playlist's final URL after
    /// redirects) and handed to `transform`, whose result replaces them.
    ///
    /// A byte order mark before `#EXTM3U` is kept, and the line stays the header it is.
    public static func rewrite(_ text: String, playlistURL: String, transform: (String) -> String) -> String {
        let base = ReferenceBase(playlistURL)
        var out = ""
        out.reserveCapacity(text.utf8.count + text.utf8.count / 2)
        let (bom, body) = splitByteOrderMark(text)
        out += bom
        for (i, rawLine) in lines(body).enumerated() {
            if i > 0 { out += "\n" }
            var line = Substring(rawLine)
            var cr = ""
            if line.hasSuffix("\r") { line = line.dropLast(); cr = "\r" }
            out += rewriteLine(line, base: base, transform: transform) + cr
        }
        return out
    }

    /// A leading UTF-8 byte order mark (some Windows tools write one) and the text after it.
    static func splitByteOrderMark(_ text: String) -> (String, Substring) {
        text.hasPrefix("\u{FEFF}") ? ("\u{FEFF}", text.dropFirst()) : ("", Substring(text))
    }

    /// Splits on LF bytes, keeping a CR at the end of its line. (String's own splitting sees
    /// "\r\n" as one Character and would never split a CRLF playlist at all.) Only LF ends a
    /// line (RFC 8216 section 4.1: LF or CRLF), for the parser as for the rewrite: a lone CR or a
    /// Unicode line separator is part of a line, as players read it.
    static func lines<S: StringProtocol>(_ text: S) -> [String] {
        let bytes = Array(text.utf8)
        var result: [String] = []
        var start = 0
        for (i, b) in bytes.enumerated() where b == 0x0A {
            result.append(String(decoding: bytes[start..<i], as: UTF8.self))
            start = i + 1
        }
        result.append(String(decoding: bytes[start...], as: UTF8.self))
        return result
    }

    private static func rewriteLine(_ line: Substring, base: ReferenceBase, transform: (String) -> String) -> String {
        let trimmed = line.trimmingOWS()
        if trimmed.isEmpty { return String(line) }
        if trimmed.hasPrefix("#") {
            guard let (tag, attributes) = splitTag(trimmed), uriTags.contains(tag) else { return String(line) }
            guard let rewritten = rewriteURIAttribute(attributes, base: base, transform: transform) else {
                return String(line)
            }
            return "#\(tag):\(rewritten)"
        }
        guard let absolute = base.resolve(String(trimmed)) else { return String(line) }
        return transform(absolute)
    }

    /// `#TAG:attributes` → (TAG, attributes); nil for tags without attributes.
    static func splitTag(_ line: Substring) -> (String, Substring)? {
        guard line.hasPrefix("#"), let colon = line.firstIndex(of: ":") else { return nil }
        return (String(line[line.index(after: line.startIndex)..<colon]), line[line.index(after: colon)...])
    }

    /// Replaces the value of the `URI` attribute, if there is one and it resolves to http(s).
    private static func rewriteURIAttribute(_ attributes: Substring, base: ReferenceBase, transform: (String) -> String) -> String? {
        var result = ""
        var changed = false
        for attr in attributeList(attributes) {
            if !result.isEmpty { result += "," }
            if attr.name == "URI", let value = attr.uriValue, let absolute = base.resolve(value) {
                result += "URI=\"\(transform(absolute))\""
                changed = true
            } else {
                result += attr.raw
            }
        }
        return changed ? result : nil
    }

    struct Attribute {
        /// The attribute exactly as written (`NAME=VALUE`).
        var raw: String
        var name: String
        /// The value without its quotes, when it is a quoted string.
        var quotedValue: String?
        /// The value as written (quotes included).
        var value: String

        /// The value as a URI reference: quoted, as RFC 8216 writes it, or bare, as some
        /// packagers write it and players accept; nil when empty or with unbalanced quotes.
        /// The rewrite and the parser both read URIs through this, so what the preloader fetches
        /// is what the player is sent to.
        var uriValue: String? {
            if let quotedValue { return quotedValue }
            return value.isEmpty || value.contains("\"") ? nil : value
        }
    }

    /// Splits an attribute list on commas outside quoted strings.
    static func attributeList(_ s: Substring) -> [Attribute] {
        var items: [Substring] = []
        var start = s.startIndex
        var inQuotes = false
        var i = s.startIndex
        while i < s.endIndex {
            let c = s[i]
            if c == "\"" { inQuotes.toggle() }
            if c == "," && !inQuotes {
                items.append(s[start..<i])
                start = s.index(after: i)
            }
            i = s.index(after: i)
        }
        items.append(s[start..<s.endIndex])
        return items.map { item in
            guard let eq = item.firstIndex(of: "=") else {
                return Attribute(raw: String(item), name: String(item.trimmingOWS()), quotedValue: nil, value: "")
            }
            let name = String(item[..<eq].trimmingOWS())
            let value = String(item[item.index(after: eq)...].trimmingOWS())
            var quoted: String?
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                quoted = String(value.dropFirst().dropLast())
            }
            return Attribute(raw: String(item), name: name, quotedValue: quoted, value: value)
        }
    }

    /// Resolves a reference (relative, root-relative or absolute) against the playlist URL;
    /// nil unless the result is http(s).

    /// The `URI` attribute's reference (the last one, as in `attributes`).
    static func uri(_ s: Substring) -> String? {
        attributeList(s).last { $0.name == "URI" }?.uriValue
    }

    /// Attribute values by name, for tags the parser reads.
    static func attributes(_ s: Substring) -> [String: String] {
        var d: [String: String] = [:]
        for a in attributeList(s) { d[a.name] = a.quotedValue ?? a.value }
        return d
    }
}

/// The parts of a playlist the proxy and the preloader act on.
public struct HLSPlaylistInfo: Sendable, Equatable {
    public struct Variant: Sendable, Equatable {
        public var url: String
        public var bandwidth: Int?
        public var audioGroup: String?
        public var videoGroup: String?
        public var subtitlesGroup: String?
    }

    public struct Rendition: Sendable, Equatable {
        public var url: String
        public var type: String
        public var groupID: String
    }

    /// Variant streams (`EXT-X-STREAM-INF` + the URI line after it): non-empty for a master playlist.
    public var variants: [Variant] = []
    /// `EXT-X-MEDIA` renditions that have their own playlist.
    public var renditions: [Rendition] = []
    /// Media segments, init sections (`EXT-X-MAP`) and keys (`EXT-X-KEY`) in playlist order,
    /// each URL once.
    public var resources: [String] = []
    /// `EXT-X-ENDLIST` seen: the playlist will not change (VOD or a finished event).
    public var hasEndList = false
    /// `EXT-X-PLAYLIST-TYPE:VOD`.
    public var isVOD = false
    /// `EXT-X-TARGETDURATION` in seconds.
    public var targetDuration: Double?

    public var isMaster: Bool { !variants.isEmpty }

    /// The same playlist with every reference passed through `transform` (a preload through the
    /// daemon's proxy turns the proxy's URLs back into the originals).
    public func mapURLs(_ transform: (String) -> String) -> HLSPlaylistInfo {
        var copy = self
        for i in copy.variants.indices { copy.variants[i].url = transform(copy.variants[i].url) }
        for i in copy.renditions.indices { copy.renditions[i].url = transform(copy.renditions[i].url) }
        copy.resources = copy.resources.map(transform)
        return copy
    }

    /// A live playlist changes under the player: its cached copy must be refreshed at least
    /// every half target duration (RFC 8216 6.3.4).
    public var isLive: Bool { !isMaster && !hasEndList && !isVOD }

    public init() {}

    /// Parses what matters; unknown lines are skipped, never fatal. URLs are made absolute
    /// against `playlistURL` (the final URL after redirects). Lines are split and a byte order
    /// mark is skipped exactly as `HLSPlaylist.rewrite` does, so both see the same references.
    public init(parsing text: String, playlistURL: String) {
        let base = ReferenceBase(playlistURL)
        var pendingVariant: [String: String]?
        var seen = Set<String>()
        func addResource(_ url: String) {
            if seen.insert(url).inserted { resources.append(url) }
        }
        for raw in HLSPlaylist.lines(HLSPlaylist.splitByteOrderMark(text).1) {
            var line = Substring(raw)
            if line.hasSuffix("\r") { line = line.dropLast() }
            line = line.trimmingOWS()
            if line.isEmpty { continue }
            if line.hasPrefix("#") {
                if line == "#EXT-X-ENDLIST" { hasEndList = true; continue }
                guard let (tag, attrText) = HLSPlaylist.splitTag(line) else { continue }
                switch tag {
                case "EXT-X-TARGETDURATION":
                    targetDuration = Double(attrText.trimmingOWS())
                case "EXT-X-PLAYLIST-TYPE":
                    isVOD = attrText.trimmingOWS() == "VOD"
                case "EXT-X-STREAM-INF":
                    pendingVariant = HLSPlaylist.attributes(attrText)
                case "EXT-X-MEDIA":
                    let a = HLSPlaylist.attributes(attrText)
                    if let uri = HLSPlaylist.uri(attrText), let url = base.resolve(uri) {
                        renditions.append(Rendition(url: url, type: a["TYPE"] ?? "", groupID: a["GROUP-ID"] ?? ""))
                    }
                case "EXT-X-KEY", "EXT-X-MAP":
                    if let uri = HLSPlaylist.uri(attrText), let url = base.resolve(uri) { addResource(url) }
                default:
                    continue
                }
                continue
            }
            guard let url = base.resolve(String(line)) else { continue }
            if let attrs = pendingVariant {
                variants.append(Variant(url: url, bandwidth: attrs["BANDWIDTH"].flatMap { Int($0) },
                                        audioGroup: attrs["AUDIO"], videoGroup: attrs["VIDEO"],
                                        subtitlesGroup: attrs["SUBTITLES"]))
                pendingVariant = nil
            } else {
                addResource(url)
            }
        }
    }
}
