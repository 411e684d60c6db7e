import Foundation
import XCTest
import CacheCore
@testable import Proxy

final class ProxyURLTests: XCTestCase {
    func testEndsWithTheOriginalsLastSegmentAndRoundTrips() throws {
        let original = "https://cdn.example.com/media/movie%20one.mp4?sig=a+b&x=1"
        let key = ProxySigningKey.generate()
        let url = ProxyURL.make(original: original, base: "http://127.0.0.1:8718", token: nil, key: key)
        XCTAssertTrue(url.hasPrefix("http://127.0.0.1:8718/s/\(key.signature(for: original))/u/"), url)
        XCTAssertTrue(url.hasSuffix("/movie%20one.mp4"), url)
        XCTAssertFalse(url.dropFirst(7).contains("="), "base64url, no padding: \(url)")
        let path = String(url.dropFirst("http://127.0.0.1:8718".count))
        let target = try ProxyURL.decode(path: path)
        XCTAssertEqual(target, ProxyTarget(url: original, token: nil, signature: key.signature(for: original)))
        XCTAssertTrue(target.isSigned(by: key))
        XCTAssertFalse(target.isSigned(by: .generate()), "another daemon's key")
    }

    /// The table encoder writes what Foundation's base64, made URL-safe and unpadded, writes.
    func testTheEncoderAgreesWithFoundationForEveryLength() {
        var generator = SystemRandomNumberGenerator()
        for n in 0..<70 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let foundation = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            XCTAssertEqual(Base64URL.encode(bytes), foundation)
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)) ?? [], bytes)
        }
    }

    /// The last segment read off the bytes is the one `URLComponents` finds, or Foundation is asked.
    func testThePlainLastSegmentIsFoundationsOne() {
        func foundation(_ url: String) -> String {
            guard let c = URLComponents(string: url) else { return "" }
            let path = c.percentEncodedPath
            guard !path.hasSuffix("/"), let last = path.split(separator: "/").last else { return "" }
            return String(last)
        }
        let urls = [
            "http://h/a/b/seg_001.ts", "https://h:8443/a/list.m3u8?token=x/y#f/g", "http://h", "http://h/", "http://h?x=/a",
            "http://h#a/b", "http://user:pw@h/a/b.ts", "https://h/a//b.ts", "http://h/a/b/", "http://h/a;p=1/b.ts;q",
            "http://h/%20a.ts", "http://[::1]/a.ts", "http://h/a b.ts", "ftp://h/a.ts", "http://h/caf\u{E9}.ts",
            "http://h/a/b.ts?", "http://h/a(1).ts",
        ]
        for url in urls {
            XCTAssertEqual(ProxyURL.lastSegment(of: url), foundation(url), url)
        }
    }

    func testTokenPrefix() throws {
        let key = ProxySigningKey.generate()
        let url = ProxyURL.make(original: "http://a/b.ts", base: "", token: "tok", key: key)
        XCTAssertTrue(url.hasPrefix("/t/tok/s/"), "the token and the signature: \(url)")
        XCTAssertEqual(try ProxyURL.decode(path: url), ProxyTarget(url: "http://a/b.ts", token: "tok", signature: key.signature(for: "http://a/b.ts")))
    }

    func testDirectoryURLsKeepTheirTrailingSlash() throws {
        let url = ProxyURL.make(original: "http://a/dir/", base: "", token: nil, key: nil)
        XCTAssertTrue(url.hasSuffix("/"), url)
        XCTAssertEqual(try ProxyURL.decode(path: url).url, "http://a/dir/")
    }

    func testQueryForm() throws {
        XCTAssertEqual(try ProxyURL.decode(path: "/?url=http%3A%2F%2Fa%2Fv.mp4%3Fk%3D1").url, "http://a/v.mp4?k=1")
        XCTAssertEqual(try ProxyURL.decode(path: "/t/tk/?url=http%3A%2F%2Fa%2Fv.mp4"), ProxyTarget(url: "http://a/v.mp4", token: "tk"))
    }

    func testAcceptsPaddedAndStandardBase64() throws {
        let b64 = Data("http://a/v.mp4".utf8).base64EncodedString()  // "aHR0cDovL2Evdi5tcDQ=": padded
        XCTAssertTrue(b64.hasSuffix("="))
        XCTAssertEqual(try ProxyURL.decode(path: "/u/\(b64)/v.mp4").url, "http://a/v.mp4")
    }

    /// The table decoder agrees with Foundation's on every length and both alphabets, padded or
    /// not, and refuses what Foundation refuses.
    func testBase64URLDecodesAsFoundationDoes() {
        var g = SystemRandomNumberGenerator()
        for count in 0..<70 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &g) }
            let standard = Data(bytes).base64EncodedString()
            let url = Base64URL.encode(bytes)
            XCTAssertEqual(Base64URL.decode(url), count == 0 ? nil : bytes, "base64url of \(count) bytes")
            XCTAssertEqual(Base64URL.decode(standard), count == 0 ? nil : bytes, "padded standard base64 of \(count) bytes")
        }
        for bad in ["", "=", "a", "abcde", "ab=c", "ab c", "ab.c", "a\u{e9}bc", "abc=d", "ab\nc"] {
            XCTAssertNil(Base64URL.decode(bad), bad)
        }
    }

    func testRejectsEverythingButHTTP() {
        for bad in ["ftp://a/b", "file:///etc/passwd", "javascript:alert(1)", "gopher://a/", "//a/b", "http:///nohost",
                    "http://a/b\r\nX-Injected: 1", "http://a/b\nc", "http://a/b\rc", "http://a/b\u{0}c"] {
            let path = "/u/" + Base64URL.encode(Array(bad.utf8)) + "/x"
            XCTAssertThrowsError(try ProxyURL.decode(path: path), bad) { error in
                guard case ProxyURLError.invalid = error else { return XCTFail("\(bad): \(error)") }
            }
        }
        XCTAssertThrowsError(try ProxyURL.decode(path: "/u/!!!/x"))
        XCTAssertThrowsError(try ProxyURL.decode(path: "/?url=file%3A%2F%2F%2Fetc%2Fpasswd"))
    }

    func testNonProxyPaths() {
        for path in ["/", "/index.html", "/u", "/t/tok/x", "/?other=1"] {
            XCTAssertThrowsError(try ProxyURL.decode(path: path), path) { XCTAssertEqual($0 as? ProxyURLError, .notProxyPath, path) }
        }
    }

    /// A reference the rewriter did not see (a DASH segment, a subtitle next to the video) lands
    /// under the proxy URL's directory and means the same thing next to the original.
    func testRelativeReferencesResolveAgainstTheOriginal() throws {
        let base = "/u/" + Base64URL.encode(Array("http://o.test/show/manifest.mpd?sig=1".utf8))
        XCTAssertEqual(try ProxyURL.decode(path: base + "/manifest.mpd").url, "http://o.test/show/manifest.mpd?sig=1")
        XCTAssertEqual(try ProxyURL.decode(path: base + "/video/seg-1.m4s").url, "http://o.test/show/video/seg-1.m4s")
        XCTAssertEqual(try ProxyURL.decode(path: base + "/seg-2.m4s?n=2").url, "http://o.test/show/seg-2.m4s?n=2")
        XCTAssertThrowsError(try ProxyURL.decode(path: base + "/http://evil.test/x"))
    }

    /// A signature covers one resource (issue 46, item 4): a relative reference under a signed
    /// URL resolves (the token may open it), but is not signed; the original itself is.
    func testARelativeReferenceUnderASignedURLIsNotSigned() throws {
        let key = ProxySigningKey.generate()
        let manifest = "http://o.test/show/manifest.mpd"
        let made = ProxyURL.make(original: manifest, base: "", token: nil, key: key)
        let base = String(made.dropLast("manifest.mpd".count))
        let table: [(path: String, url: String, reference: String?)] = [
            (made, manifest, nil),
            (base, manifest, nil),
            (made + "?t=1", manifest, nil),
            (base + "manifest%2Empd", manifest, nil),
            (base + "video/seg-1.m4s", "http://o.test/show/video/seg-1.m4s", "video/seg-1.m4s"),
            (base + "../auth/payroll", "http://o.test/auth/payroll", "../auth/payroll"),
            (base + "/auth/payroll", "http://o.test/auth/payroll", "/auth/payroll"),
            (base + "manifest.mpd/x", "http://o.test/show/manifest.mpd/x", "manifest.mpd/x"),
            (base + "other.mpd?x=1", "http://o.test/show/other.mpd?x=1", "other.mpd?x=1"),
        ]
        for row in table {
            let target = try ProxyURL.decode(path: row.path)
            XCTAssertEqual(target.url, row.url, row.path)
            XCTAssertEqual(target.reference, row.reference, row.path)
            XCTAssertEqual(target.signedURL, manifest, row.path)
            XCTAssertEqual(target.isSigned(by: key), row.reference == nil, "signed: \(row.path)")
            XCTAssertEqual(target.signsOnlyTheOriginal(by: key), row.reference != nil, row.path)
            XCTAssertFalse(target.signsOnlyTheOriginal(by: .generate()), "another daemon's key: \(row.path)")
        }
        XCTAssertThrowsError(try ProxyURL.decode(path: base + "http://evil.test/x"), "another origin")
        XCTAssertThrowsError(try ProxyURL.decode(path: base + "//evil.test/x"), "another origin, scheme-relative")
    }

    /// A signature is for one URL: not for another, not cut short, not another daemon's.
    /// FuzzHLSPlaylist's seed: a reference with a fragment, or spelled otherwise than curl
    /// would, was signed as written while the proxy checks the one spelling it decodes to, so
    /// the proxy refused the URL it had just made.
    func testAURLSpelledOtherwiseOrWithAFragmentIsSignedAsTheProxyChecksIt() throws {
        let key = ProxySigningKey.generate()
        for original in ["http://o.test/vod/seg.ts#t=10", "http://o.test/vod/%00%00%00E#EXT%5B-T",
                         "http://O.TEST:80/a b/c.mp4", "http://o.test/x/../film (1).mkv"] {
            let made = ProxyURL.make(original: original, base: "", token: nil, key: key)
            let target = try ProxyURL.decode(path: made)
            XCTAssertEqual(target.url, try URLSpelling.normalize(original), original)
            XCTAssertTrue(target.isSigned(by: key), "\(original): the proxy refuses the URL it made")
        }
    }

    func testASignatureIsForOneURLOfOneDaemon() throws {
        let key = ProxySigningKey.generate()
        let a = "http://o.test/a.mp4", b = "http://o.test/b.mp4"
        let signedA = ProxyURL.make(original: a, base: "", token: nil, key: key)
        let swapped = signedA.replacingOccurrences(of: Base64URL.encode(Array(a.utf8)), with: Base64URL.encode(Array(b.utf8)))
            .replacingOccurrences(of: "/a.mp4", with: "/b.mp4")
        XCTAssertEqual(try ProxyURL.decode(path: swapped).url, b)
        XCTAssertFalse(try ProxyURL.decode(path: swapped).isSigned(by: key), "a's signature on b")
        let sig = key.signature(for: a)
        XCTAssertEqual(sig.count, 22, "128 bits, base64url")
        for bad in [String(sig.dropLast()), sig + "A", "", String(repeating: "A", count: 22), key.signature(for: a + "?")] {
            XCTAssertFalse(key.verifies(signature: bad, for: a), bad)
        }
        XCTAssertFalse(ProxySigningKey.generate().verifies(signature: sig, for: a))
        let query = "/?url=" + a.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&sig=" + sig
        XCTAssertTrue(try ProxyURL.decode(path: query).isSigned(by: key), "the query form's &sig=")
    }

    /// The key file: made once, owner-only, the same for every reader; a damaged one is replaced.
    func testTheKeyFileIsMadeOnceAndKeptPrivate() throws {
        let dir = NSTemporaryDirectory() + "proxy-key-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertNil(ProxySigningKey.read(cacheDirectory: dir))
        let made = try ProxySigningKey.loadOrCreate(cacheDirectory: dir)
        XCTAssertEqual(try ProxySigningKey.loadOrCreate(cacheDirectory: dir), made, "kept across restarts")
        XCTAssertEqual(ProxySigningKey.read(cacheDirectory: dir), made)
        let path = ProxySigningKey.filePath(cacheDirectory: dir)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int, 0o600)
        try Data("short\n".utf8).write(to: URL(fileURLWithPath: path))
        let replaced = try ProxySigningKey.loadOrCreate(cacheDirectory: dir)
        XCTAssertNotEqual(replaced, made)
        XCTAssertEqual(ProxySigningKey.read(cacheDirectory: dir), replaced)
    }
}

