import CacheCore
import Foundation
import HLS

/// Content-Type for the proxy's answers.
///
/// The origin's type is passed through unless it says nothing useful (absent, or a generic
/// `application/octet-stream`): many origins (object stores, plain file servers) answer that for
/// everything, and browsers refuse to play `<video>` without a media type, while the extension
/// (kept at the end of every proxy URL for exactly this reason) names the format. `text/plain`
/// is replaced too for the extensions below: nginx's default type for a name its table does not
/// know (`.mkv`, `.m4s`), which no player takes for media.
public enum MediaTypes {
    static let byExtension: [String: String] = [
        "mp4": "video/mp4", "m4v": "video/mp4", "m4s": "video/iso.segment", "mkv": "video/x-matroska",
        "webm": "video/webm", "mov": "video/quicktime", "avi": "video/x-msvideo", "wmv": "video/x-ms-wmv",
        "flv": "video/x-flv", "mpg": "video/mpeg", "mpeg": "video/mpeg", "ogv": "video/ogg",
        "ts": "video/mp2t", "m2ts": "video/mp2t", "mts": "video/mp2t", "3gp": "video/3gpp",
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "flac": "audio/flac",
        "ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/opus", "wav": "audio/wav", "ac3": "audio/ac3",
        "m3u8": "application/vnd.apple.mpegurl", "m3u": "audio/mpegurl", "mpd": "application/dash+xml",
        "vtt": "text/vtt", "srt": "application/x-subrip", "ass": "text/x-ssa", "ssa": "text/x-ssa",
        "ttml": "application/ttml+xml", "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png",
        "key": "application/octet-stream",
    ]

    /// True when `contentType` carries no format information.
    public static func isGeneric(_ contentType: String?) -> Bool { MediaTypeHints.isGeneric(contentType) }

    /// The type to send: the origin's if it is specific, else one from the URL's extension,
    /// else `application/octet-stream`.
    public static func contentType(origin: String?, url: String) -> String {
        // A type that cannot be sent (a control character in it) says nothing either.
        let origin = origin.flatMap { $0.isSendableFieldValue ? $0 : nil }
        if let origin, !isGeneric(origin), !(isPlainText(origin) && knowsExtension(of: url)) { return origin }
        if let ext = pathExtension(of: url), let t = byExtension[ext] { return t }
        return origin.flatMap { $0.isEmpty ? nil : $0 } ?? "application/octet-stream"
    }

    private static func isPlainText(_ contentType: String) -> Bool { contentType.mediaTypeEssence == "text/plain" }

    private static func knowsExtension(of url: String) -> Bool { pathExtension(of: url).map { byExtension[$0] != nil } ?? false }

    /// Lower-cased extension of the URL's last path segment, if any.
    public static func pathExtension(of url: String) -> String? { MediaTypeHints.pathExtension(of: url) }
}
