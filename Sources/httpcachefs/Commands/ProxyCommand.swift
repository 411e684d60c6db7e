import ArgumentParser
import CacheCore
import Dispatch
import Foundation
import Logging
import MetricsExport
import Proxy
import Settings

/// Proxy options shared by `httpcachefs proxy` and `httpcachefs mount` (which runs the proxy
/// too unless `--no-proxy`). Include them with `@OptionGroup var proxy: ProxyOptions`.
struct ProxyOptions: ParsableArguments {
    @Option(name: [.customLong("proxy-port"), .customLong("port")], parsing: .unconditional,
            help: ArgumentHelp("Port of the local proxy; 0 picks a free one (default: \(ProxyConfiguration.defaultPort)).", valueName: "port"))
    var port: String?

    @Option(name: .customLong("bind"),
            help: ArgumentHelp("Address the proxy listens on (default: 127.0.0.1). Anything but loopback requires a token: --token, else one is generated and printed.", valueName: "address"))
    var bindAddress: String?

    @Option(name: .customLong("token"),
            help: ArgumentHelp("Secret that proxy URLs must carry (/t/<token>/...); others get 403.", valueName: "token"))
    var token: String?

    @Option(name: .customLong("proxy-name"),
            help: ArgumentHelp("Another name clients reach the proxy by (an /etc/hosts alias of 127.0.0.1), accepted in the Host header like localhost; repeatable. Without a token only requests to loopback addresses, localhost, --bind, this machine's host name and these names are served (a web page on a DNS-rebinding domain is not).", valueName: "name"))
    var proxyNames: [String] = []

    init() {}

    /// The flags merged over the config file `file`, checked.
    struct Resolved: Equatable {
        var port = ProxyConfiguration.defaultPort
        var bindAddress = "127.0.0.1"
        var token: String?
        var proxyNames: [String] = []
    }

    func resolve(file: ConfigFile?) throws -> Resolved {
        var r = Resolved()
        if let v = setting(port, "proxy-port", in: file) {
            guard let n = Int(v.text.trimmingCharacters(in: .whitespaces)), (0...65535).contains(n) else {
                throw UsageError("invalid port '\(v.text)' for \(v.option): expected a number from 0 to 65535 (0 picks a free one)")
            }
            r.port = n
        }
        if let v = setting(bindAddress, "bind", in: file) {
            guard !v.text.trimmingCharacters(in: .whitespaces).isEmpty else { throw UsageError("empty address for \(v.option)") }
            r.bindAddress = v.text.trimmingCharacters(in: .whitespaces)
        }
        if let v = setting(token, "token", in: file) {
            guard !v.text.isEmpty, !v.text.contains(where: { !($0.isLetter || $0.isNumber || "-_.~".contains($0)) }) else {
                throw UsageError("invalid token for \(v.option): it may only contain letters, digits and -_.~ (it goes into URL paths)")
            }
            r.token = v.text
        }
        r.proxyNames = proxyNames.isEmpty ? (file?.list("proxy-name") ?? []) : proxyNames
        return r
    }

    /// The server's configuration over the cache `cache` describes (its directory, and the
    /// `--allow-host` patterns, which are cache options because the fetcher uses them too);
    /// `generatedToken` is set when the bind address needed a token and none was given (print it:
    /// the user needs it to build URLs on other machines). Loads the cache's signing key
    /// (`<cache dir>/proxy-key`, made on first use): call it while holding the cache.
    func configuration(cache: ResolvedCacheOptions) throws -> (configuration: ProxyConfiguration, generatedToken: String?) {
        let p = try resolve(file: cache.config)
        var token = p.token
        var generated: String?
        if token == nil, !ProxyConfiguration.isLoopback(p.bindAddress) {
            generated = ProxyConfiguration.generateToken()
            token = generated
        }
        var c = ProxyConfiguration(bindAddress: p.bindAddress, port: p.port, token: token, allowedHosts: cache.allowedHosts,
                                   proxyNames: p.proxyNames, cacheDirectory: URL(fileURLWithPath: cache.directory).standardizedFileURL.path,  // absolute: 'url' compares it
                                   version: Version.string)
        c.loopMarker = LoopMarker.token
        do {
            c.signingKey = try ProxySigningKey.loadOrCreate(cacheDirectory: c.cacheDirectory)
        } catch {
            throw CommandFailure("\(error): the proxy signs its URLs with it; check the cache directory's permissions")
        }
        return (c, generated)
    }

