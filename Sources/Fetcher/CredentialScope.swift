import CacheCore
import Foundation

/// The origins the user's credentials belong to: `--user`/`--password-file` and every `--header`
/// go to these and nowhere else.
///
/// Credential origins are the origins (scheme, host, port) of the URLs the user gave (mounted
/// URLs, `--index` listings, URL-list entries, `cat`/`preload` arguments, `--tier` origins) and
/// the hosts named with `--credential-host` (a `HostPattern`: `media.example.com`, `*.example.com`,
/// `host:8443`). A host reached only through a proxy URL, a redirect to another origin, a
/// listing's link elsewhere or a playlist's segment elsewhere is none of them. Netrc entries are
/// not scoped here: libcurl sends each to its own machine only.
///
/// A command adds the URLs it was given before it fetches (and a mount those of a re-read URL
/// list): hence a class, shared by every copy of the configuration. Threads: any; one lock.
public final class CredentialScope: Sendable, Equatable, CustomStringConvertible {
    private struct State {
        var origins: Set<URLOrigin> = []
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
        let origins = urls.compactMap(URLOrigin.init)
        guard !origins.isEmpty else { return }
        state.withLock { $0.origins.formUnion(origins) }
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
        a === b || (a.coversEverything == b.coversEverything && a.hosts == b.hosts && a.origins == b.origins)
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
