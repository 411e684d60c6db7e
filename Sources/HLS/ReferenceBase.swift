import Foundation

/// A playlist's URL as the base its references are resolved against (RFC 3986 §5.2).
///
/// Foundation's `URL(string:relativeTo:)` costs about 30 µs a line here: a VOD playlist of
/// 150,000 segments would take 5 s to rewrite, most of it there. Most references in a large playlist
/// are plain relative paths (`seg_000123.ts`, `720p/seg1.ts`); for those the merge is the base's
/// directory followed by the reference, done here on bytes. Anything else (absolute URLs, `..`,
/// queries, percent escapes, a base with dot segments or without a path) goes to Foundation, so
/// both give the same answer (`ReferenceBaseTests` compares them).
struct ReferenceBase {
    let url: URL?
    /// The base up to and including the last `/` of its path, when references may be merged
    /// onto it directly.
    let directory: String?

    init(_ playlistURL: String) {
        url = URL(string: playlistURL)
        directory = url != nil ? Self.directory(of: playlistURL) : nil
    }

    /// The http(s) URL `reference` names, or nil when it names none (another scheme, or
    /// something that is no URL).
    func resolve(_ reference: String) -> String? {
        if let directory, Self.isPlainRelativePath(reference) { return directory + reference }
        guard let resolved = URL(string: reference, relativeTo: url)?.absoluteURL,
              let scheme = resolved.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return nil }
        return resolved.absoluteString
    }

    /// `http(s)://authority/dir/` of a base whose path has no dot segments and which carries
    /// nothing Foundation might rewrite (only unreserved characters and `/` in the path).
    static func directory(of base: String) -> String? {
        let bytes = Array(base.utf8)
        let prefix: Int
        if bytes.starts(with: Array("http://".utf8)) { prefix = 7 }
        else if bytes.starts(with: Array("https://".utf8)) { prefix = 8 }
        else { return nil }
        guard let pathStart = bytes[prefix...].firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let authority = bytes[prefix..<pathStart]
        guard !authority.isEmpty, authority.allSatisfy({ isUnreserved($0) || $0 == UInt8(ascii: ":") }) else { return nil }
        let pathEnd = bytes[pathStart...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.endIndex
        let path = bytes[pathStart..<pathEnd]
        guard path.allSatisfy({ isUnreserved($0) || $0 == UInt8(ascii: "/") }) else { return nil }
        let segments = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard !segments.contains(where: { $0.elementsEqual([0x2E]) || $0.elementsEqual([0x2E, 0x2E]) }) else { return nil }
        let lastSlash = path.lastIndex(of: UInt8(ascii: "/"))!
        return String(decoding: bytes[..<(lastSlash + 1)], as: UTF8.self)
    }

    /// Path segments of unreserved characters joined by `/`, none empty, `.` or `..`, not
    /// starting with `/`: merged onto a directory, they stay as they are.
    static func isPlainRelativePath(_ reference: String) -> Bool {
        var segmentLength = 0, dotsOnly = true, any = false
        for b in reference.utf8 {
            any = true
            if b == UInt8(ascii: "/") {
                if segmentLength == 0 || (dotsOnly && segmentLength <= 2) { return false }
                segmentLength = 0
                dotsOnly = true
                continue
            }
            guard isUnreserved(b) else { return false }
            segmentLength += 1
            if b != UInt8(ascii: ".") { dotsOnly = false }
        }
        return any && segmentLength > 0 && !(dotsOnly && segmentLength <= 2)
    }

    /// RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~".
    static func isUnreserved(_ b: UInt8) -> Bool {
        (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39)
            || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
    }
}