    /// The proxy server on `engine`, listening (`proxy`'s and a mount daemon's): the server and
    /// its port. A port that is taken throws `CommandFailure(portTaken(address, port, holder))`,
    /// `holder` being " by another httpcachefs proxy (cache DIR)" when it is one of ours, else "".
    static func startServer(engine: CacheEngine, configuration: ProxyConfiguration, metrics: PrometheusExport, logger: Logger,
                            refresh: (@Sendable (String?) async -> ControlAnswer)? = nil,
                            mounts: (@Sendable (String, [URLQueryItem]) async -> ControlAnswer)? = nil,
                            portTaken: (_ address: String, _ port: Int, _ holder: String) -> String) async throws -> (ProxyServer, Int) {
        let server = ProxyServer(engine: engine, configuration: configuration, logger: logger,
                                 metricsText: { metrics.text(for: engine) }, refresh: refresh, mounts: mounts,
                                 eventLoopGroup: DaemonLoops.shared)
        do {
            return (server, try await onBlockingPool { try server.start() })
        } catch ProxyServerError.portInUse(let address, let port) {
            let user = await (try? onBlockingPool { portUser(port) }) ?? nil
            throw CommandFailure(portTaken(address, port, user.map { " by \($0)" } ?? ""))
        }
    }

    /// Who listens on a taken port, when it is one of ours: "the proxy of the cache DIR".
    static func portUser(_ port: Int) -> String? {
        guard case let .found(status) = URLCommand.askPort(port) else { return nil }
        return "another httpcachefs proxy" + (status.cacheDirectory.map { " (cache \($0))" } ?? "")
    }
}

/// `httpcachefs proxy`: the local HTTP proxy alone, without a mount.
struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Serve remote files through a local HTTP proxy backed by the cache (no mount).",
        discussion: """
            Players that only take URLs (a browser's <video>, a TV app, ffplay) get the same cache \
            as the mount. Get a file's proxy URL with 'httpcachefs url URL'; it looks like \
            http://127.0.0.1:8718/s/<signature>/u/<base64url of the URL>/<its file name>: the \
            signature (a MAC under the key in <cache dir>/proxy-key) shows the proxy that its \
            owner made the URL, so no web page and no other local user can make it fetch \
            anything; unsigned requests get 403. Ranges, HEAD and \
            HLS playlists (rewritten so segments, keys and init sections come through the proxy \
            too) are supported. Several ranges in one request are answered as multipart/byteranges \
            (or the whole file, 200, for overlapping or more than 16 ranges). The proxy listens on \
            loopback only unless --bind says otherwise, and then requires a token. It never acts as \
            an open proxy: only its own URL forms are served, only http(s) origins, and never cloud \
            metadata or link-local addresses (403) unless --allow-host names one exactly. Stop it \
            with Ctrl-C or SIGTERM.
            """
    )

    @OptionGroup var proxy: ProxyOptions
    @OptionGroup var cache: CacheOptions

    func run() async throws {
        try await runReportingErrors {
            ArgumentMasking.maskOwnArguments()   // a long-lived process: no token or password in `ps`
            let options = cache
            let resolved = try options.resolve()
            _ = try proxy.resolve(file: resolved.config)   // a bad port or token fails before the cache opens
            let logger = options.makeLogger(label: "httpcachefs.proxy", defaultLevel: .info)
            let metrics = PrometheusExport()   // the backend `/metrics` renders
            let engine = try await onBlockingPool {
                try options.openEngine(defaultLogLevel: .info, metrics: metrics)
            }
            let (configuration, generated) = try proxy.configuration(cache: resolved)
            // Handlers first: the server writes `proxy.json` as it starts, and whoever reads it may
            // send SIGTERM at once. A signal before the server is up stops it as soon as it is.
            let started = LockedValue<(server: ProxyServer?, stopAsked: Bool)>((nil, false))
            let stop = DaemonSignals(queue: "httpcachefs.signals", stop: { _ in
                started.withLock { $0.stopAsked = true; return $0.server }?.stop()
            }, restoresDefaults: true)
            let (server, port): (ProxyServer, Int)
            do {
                (server, port) = try await ProxyOptions.startServer(engine: engine, configuration: configuration, metrics: metrics, logger: logger) {
                    "cannot listen on \($0):\($1): the port is in use\($2); pick another with --proxy-port N (0 picks a free one)"
                }
            } catch {
                stop.cancel()
                try? await onBlockingPool { engine.shutdown() }
                throw error
            }
            if started.withLock({ $0.server = server; return $0.stopAsked }) { server.stop() }
            let base = ProxyConfiguration.localBase(bindAddress: configuration.bindAddress, port: port)
            CacheCommand.printLine("httpcachefs proxy listening on \(base) (cache: \(resolved.directory))")
            if let generated {
                CacheCommand.printLine("token (required in proxy URLs, as /t/<token>/...): \(generated)")
            }
            await server.waitUntilStopped()
            stop.cancel()
            try await onBlockingPool { engine.shutdown() }
        }
    }
}
