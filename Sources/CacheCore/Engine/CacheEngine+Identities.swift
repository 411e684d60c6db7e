import Foundation

/// One URL's entries across the credentials that read it, for `cache info` and `cache rm`.
///
/// Bytes fetched with credentials are keyed by them (`KeyRules.key(for:)`: the URL, then
/// `#cred-` and a keyed hash): a bucket read with S3 keys, a URL read with `--user` or an
/// `Authorization` header. A command run without those credentials (a plain URL, or one
/// without the daemon's keys) would miss such entries by its own key; it finds them by the URL
/// across identities, each named by its hash, never by a secret.
extension KeyRules {
    /// `url`'s key as read without any credential: the URL in its one spelling.
    public func plainKey(for url: String) throws -> CacheKey {
        try KeyRules(ignoredQueryNames: ignoredQueryNames).key(for: url)
    }
}

extension CacheKey {
    static let credentialMark = "#cred-"

    /// Whether this key names `plain`'s URL (a `plainKey`), read with or without credentials.
    public func names(_ plain: CacheKey) -> Bool {
        string == plain.string || (string.hasPrefix(plain.string) && string.dropFirst(plain.string.count).hasPrefix(Self.credentialMark))
    }

    /// The keyed hash of the credentials the bytes were read with (no secret: the cache's own
    /// `credential.key` keys it), nil when read without any.
    public var credentialHash: String? {
        guard let r = string.range(of: Self.credentialMark, options: .backwards) else { return nil }
        return String(string[r.upperBound...])
    }
}

extension CacheEngine {
    /// The entries of `url`: the one its key names (with this engine's credentials and
    /// buckets), else every one of its URL whatever credentials read it, by key.
    public func statuses(url: String) -> [EntryStatus] {
        if let s = status(url: url) { return [s] }
        guard let plain = try? core.configuration.keyRules.plainKey(for: url) else { return [] }
        return list().filter { $0.info.key.names(plain) }
    }

    /// Forgets the entry `key` names and deletes its slices, and releases its pins
    /// (`remove(url:)` by key: an entry `statuses(url:)` found under another identity).
    public func remove(key: CacheKey) throws {
        let unpinned = try unpin(key: key)
        do { try core.commands.remove(key: key, url: key.string) } catch let error as CacheError {
            if case .notFound = error, unpinned > 0 { return }
            throw error
        }
    }
}