final class HostPatternTests: XCTestCase {
    func testGlobs() {
        let cases: [(String, String, Int?, Bool)] = [
            ("*.example.com", "cdn.example.com", 443, true),
            ("*.example.com", "a.b.example.com", 80, true),
            ("*.example.com", "example.com", 80, false),
            ("*.example.com", "example.com.evil.test", 80, false),
            ("example.com", "EXAMPLE.com", 80, true),
            ("media?.local", "media1.local", 80, true),
            ("media?.local", "media12.local", 80, false),
            ("media.local:8080", "media.local", 8080, true),
            ("media.local:8080", "media.local", 80, false),
            ("*", "anything.test", 1, true),
        ]
        for (pattern, host, port, expected) in cases {
            XCTAssertEqual(HostPattern(pattern).matches(host: host, port: port), expected, "\(pattern) vs \(host):\(port ?? 0)")
        }
    }
}

final class MediaTypesTests: XCTestCase {
    func testOriginTypeWinsUnlessGeneric() {
        XCTAssertEqual(MediaTypes.contentType(origin: "video/webm", url: "http://a/x.mp4"), "video/webm")
        XCTAssertEqual(MediaTypes.contentType(origin: "application/octet-stream", url: "http://a/x.mp4"), "video/mp4")
        XCTAssertEqual(MediaTypes.contentType(origin: nil, url: "http://a/x.MKV?y=1"), "video/x-matroska")
        XCTAssertEqual(MediaTypes.contentType(origin: nil, url: "http://a/list.m3u8"), "application/vnd.apple.mpegurl")
        XCTAssertEqual(MediaTypes.contentType(origin: "binary/octet-stream", url: "http://a/sub.vtt"), "text/vtt")
        XCTAssertEqual(MediaTypes.contentType(origin: nil, url: "http://a/noext"), "application/octet-stream")
        // nginx's default type for names its table lacks: no player takes it for media.
        XCTAssertEqual(MediaTypes.contentType(origin: "text/plain", url: "http://a/film.mkv"), "video/x-matroska")
        XCTAssertEqual(MediaTypes.contentType(origin: "text/plain; charset=utf-8", url: "http://a/seg.m4s"), "video/iso.segment")
        XCTAssertEqual(MediaTypes.contentType(origin: "text/plain", url: "http://a/notes.txt"), "text/plain", "not a known media name")
        XCTAssertEqual(MediaTypes.contentType(origin: "text/html", url: "http://a/film.mkv"), "text/html", "a specific type stays")
        for ext in ["mp4", "m4v", "mkv", "webm", "mov", "mp3", "m4a", "aac", "flac", "ts", "m3u8", "mpd", "vtt", "srt"] {
            XCTAssertNotEqual(MediaTypes.contentType(origin: nil, url: "http://a/f.\(ext)"), "application/octet-stream", ext)
        }
    }
}
