import CacheCore
import Foundation

/// The one rule for "is this opened file an HLS playlist?", for the proxy (which rewrites what it
/// finds) and the CLI's `preload` (which preloads it as a stream), so that a preload treats a file
/// exactly as players will see it through the proxy.
///
/// A playlist content type is enough. Otherwise only a file whose type says nothing
/// (absent, `application/octet-stream` and the like) or is text may be one, and only if its name
/// ends in `.m3u8`/`.m3u` or it is small (`sniffLimit`); such a candidate is one when its first
/// bytes are `#EXTM3U` (many servers send playlists as text/plain or octet-stream). Media types
/// are never sniffed, nor large files.
extension HLSPlaylist {
    /// What an entry's metadata says before its bytes are looked at.
    public enum Candidacy: Sendable, Equatable {
        /// The content type names a playlist.
        case byContentType
        /// Maybe: the first bytes decide (`isPlaylist(contentType:firstBytes:)`).
        case byFirstBytes
        /// Not a playlist.
        case no
    }

    /// Small files with a generic or text type are sniffed for `#EXTM3U`; bigger ones are media.
    public static let sniffLimit: Int64 = 1 << 20

    public static func candidacy(contentType: String?, url: String, finalURL: String, length: Int64?) -> Candidacy {
        if isPlaylistContentType(contentType) { return .byContentType }
        guard MediaTypeHints.isGeneric(contentType) || (contentType ?? "").mediaTypeEssence.hasPrefix("text/") else {
            return .no
        }
        // The length first: it needs no parsing of the URLs (asked on every proxy request).
        if let length, length <= sniffLimit { return .byFirstBytes }
        let ext = MediaTypeHints.pathExtension(of: url) ?? MediaTypeHints.pathExtension(of: finalURL)
        if ext == "m3u8" || ext == "m3u" { return .byFirstBytes }
        return .no
    }

    public static func candidacy(of entry: EntryInfo) -> Candidacy {
        candidacy(contentType: entry.contentType, url: entry.url, finalURL: entry.finalURL, length: entry.length)
    }

    /// True when an opened entry is an HLS playlist: by content type, else by its first bytes if
    /// it is a candidate (read through `engine`; already on disk after the open's probe, so a
    /// small media file costs no extra download).
    public static func isPlaylist(engine: CacheEngine, entry: EntryInfo) async throws -> Bool {
        switch candidacy(of: entry) {
        case .byContentType: return true
        case .no: return false
        case .byFirstBytes:
            // A reader that ends there: when the open took no first bytes along (a preload's
            // exact range), the sniff must not read ahead 256 KiB the caller did not ask for.
            let reader = engine.makeReader(for: entry, end: 64)
            defer { reader.close() }
            let first = try await ChunkedRead.read(reader, offset: 0, count: 64)
            return isPlaylist(contentType: entry.contentType, firstBytes: first)
        }
    }
}

/// What a Content-Type or a URL's name says about a file's format, for the playlist rule and the
/// proxy's answers (`Proxy.MediaTypes`).
public enum MediaTypeHints {
    static let generic: Set<String> = ["application/octet-stream", "binary/octet-stream", "application/unknown", ""]

    /// True when `contentType` carries no format information.
    public static func isGeneric(_ contentType: String?) -> Bool {
        guard let ct = contentType else { return true }
        return generic.contains(ct.mediaTypeEssence)
    }

    /// Lower-cased extension of the URL's last path segment, if any. The path is cut out by
    /// hand (after the authority, before a query or fragment), not with `URLComponents`: the
    /// proxy asks this of every request for a file of generic type (two URLs each), and the
    /// parse cost 4% of a warm hit's CPU.
    public static func pathExtension(of url: String) -> String? {
        recentExtensions.value(for: url, extensionOf)
    }

    /// The proxy asks for the same few URLs' extensions over and over.
    private static let recentExtensions = RecentResults<String?>()

    private static func extensionOf(_ url: String) -> String? {
        var path = Substring(url)
        if let end = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<end] }
        if let scheme = path.firstByteRange(of: "://") {
            let authorityOn = path[scheme.upperBound...]
            guard let slash = authorityOn.firstIndex(of: "/") else { return nil }
            path = authorityOn[slash...]
        }
        guard let last = path.split(separator: "/").last, let dot = last.lastIndex(of: "."),
              dot != last.startIndex else { return nil }
        let ext = last[last.index(after: dot)...].lowercased()
        return ext.isEmpty ? nil : ext
    }
}
