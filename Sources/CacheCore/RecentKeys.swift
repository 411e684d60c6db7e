/// The cache keys of the URLs opened lately, so that an open of a URL seen before skips making
/// its key.
///
/// Why: the proxy opens the entry on every request, and `KeyRules.key(for:)` parses and rebuilds
/// the URL with Foundation's `URLComponents` (about 4% of a warm hit's CPU), while a keep-alive
/// client asks for the same few URLs again and again. The key is a function of the URL and the
/// engine's rules, which never change for the engine's life, so a remembered key is the key.
/// Errors are not remembered (they are rare and cheap to make again). At most `capacity` URLs;
/// when full, it starts over (no order to keep on the hot path).
final class RecentKeys: Sendable {
    private let keys = LockedValue<[String: CacheKey]>([:])
    let capacity: Int

    init(capacity: Int = 256) { self.capacity = capacity }

    func key(for url: String, rules: KeyRules) throws -> CacheKey {
        if let known = keys.withLock({ $0[url] }) { return known }
        let made = try rules.key(for: url)
        keys.withLock { k in
            if k.count >= capacity { k.removeAll(keepingCapacity: true) }
            k[url] = made
        }
        return made
    }
}
