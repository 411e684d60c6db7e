import CacheCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's secret that proxy URLs are signed with: proof that its owner made a URL.
///
/// Without it, any web page open in a browser on this machine (a plain `<img src>` pointing at
/// 127.0.0.1:8718) or any other local user could make the daemon fetch a URL of their choosing,
/// with whatever credentials and network position the daemon has. A proxy URL therefore carries
/// `sig`, an HMAC-SHA-256 of the original URL under this key, truncated to 128 bits (as
/// RFC 4868's HMAC-SHA-256-128) and base64url-encoded: 22 characters. Only the owner can compute
/// it: the key lives in `<cache dir>/proxy-key` (mode 0600), which `httpcachefs url` and the other
/// commands read, and in the daemon's memory.
///
/// Why a file and not a fresh key per start: proxy URLs go into players' bookmarks and `.m3u`
/// files, and the port is fixed so they keep working across restarts; a key made at each start
/// would break every one of them. Deleting the file (then restarting the daemon) revokes every
/// URL handed out.
public struct ProxySigningKey: Sendable, Equatable {
    /// The key file's name inside the cache directory.
    public static let fileName = "proxy-key"
    static let byteCount = 32
    /// Bytes of the MAC kept in the URL.
    static let macBytes = 16

    let key: [UInt8]
    private let hmac: HMACSHA256

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        key = bytes
        hmac = HMACSHA256(key: bytes)
    }

    public static func == (a: ProxySigningKey, b: ProxySigningKey) -> Bool { HMACSHA256.equal(a.key, b.key) }

    /// A fresh key: 32 bytes from the system's random number generator (getrandom).
    public static func generate() -> ProxySigningKey {
        var g = SystemRandomNumberGenerator()
        return ProxySigningKey(bytes: (0..<byteCount).map { _ in UInt8.random(in: 0...255, using: &g) })!
    }

    /// The signature of `original` (base64url, 22 characters). A context prefix keeps these MACs
    /// apart from anything else the key might ever sign.
    public func signature(for original: String) -> String {
        Base64URL.encode(Array(mac(original).prefix(Self.macBytes)))
    }

    /// Whether `signature` is this key's for `original`; compared in constant time.
    public func verifies(signature: String, for original: String) -> Bool {
        guard let given = Base64URL.decode(signature), given.count == Self.macBytes else { return false }
        return HMACSHA256.equal(given, Array(mac(original).prefix(Self.macBytes)))
    }

    private func mac(_ original: String) -> [UInt8] {
        hmac.mac(Array("httpcachefs proxy URL v1\n".utf8) + Array(original.utf8))
    }

    // MARK: The key file

    public static func filePath(cacheDirectory: String) -> String { cacheDirectory + "/" + fileName }

    /// The key in `<cacheDirectory>/proxy-key`, or nil when there is none or it cannot be read
    /// (another user's cache): the commands that build URLs say so.
    public static func read(cacheDirectory: String) -> ProxySigningKey? {
        guard let data = FileManager.default.contents(atPath: filePath(cacheDirectory: cacheDirectory)) else { return nil }
        return parse(Array(data))
    }

    /// The key file's content: base64url of the 32 bytes, a newline.
    static func parse(_ bytes: [UInt8]) -> ProxySigningKey? {
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Base64URL.decode(text).flatMap(ProxySigningKey.init(bytes:))
    }

    /// The cache's key, made on first use: written to a temporary file and linked into place, so
    /// two processes starting at once end with the same key (the second's link fails, and it
    /// reads the first's). A file that does not hold a key (truncated) is replaced. The file is
    /// made owner-only; one readable by others is made so.
    public static func loadOrCreate(cacheDirectory: String) throws -> ProxySigningKey {
        let path = filePath(cacheDirectory: cacheDirectory)
        if let existing = try readPrivate(path) { return existing }
        let fresh = generate()
        let tmp: String
        do { tmp = try OwnerOnlyFile.writeTemporary(Array((Base64URL.encode(fresh.key) + "\n").utf8), near: path) } catch {
            throw ProxySigningKeyError(path: path, cause: "\(error)")
        }
        defer { unlink(tmp) }
        if link(tmp, path) == 0 { return fresh }
        let linkError = errno
        if linkError == EEXIST, let other = try readPrivate(path) { return other }
        // A file there that holds no key: replaced.
        guard rename(tmp, path) == 0 else {
            throw ProxySigningKeyError(path: path, cause: String(cString: strerror(errno)) + " (link: \(String(cString: strerror(linkError))))")
        }
        return fresh
    }

    /// The key at `path` (made owner-only if it was not), nil when there is no file or it holds
    /// no key.
    private static func readPrivate(_ path: String) throws -> ProxySigningKey? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw ProxySigningKeyError(path: path, cause: String(cString: strerror(errno)))
        }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0, st.st_mode & 0o077 != 0 { _ = fchmod(fd, 0o600) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return parse(Array(buffer[0..<n]))
    }
}

public struct ProxySigningKeyError: Error, CustomStringConvertible {
    public var path: String
    public var cause: String
    public var description: String { "cannot keep the proxy's signing key in \(path): \(cause)" }
}
