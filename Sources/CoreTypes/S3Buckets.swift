import Foundation

/// The buckets a process reads, each with the endpoint and keys of the command or mount that
/// named it: which requests are signed, with which keys, and whose bytes an entry holds.
///
/// Owns: the bucket roots made from s3:// URLs (`register`, by the executable as it maps them)
/// and the clock correction learnt from `RequestTimeTooSkewed`. Threads: any (one leaf lock);
/// the fetcher's loop asks it for every attempt's headers, the engine for every new key.
///
/// Keys go only where the user sent them (the rule of HTTP credentials, `CredentialScope`): a request is
/// signed when its URL is under a registered bucket root (or is that bucket's listing), with the
/// keys of the mount that registered it. A mount joining a daemon brings its own keys for its own
/// buckets; another mount's buckets at the same endpoint never get them. One bucket, one set of
/// keys in one process: a second registration of a bucket with other keys or another region is
/// refused (`Conflict`), since the cache keys the bucket's bytes by them
/// (`credentialIdentity(of:)`, part of the cache key).
///
/// A daemon's buckets last as long as the mounts that named them: each registration names its
/// holder (a mountpoint; nil: the process itself, for a command), and `release(holder:)`, when
/// that mount ends, takes out the buckets no other holder named, with their keys and renewal.
/// A later mount may then name such a bucket with other keys. Every change moves `generation`,
/// which a memo of cache keys (the engine's) checks: a URL's key follows the keys that read it.
public final class S3Buckets: Sendable, Equatable {
    /// One registry is equal to itself only (the configurations that share it compare equal).
    public static func == (a: S3Buckets, b: S3Buckets) -> Bool { a === b }

    /// The process's buckets: the executable's commands and the daemon's mounts register here.
    public static let process = S3Buckets()

    public struct Bucket: Sendable, Equatable {
        /// The bucket's root folder URL, ending in `/` (`S3Endpoint.root`).
        public var root: String
        /// Where it is listed (`S3Endpoint.listingBase`).
        public var listingBase: String
        /// Where it is, and the keys (nil: unsigned).
        public var endpoint: S3Endpoint

        public init(bucket: String, endpoint: S3Endpoint) {
            self.root = endpoint.root(bucket: bucket)
            self.listingBase = endpoint.listingBase(bucket: bucket)
            self.endpoint = endpoint
        }

        /// Whether `url` is an object or folder of this bucket, or its listing.
        func holds(_ url: String) -> Bool {
            url.hasPrefix(root) || url == listingBase || url.hasPrefix(listingBase + "?")
        }
    }

    /// A bucket named again with other keys, region or addressing than the first time.
    public struct Conflict: Error, CustomStringConvertible, Equatable {
        public let root: String
        public init(root: String) { self.root = root }
        public var description: String {
            "the bucket at \(root) is already read with other S3 keys or another region in this process (one bucket, one set of keys per cache daemon, as the cache keys its bytes by them)"
        }
    }

    /// Temporary keys whose source gives new ones (`credential_process`): renewed in the
    /// background once they are within `margin` of their expiration, for every bucket read with
    /// them; requests meanwhile are signed with the keys at hand.
    public struct Renewal: Sendable {
        public var expiration: Date
        public let renew: @Sendable () throws -> (credentials: SigV4.Credentials, expiration: Date?)
        /// Told a line for the log: a renewal that failed (it is tried again a minute later).
        public let report: @Sendable (String) -> Void

        public init(expiration: Date, renew: @escaping @Sendable () throws -> (credentials: SigV4.Credentials, expiration: Date?),
                    report: @escaping @Sendable (String) -> Void) {
            self.expiration = expiration
            self.renew = renew
            self.report = report
        }
    }
    /// Keys are renewed this long before they expire.
    static let margin: TimeInterval = 300

    private struct State {
        var buckets: [String: Bucket] = [:]
        /// Who named each bucket (by root): mountpoints, or `processHolder`.
        var holders: [String: Set<String>] = [:]
        var generation: UInt64 = 0
        /// By `S3Endpoint.credentialSource`, and whether a renewal runs.
        var renewals: [String: (renewal: Renewal, running: Bool, notBefore: Date)] = [:]
        /// Server time minus local time, learnt from a `RequestTimeTooSkewed` answer's `Date`.
        var skew: TimeInterval = 0
    }
    private let state = LockedValue(State())

    public init() {}

    /// The holder of registrations that last as long as the process (a command's).
    static let processHolder = "\u{0}process"

    /// Adds `bucket` for `holder` (a mountpoint; nil: for as long as the process runs); the same
    /// bucket again with the same endpoint and keys adds only the holder.
    /// Throws `Conflict` when it is there with other keys, region or addressing.
    public func register(_ bucket: Bucket, renewal: Renewal? = nil, holder: String? = nil) throws {
        try state.withLock { s in
            if let known = s.buckets[bucket.root] {
                guard Self.sameReader(known.endpoint, bucket.endpoint) else { throw Conflict(root: bucket.root) }
            } else {
                s.buckets[bucket.root] = bucket
                s.generation &+= 1
            }
            s.holders[bucket.root, default: []].insert(holder ?? Self.processHolder)
            if let source = bucket.endpoint.credentialSource, let renewal, s.renewals[source] == nil {
                s.renewals[source] = (renewal, false, .distantPast)
            }
        }
    }

