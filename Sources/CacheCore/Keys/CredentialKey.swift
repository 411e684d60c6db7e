import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Who may read bytes fetched with credentials.
///
/// Bytes fetched with credentials (a URL's `user:password@`, `--user`, a netrc file, an
/// `Authorization` or `Cookie` header) belong to those credentials: the cache key of such a URL
/// carries a keyed hash of them (`KeyRules.key(for:)`), so a request without them, or with other
/// ones, is another entry, fetched from the origin, which says whether it may have the bytes.
/// The hash is keyed with a secret of the cache's own (`credential.key`, 32 random bytes, 0600),
/// so the index, the logs and the status page never hold the credentials, nor a hash anyone could
/// test guesses against without that file.
public enum CredentialKey {
    static let fileName = "credential.key"

    /// The cache's secret, made on first use. Empty when it can be neither read nor made (the
    /// keys then still differ per credential, unkeyed).
    public static func load(directory: String) -> [UInt8] {
        let path = directory + "/" + fileName
        if let data = FileManager.default.contents(atPath: path), data.count == 32 { return [UInt8](data) }
        var secret = [UInt8](repeating: 0, count: 32)
        var rng = SystemRandomNumberGenerator()
        for i in secret.indices { secret[i] = UInt8.random(in: 0...255, using: &rng) }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            // Another process made it meanwhile: use theirs.
            if let data = FileManager.default.contents(atPath: path), data.count == 32 { return [UInt8](data) }
            return []
        }
        defer { close(fd) }
        let written = secret.withUnsafeBytes { write(fd, $0.baseAddress, 32) }
        return written == 32 ? secret : []
    }

    /// The cache's secret if it has one, made by nobody here: for a read-only view of a cache
    /// (`CacheSnapshot`), which must not write it. Empty when there is none (or it is not a
    /// regular file of this user).
    public static func existing(directory: String) -> [UInt8] {
        guard case let .success(bytes) = OwnedFile.read(directory + "/" + fileName, maxBytes: 32), bytes.count == 32 else { return [] }
        return bytes
    }

    /// 128 bits of keyed hash of `message`, in hex: two XXH64 runs over secret, message and
    /// secret again, one per half.
    static func hash(_ message: String, secret: [UInt8]) -> String {
        let bytes = secret + Array(message.utf8) + secret
        let a = XXH64.hash(bytes)
        let b = XXH64.hash([0x5c] + bytes + [0x36])
        return String(format: "%016llx%016llx", a, b)
    }
}
