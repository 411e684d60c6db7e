import CacheCore
import Foundation

/// The origins the user's credentials belong to: `--user`/`--password-file` and every `--header`
/// go to these and nowhere else.
///
/// Credential origins are the origins (scheme, host, port) of the URLs the user gave (mounted
/// URLs, `--index` listings, URL-list entries, `cat`/`preload` arguments, `--tier` origins) and
/// the hosts named with `--credential-host` (a `HostPattern`: `media.example.com`, `*.example.com`,
/// `host:8443`). A host reached only through a proxy URL, a redirect to another origin, a
/// listing's link elsewhere or a playlist's segment elsewhere is none of them.
///
/// Netrc entries go to their own machine (libcurl's rule), except where a mount that was not
/// given the netrc file named the origin (`Grant`): a mount joining a daemon brings its own
/// origins, and the daemon's credentials are the daemon's mounts'. So a
/// joining mount given none of the daemon's credentials adds its origins as `netrcWithheld`,
/// and neither `--header`, `--user` nor netrc reaches them unless a mount that was given them
/// named the same origin (one origin, one set of credentials in one daemon: the cache keys its
/// bytes by them).
///
/// A command adds the URLs it was given before it fetches (and a mount those of a re-read URL
/// list): hence a class, shared by every copy of the configuration. Threads: any; one lock.
public final class CredentialScope: Sendable, Equatable, CustomStringConvertible {
    private struct State {
        var origins: Set<URLOrigin> = []
        /// Origins named with the netrc file (`origins` too get it).
        var netrcOrigins: Set<URLOrigin> = []
        /// Origins named only by mounts not given the netrc file: it goes to none of them.
        var netrcWithheld: Set<URLOrigin> = []
        var withheldNoted: Set<URLOrigin> = []
    }
    private let state = LockedValue(State())
    /// `--credential-host` patterns.
    public let hosts: [HostPattern]
    /// Every origin asked is a credential origin (a tier's node source: it is only ever asked for
    /// nodes, and follows no redirect).
    public let coversEverything: Bool

    public init(urls: [String] = [], hosts: [HostPattern] = [], coversEverything: Bool = false) {
        self.hosts = hosts
        self.coversEverything = coversEverything
        add(urls: urls)
    }

    /// Makes the origins of `urls` credential origins (a URL curl cannot parse adds nothing).
    public func add(urls: some Sequence<String>) {
        grant(headers: true, netrc: true).add(urls: urls)
    }

    /// How one mount names its origins: with the daemon's `--header` / `--user` (`headers`) and
    /// its netrc file (`netrc`), or without. The daemon's own command line and every command
    /// that was given URLs name them with both.
    public func grant(headers: Bool, netrc: Bool) -> Grant { Grant(scope: self, headers: headers, netrc: netrc) }

    /// One mount's way of adding origins (its URLs, and those of its re-read URL list).
    public struct Grant: Sendable, Equatable {
        public let scope: CredentialScope
        /// The mount was given the daemon's `--header` / `--user`: its origins get them.
        public let headers: Bool
        /// The mount was given the daemon's netrc file: its origins may get its entries.
        public let netrc: Bool

        public func add(urls: some Sequence<String>) {
            let origins = urls.compactMap(URLOrigin.init)
            guard !origins.isEmpty else { return }
            let (headers, netrc) = (self.headers, self.netrc)
            scope.state.withLock {
                if headers { $0.origins.formUnion(origins) }
                if netrc { $0.netrcOrigins.formUnion(origins) } else { $0.netrcWithheld.formUnion(origins) }
            }
        }
    }

    /// Whether the netrc file may be used for `url`: for every origin but one that only mounts
    /// not given the file named (a netrc entry names its machine; libcurl keeps it there).
    public func allowsNetrc(_ url: String) -> Bool {
        if coversEverything { return true }
        guard let origin = URLOrigin(url) else { return true }
        if hosts.contains(where: { $0.matches(origin) }) { return true }
        return state.withLock { !$0.netrcWithheld.contains(origin) || $0.netrcOrigins.contains(origin) || $0.origins.contains(origin) }
    }

    /// Whether credentials may go to `url`'s origin.
    public func covers(_ url: String) -> Bool {
        if coversEverything { return true }
        guard let origin = URLOrigin(url) else { return false }
        return covers(origin)
    }

    public func covers(_ origin: URLOrigin) -> Bool {
        if coversEverything { return true }
        if hosts.contains(where: { $0.matches(origin) }) { return true }
        return state.withLock { $0.origins.contains(origin) }
    }

    /// The origins added so far (for tests and the log).
    public var origins: Set<URLOrigin> { state.withLock { $0.origins } }

    /// True the first time credentials are withheld from `origin`: the log says so once per origin.
    func firstWithheld(_ origin: URLOrigin) -> Bool {
        state.withLock { $0.withheldNoted.insert(origin).inserted }
    }

    /// Makes these origins credential origins (a `--tier` origin, say).
    public func add(origins: some Sequence<URLOrigin>) {
        state.withLock { $0.origins.formUnion(origins) }
    }

    /// Same hosts and origins (the once-per-origin log memory aside).
    public static func == (a: CredentialScope, b: CredentialScope) -> Bool {
        a === b || (a.coversEverything == b.coversEverything && a.hosts == b.hosts && a.origins == b.origins
            && a.netrcOrigins == b.netrcOrigins && a.netrcWithheld == b.netrcWithheld)
    }

    var netrcOrigins: Set<URLOrigin> { state.withLock { $0.netrcOrigins } }
    /// The origins the netrc file is kept from (for tests and the log).
    public var netrcWithheld: Set<URLOrigin> {
        let named = state.withLock { $0.netrcWithheld.subtracting($0.netrcOrigins.union($0.origins)) }
        return coversEverything ? [] : named.filter { origin in !hosts.contains { $0.matches(origin) } }
    }

    public var description: String {
        if coversEverything { return "every origin" }
        let names = origins.map(\.description).sorted() + hosts.map(\.pattern)
        return names.isEmpty ? "no origin" : names.joined(separator: ", ")
    }
}

extension HostPattern {
    /// Whether the pattern names `origin`'s host and port (an IPv6 host with or without brackets).
    func matches(_ origin: URLOrigin) -> Bool {
        matches(host: origin.host, port: origin.port)
            || (origin.host.contains(":") && matches(host: "[\(origin.host)]", port: origin.port))
    }
}