    /// `holder` (a mountpoint that ended) names its buckets no more: those no other holder
    /// named leave, with their keys (and the renewal of keys no bucket left uses). Returns the
    /// roots that left.
    @discardableResult
    public func release(holder: String) -> [String] {
        state.withLock { s in
            var gone: [String] = []
            for (root, var names) in s.holders where names.contains(holder) {
                names.remove(holder)
                if names.isEmpty {
                    s.holders[root] = nil
                    s.buckets[root] = nil
                    gone.append(root)
                } else {
                    s.holders[root] = names
                }
            }
            guard !gone.isEmpty else { return [] }
            s.generation &+= 1
            let sources = Set(s.buckets.values.compactMap(\.endpoint.credentialSource))
            for source in s.renewals.keys where !sources.contains(source) { s.renewals[source] = nil }
            return gone.sorted()
        }
    }

    /// Moves on every bucket added or taken out: a memo of keys made under another generation
    /// is stale.
    public var generation: UInt64 { state.withLock { $0.generation } }

    /// The same endpoint, region, addressing and keys' identity (temporary keys of one source
    /// are one reader, whichever renewal they are).
    static func sameReader(_ a: S3Endpoint, _ b: S3Endpoint) -> Bool {
        a.scheme == b.scheme && a.authority == b.authority && a.region == b.region && a.pathStyle == b.pathStyle
            && a.credentialIdentity == b.credentialIdentity
    }

    /// The registered bucket `url` belongs to, if any.
    public func bucket(of url: String) -> Bucket? {
        state.withLock { s in
            // The longest root first: `ENDPOINT/a/` never claims `ENDPOINT/ab/…` (a root ends in
            // `/`), but a virtual-hosted root and a path-style one may nest.
            s.buckets.values.filter { $0.holds(url) }.max { $0.root.count < $1.root.count }
        }
    }

    public var isEmpty: Bool { state.withLock { $0.buckets.isEmpty } }

    /// The headers that sign a `method` request for `url` at local time `date` (corrected by the
    /// skew learnt); empty for a URL under no bucket, or a bucket read without keys.
    public func signedHeaders(method: String, url: String, date: Date) -> [String] {
        guard let bucket = bucket(of: url), let credentials = bucket.endpoint.credentials else { return [] }
        if let source = bucket.endpoint.credentialSource { renewIfDue(source, at: date) }
        let skew = state.withLock { $0.skew }
        return SigV4.headers(method: method, url: url, credentials: credentials, region: bucket.endpoint.region,
                             date: date.addingTimeInterval(skew)) ?? []
    }

    /// Starts the renewal of `source`'s keys on a thread of its own when they are due (never
    /// on the caller's: it is the fetcher's loop, and the source is a program).
    private func renewIfDue(_ source: String, at date: Date) {
        let due: Renewal? = state.withLock { s in
            guard let entry = s.renewals[source], !entry.running, date >= entry.notBefore,
                  date.addingTimeInterval(Self.margin) >= entry.renewal.expiration else { return nil }
            s.renewals[source]?.running = true
            return entry.renewal
        }
        guard let due else { return }
        Thread.detachNewThread { [self] in
            let result = Result { try due.renew() }
            state.withLock { s in
                s.renewals[source]?.running = false
                switch result {
                case let .success(fresh):
                    s.renewals[source]?.renewal.expiration = fresh.expiration ?? .distantFuture
                    for (root, bucket) in s.buckets where bucket.endpoint.credentialSource == source {
                        s.buckets[root]?.endpoint.credentials = fresh.credentials
                    }
                case .failure:
                    s.renewals[source]?.notBefore = Date().addingTimeInterval(60)
                }
            }
            if case let .failure(error) = result { due.report("S3: renewing the keys from \(source) failed (tried again in a minute): \(error)") }
        }
    }

    /// Whose bytes an entry for `url` holds: the keys' identity (`S3Endpoint.credentialIdentity`)
    /// for a URL of a bucket read with keys; nil otherwise (unsigned, or no bucket).
    public func credentialIdentity(of url: String) -> String? {
        bucket(of: url)?.endpoint.credentialIdentity
    }

    /// Learns the server's clock from a `RequestTimeTooSkewed` answer (its `Date`, at local
    /// `now`): later signatures use the server's time. True when this changed the correction by
    /// more than a minute (the caller logs that once, not per request).
    @discardableResult
    public func learnServerTime(_ serverDate: Date, now: Date) -> Bool {
        let skew = serverDate.timeIntervalSince(now)
        return state.withLock { s in
            let changed = abs(s.skew - skew) > 60
            if changed { s.skew = skew }
            return changed
        }
    }

    /// The correction in use (server minus local time, seconds).
    public var skew: TimeInterval { state.withLock { $0.skew } }
}
