import CacheCore
import FuzzSupport
@testable import HLS
import Proxy

/// HLS playlists from an origin: parsed for the preloader and the live refresh, and rewritten so
/// every reference goes through the proxy. Invariants: the rewrite keeps the line count and every
/// header or tag line stays a tag line; the rewritten playlist parses again to the same variants
/// and resources, each now a proxy URL that decodes to the original reference.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHLSPlaylist(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let playlistURL = input.bool() ? "http://origin.example/vod/master.m3u8?token=a" : "https://cdn.example:8443/live/"
    let bytes = input.rest
    _ = HLSPlaylist.isPlaylist(contentType: nil, firstBytes: Array(bytes.prefix(64)))
    let text = String(decoding: bytes, as: UTF8.self)
    let info = HLSPlaylistInfo(parsing: text, playlistURL: playlistURL)

    let rewritten = HLSPlaylist.rewrite(text, playlistURL: playlistURL) {
        ProxyURL.make(original: $0, base: "", token: nil, key: key)
    }
    let before = HLSPlaylist.lines(text), after = HLSPlaylist.lines(rewritten)
    fuzzCheck(before.count == after.count, "rewrite changed \(before.count) lines into \(after.count)")
    for (i, (old, new)) in zip(before, after).enumerated() where isTagLine(old, first: i == 0) {
        fuzzCheck(isTagLine(new, first: i == 0), "rewrite turned the tag line \(old.debugDescription) into \(new.debugDescription)")
    }

    let proxyBase = "http://127.0.0.1:8718"
    let again = HLSPlaylistInfo(parsing: rewritten, playlistURL: proxyBase + "/u/eA/master.m3u8")
    fuzzCheck(again.variants.count == info.variants.count,
              "\(info.variants.count) variants became \(again.variants.count) after the rewrite")
    // A proxy URL names the one spelling of its original (`URLSpelling`: no fragment, escaped
    // as curl does), which is what the origin is asked for either way; the parser lists each
    // resource once, so references that differ only in spelling or fragment become one.
    func spelled(_ url: String) -> String { (try? URLSpelling.normalize(url)) ?? url }
    var seen = Set<String>()
    let resources = info.resources.map(spelled).filter { seen.insert($0).inserted }
    fuzzCheck(again.resources.count == resources.count,
              "\(resources.count) resources (one spelling each) became \(again.resources.count) after the rewrite")
    for (original, proxied) in zip(resources + info.variants.map { spelled($0.url) },
                                   again.resources + again.variants.map(\.url)) {
        fuzzCheck(proxied.hasPrefix(proxyBase + "/s/"), "\(original) was not rewritten to a signed URL: \(proxied)")
        if let decoded = try? ProxyURL.decode(path: String(proxied.dropFirst(proxyBase.count))) {
            fuzzCheck(decoded.url == original, "\(original) was rewritten to \(proxied), which names \(decoded.url)")
            fuzzCheck(decoded.isSigned(by: key), "\(original) was rewritten to \(proxied), which this proxy would refuse")
        }
    }
    return 0
}

let key = ProxySigningKey(bytes: [UInt8](repeating: 0x42, count: 32))!

/// A line the player reads as a tag or comment (blanks, then `#`; the first line may start with a
/// byte order mark).
func isTagLine(_ line: String, first: Bool) -> Bool {
    var s = Substring(line)
    if first, s.hasPrefix("\u{FEFF}") { s = s.dropFirst() }
    return s.trimmingOWS().hasPrefix("#")
}
