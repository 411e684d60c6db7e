import ArgumentParser
import CacheCore
import CoreMetrics
import Fetcher
import Foundation
import Logging
import MetricsExport
import Proxy
import Settings

/// The options every subcommand shares, written after the subcommand name
/// (`httpcachefs cat --cache-size 10G URL`). Include them with `@OptionGroup var cache: CacheOptions`.
///
/// Every value may also come from a config file (`--config FILE`, else
/// `$XDG_CONFIG_HOME/httpcachefs/config` if it exists); flags on the command line win.
/// Values are kept as text here and parsed in `resolve()`, so that a bad value becomes one clear
/// line naming the option (printed from `validate()`) instead of a usage dump.
///
/// Map of this folder (`Options/`): flags and config keys, parsed to one clear line on error.
/// - `CacheOptions.swift` (this file): the options every subcommand shares; groups below.
/// - `CacheLimitOptions.swift`: `--cache-max-age`, `--read-ahead-max`, `--scan-share`, `--entry-memory`.
/// - `OriginOptions.swift`: user agent, CA, netrc, `--user`, credential hosts.
/// - `TransferOptions.swift`: `--max-connections`, `--bwlimit`, `--tier`.
/// - `MountOwnerOptions.swift`: `--uid`, `--gid`, `--umask`.
/// - `Parsing.swift`: `--range`. `ArgumentMasking.swift`: secrets hidden from `ps`.
/// Neighbours: used by `Commands/` and `Daemon/` (a joining mount's arguments); reads the
/// Settings module's table; reports through `Terminal/`.
struct CacheOptions: ParsableArguments {
    @Option(name: .customLong("cache-dir"), parsing: .unconditional,
            help: ArgumentHelp("Cache directory (default: $HTTPCACHEFS_CACHE_DIR, else $XDG_CACHE_HOME/httpcachefs, else /var/cache/httpcachefs for root and ~/.cache/httpcachefs for others).", valueName: "path"))
    var cacheDirectory: String?

    @Option(name: [.customLong("cache-size"), .customLong("vfs-cache-max-size")], parsing: .unconditional,
            help: ArgumentHelp("Most bytes to keep cached, e.g. 500M, 5G, 1.5T (default: 5G). rclone name: --vfs-cache-max-size.", valueName: "size"))
    var cacheSize: String?

    @Option(name: .customLong("slice-size"), parsing: .unconditional,
            help: ArgumentHelp("Size of one cache slice (the unit of accounting and eviction), 1M to 8M (default: 4M). Fixed when the cache is created.", valueName: "size"))
    var sliceSize: String?

    @Option(name: .customLong("revalidate-after"), parsing: .unconditional,
            help: ArgumentHelp("Ask the origin whether a file changed once its metadata is older than this, e.g. 0s, 30s, 5m, 2h, 1d (default: 10m).", valueName: "duration"))
    var revalidateAfter: String?

    @Option(name: .customLong("read-timeout"), parsing: .unconditional,
            help: ArgumentHelp("Fail a read that waits on the network longer than this (default: 60s).", valueName: "duration"))
    var readTimeout: String?

    @Option(name: .customLong("ignore-query"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Query parameters left out of the cache key (rotating tokens), comma-separated; repeatable.", valueName: "name,..."))
    var ignoreQuery: [String] = []

    @Option(name: .customLong("header"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Extra request header sent to the origin; repeatable.", valueName: "Name: value"))
    var headers: [String] = []

    @Option(name: .customLong("upstream-proxy"), parsing: .unconditional,
            help: ArgumentHelp("Reach the origin through this proxy (http://, https://, socks5://).", valueName: "url"))
    var upstreamProxy: String?

    @Flag(name: .customLong("insecure"), help: "Do not verify the origin's TLS certificate.")
    var insecure = false

    @Flag(name: .customLong("ignore-etag"),
          help: "Tell versions of a file apart by length and Last-Modified only, never by ETag, and send Last-Modified as If-Range (for load-balanced origins whose ETags change on every answer; such origins are also noticed and logged by themselves).")
    var ignoreETag = false

    @Option(name: .customLong("allow-host"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Only proxy origins whose host matches this glob (e.g. *.example.com, media.local:8080); repeatable. Default: any host. Link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, metadata.google.internal, ...) are refused by every command unless a pattern names that host or address exactly.", valueName: "pattern"))
    var allowHosts: [String] = []

    @Option(name: .customLong("log-level"), parsing: .unconditional,
            help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (default: error for cat, preload and cache, whose failures print one line anyway; info for mount and proxy).", valueName: "level"))
    var logLevel: String?

    @Flag(name: [.customShort("v"), .customLong("verbose")],
          help: "rclone name: -v logs at info, -vv at debug (--log-level wins over both).")
    var verbose: Int

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "rclone name: log errors only (--log-level wins).")
    var quiet = false

    @Option(name: .customLong("log-file"), parsing: .unconditional,
            help: ArgumentHelp("Append log lines to this file instead of stderr.", valueName: "path"))
    var logFile: String?

    @Option(name: .customLong("config"), parsing: .unconditional,
            help: ArgumentHelp("Config file with the same settings as 'key = value' lines (default: $XDG_CONFIG_HOME/httpcachefs/config if it exists).", valueName: "file"))
    var configFile: String?

    @OptionGroup(title: "Origin options") var origin: OriginOptions
    @OptionGroup(title: "Cache limits") var limits: CacheLimitOptions
    @OptionGroup(title: "Transfer options") var transfer: TransferOptions
    @OptionGroup(title: "S3 options") var s3: S3Options

    init() {}

    /// Checks every value up front, so a typo fails before anything starts, as one line.
    mutating func validate() throws {
        do { _ = try resolve() } catch { throw ErrorReporting.report(error) }
    }

    /// For commands that work on a daemon's cache (`url`, `cat`, `preload`, `cache …`): when no
    /// cache directory was named (no `--cache-dir`, no `cache-dir` in the config file, no
    /// `$HTTPCACHEFS_CACHE_DIR`) and exactly one daemon of this user holds a cache, that cache;
    /// several: an error naming each (pid, cache, mountpoints) that asks for `--cache-dir`. None:
    /// the default cache. Call from the command's `validate()`.
    mutating func useTheRunningDaemonsCache(command: String) throws {
        do {
            let env = ProcessInfo.processInfo.environment["HTTPCACHEFS_CACHE_DIR"] ?? ""
            guard cacheDirectory == nil, env.isEmpty,
                  (try ConfigFile.load(explicitPath: configFile))?["cache-dir"] == nil else { return }
            let daemons = DaemonDiscovery.mine()
            if daemons.count == 1 {
                cacheDirectory = daemons[0].cacheDirectory
            } else if daemons.count > 1 {
                throw UsageError("\(daemons.count) httpcachefs daemons of yours are running: "
                                 + daemons.map(\.described).joined(separator: "; ")
                                 + "; say which cache '\(command)' uses with --cache-dir")
            }
        } catch {
            throw ErrorReporting.report(error)
        }
    }

    /// The options merged with the config file and defaults, parsed and checked.
    func resolve() throws -> ResolvedCacheOptions {
        let file = try ConfigFile.load(explicitPath: configFile)
        func pick(_ flag: String?, _ key: String) -> (text: String, option: String)? { setting(flag, key, in: file) }

        var r = ResolvedCacheOptions()
        if let v = pick(cacheDirectory, "cache-dir") {
            guard !v.text.isEmpty else { throw UsageError("empty path for \(v.option)") }
            r.directory = expandingTilde(v.text)
        }
        try Self.checkCacheDirectory(r.directory, option: pick(cacheDirectory, "cache-dir")?.option ?? Self.defaultDirectorySource())
        if let v = pick(cacheSize, "cache-size") { r.capacity = try ByteSize.parse(v.text, option: v.option) }
        if let v = pick(sliceSize, "slice-size") {
            r.sliceSize = try ByteSize.parse(v.text, option: v.option)
            guard (1 << 20 ... 8 << 20).contains(r.sliceSize) else {
                throw UsageError("slice size '\(v.text)' for \(v.option) is out of range: it must be between 1M and 8M")
            }
        }
        guard r.capacity >= r.sliceSize else {
            throw UsageError("cache size \(Format.bytes(r.capacity)) is smaller than one slice (\(Format.bytes(r.sliceSize)))")
        }
        if let v = pick(revalidateAfter, "revalidate-after") { r.revalidateAfter = try DurationValue.parse(v.text, option: v.option) }
        if let v = pick(readTimeout, "read-timeout") {
            r.readTimeout = try DurationValue.parse(v.text, option: v.option)
            guard r.readTimeout > 0 else { throw UsageError("read timeout for \(v.option) must be more than 0s") }
        }

        let queryLists = ignoreQuery.isEmpty ? (file?.list("ignore-query") ?? []) : ignoreQuery
        r.ignoredQueryNames = queryLists
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }

        let commandLineHeaders = try headers.map { try HeaderLine.validate($0) }
        let overridden = Set(commandLineHeaders.map(HeaderLine.name(of:)))
        let fileHeaders = try (file?.list("header") ?? []).enumerated().map { try HeaderLine.validate($1, option: file!.describe("header", item: $0)) }
        r.headers = fileHeaders.filter { !overridden.contains(HeaderLine.name(of: $0)) } + commandLineHeaders

        if let v = pick(upstreamProxy, "upstream-proxy") { r.upstreamProxy = try Self.checkProxy(v.text, option: v.option) }
        r.insecure = insecure
        if !insecure, let file, let value = file["insecure"] {
            r.insecure = try BoolValue.parse(value, option: file.describe("insecure"))
        }
        r.ignoreETag = ignoreETag
        if !ignoreETag, let file, let value = file["ignore-etag"] {
            r.ignoreETag = try BoolValue.parse(value, option: file.describe("ignore-etag"))
        }
        r.allowedHosts = allowHosts.isEmpty ? (file?.list("allow-host") ?? []) : allowHosts
        if let v = pick(logLevel, "log-level") {
            r.logLevel = try Self.parseLevel(v.text, option: v.option)
        } else {
            // rclone's -v / -vv / -q, from the command line, else the config file.
            let count = verbose > 0 || quiet ? verbose : try file?["verbose"].map { try RcloneNames.verboseCount($0, option: file!.describe("verbose")) } ?? 0
            let hush = verbose > 0 || quiet ? quiet : try file?["quiet"].map { try BoolValue.parse($0, option: file!.describe("quiet")) } ?? false
            if let level = try RcloneNames.logLevelName(verbose: count, quiet: hush) { r.logLevel = try Self.parseLevel(level, option: "-v") }
        }
        if let v = pick(logFile, "log-file") { r.logFile = expandingTilde(v.text) }
        r.configFile = file?.path
        r.config = file
        try origin.resolve(into: &r, file: file)
        // Settings given for S3 are checked up front; the AWS environment and profile, which
        // other tools set, only where an s3:// URL is used (`s3Endpoint()`).
        if s3.isGiven(file: file) {
            r.s3 = try s3.resolve(file: file)
        } else {
            do { r.s3 = try s3.resolve(file: file) } catch { r.s3Problem = "\(error)" }
        }
        try limits.resolve(into: &r, file: file)
        r.transfer = try transfer.resolve(pick, fileTiers: file?.list("tier") ?? [], fileBudgets: file?.list("egress-budget") ?? [],
                                          filePath: file?.path)
        if !r.transfer.tiers.isEmpty, setting(limits.maxReadAhead, "read-ahead-max", in: file) == nil {
            r.maxReadAhead = Self.tierReadAhead
        }
        return r
    }

    /// The largest read-ahead with a cache tier, unless `--read-ahead-max` says otherwise. A node
    /// answers a slice another host is fetching only once nginx's cache lock lets go, which it
    /// re-checks every 500 ms: a copy keeps more slices in flight to overlap those waits. (A
    /// player's read-ahead follows its bitrate, not this.) Measured with `httpcachefs-bench
    /// fleet`: three cold hosts at once took 1.54x one host alone with 32M, 0.93x with 256M.
    static let tierReadAhead: Int64 = 256 << 20

    /// The engine's configuration.
    func configuration() throws -> CacheConfiguration {
        try resolve().cacheConfiguration
    }

    /// The fetcher's configuration (user agent, headers, proxy, TLS, timeouts).
    func fetcherConfiguration() throws -> FetcherConfiguration {
        try resolve().fetcherConfiguration
    }

    /// A logger writing `2026-11-21T12:00:00Z info <label>: message key=value` lines to stderr
    /// or `--log-file`, at `--log-level` (else `defaultLevel`). The first call also makes this
    /// the process-wide logging backend.
    func makeLogger(label: String, defaultLevel: Logger.Level = .info) -> Logger {
        let resolved = (try? resolve()) ?? ResolvedCacheOptions()
        let setup = LoggingSetup.install(sink: Self.sink(for: resolved.logFile), level: resolved.logLevel ?? defaultLevel)
        return Logger(label: label) { label in LineLogHandler(label: label, sink: setup.sink, level: setup.level) }
    }

    /// The libcurl source these options describe (a direct route to the origins, no cache).
    /// Credentials go only to `--credential-host` hosts and `--tier` origins (its users, `cache
    /// verify --remote` and the client of a daemon's proxy, were given no origin's URL).
    func makeSource(logger: Logger) throws -> CurlRangeSource {
        CurlRangeSource(configuration: try fetcherConfiguration(), logger: logger)
    }

    /// Opens the cache these options describe, over a libcurl source in Fetcher's standard layers
    /// (offline mode, every transfer counted and listed: `FetchLayers.standard`), for every
    /// command alike (mount, proxy, cat, preload, the cache commands); takes the directory lock
    /// (`CacheError.locked` names the process holding it). Call `shutdown()` when done.
    /// Loggers are `httpcachefs.cache` and `httpcachefs.fetch` (see `makeLogger` for the level).
    /// - Parameter metrics: the backend of the engine's metrics, for a process that serves
    ///   `/metrics` (a daemon's proxy); nil: only the status document's totals are kept.
    /// - Parameter credentialURLs: the URLs the user gave (mounted, listings, URL-list entries,
    ///   `cat`/`preload` arguments): their origins get `--user` and `--header` (`CredentialScope`).
    ///   - credentials: the scope to use, made by `ResolvedCacheOptions.credentialScope` (a mount
    ///     keeps it, to add a re-read URL list's origins); nil: made here.
    func openEngine(defaultLogLevel: Logger.Level = .error, metrics: PrometheusExport? = nil,
                    credentialURLs: [String] = [], credentials: CredentialScope? = nil) throws -> CacheEngine {
        var configuration = try configuration()
        try Self.checkWritable(configuration.directory)
        OpenFileLimit.raiseToHard(logger: makeLogger(label: "httpcachefs.cache", defaultLevel: defaultLogLevel))
        let resolved = try resolve()
        let fetchLogger = makeLogger(label: "httpcachefs.fetch", defaultLevel: defaultLogLevel)
        var originConfiguration = resolved.fetcherConfiguration
        if let credentials { originConfiguration.access.scope = credentials }
        // `--egress-budget`: one ledger, counted by the origin's fetcher, shown by the engine; its
        // use is kept in the cache directory (written only once the engine holds the cache's lock).
        let ledger = resolved.transfer.egressBudgets.isEmpty ? nil
            : EgressLedger(rules: resolved.transfer.egressBudgets, file: configuration.directory + "/egress-budget.json", logger: fetchLogger,
                           clock: configuration.engineClock.wall)
        originConfiguration.egressLedger = ledger
        configuration.egressLedger = ledger
        configuration.bandwidthLimit = originConfiguration.bandwidthReport
        configuration.requestRateLimit = originConfiguration.requestsPerSecond > 0 ? originConfiguration.requestsPerSecond : nil
        originConfiguration.access.scope.add(urls: credentialURLs)
        let origin = CurlRangeSource(configuration: originConfiguration, logger: fetchLogger)
        // With `--tier`, a second source talks to the tier nodes (no retries, short timeouts: the
        // next node or the origin is the retry), and wraps the origin's: a SwiftNIO client on the
        // daemon's event loops (a proxied miss stays on its loop), or libcurl for what that client
        // does not do (TLS nodes, proxies, netrc).
        let tiers = resolved.transfer.tiers
        let tierConfiguration = resolved.tierFetcherConfiguration
        let tier: (source: RangeSource, shutdown: @Sendable () -> Void)?
        if tiers.isEmpty {
            tier = nil
        } else if NodeRangeSource.canServe(nodes: tiers.flatMap(\.nodes), configuration: tierConfiguration) {
            let nodes = NodeRangeSource(configuration: tierConfiguration, group: DaemonLoops.shared, logger: fetchLogger)
            tier = (nodes, { nodes.shutdown() })
        } else {
            let curl = CurlRangeSource(configuration: tierConfiguration, logger: fetchLogger)
            tier = (curl, { curl.shutdown() })
        }
        let clock = tierConfiguration.clock
        let source: RangeSource = tier.map {
            TierRangeSource(origin: origin, tier: $0.source, tiers: tiers, state: TierState(clock: { clock.uptime }), logger: fetchLogger)
        } ?? origin
        let shutdownSources: @Sendable () -> Void = { origin.shutdown(); tier?.shutdown() }
        do {
            return try CacheEngine(configuration: configuration, source: source,
                                   logger: makeLogger(label: "httpcachefs.cache", defaultLevel: defaultLogLevel),
                                   metricsFactory: metrics?.factory ?? NOOPMetricsHandler.instance,
                                   layers: FetchLayers.standard(), afterShutdown: { shutdownSources(); ledger?.save() })
        } catch {
            shutdownSources()
            throw error
        }
    }

    private static func sink(for logFile: String?) -> LogSink {
        guard let logFile else { return .standardError }
        do { return try LogSink.file(logFile) } catch {
            ErrorReporting.printWarning("\(error); logging to stderr instead")
            return .standardError
        }
    }

    /// How a message names the default cache directory: by the environment variable it came
    /// from, if any (`CacheConfiguration.defaultDirectory`), so a bad value can be found.
    static func defaultDirectorySource(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let dir = environment["HTTPCACHEFS_CACHE_DIR"], !dir.isEmpty { return "$HTTPCACHEFS_CACHE_DIR from the environment" }
        if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty { return "the default cache directory ($XDG_CACHE_HOME from the environment)" }
        return "the default cache directory"
    }

    /// The cache directory, or the nearest part of its path that exists, must be a directory
    /// (the cache creates the rest): a file there would otherwise surface as an error of
    /// Foundation's naming no path ("NSCocoaErrorDomain error 512").
    static func checkCacheDirectory(_ path: String, option: String) throws {
        var probe = URL(fileURLWithPath: path).standardizedFileURL.path
        while true {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: probe, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else {
                    if probe == URL(fileURLWithPath: path).standardizedFileURL.path {
                        throw UsageError("cache directory \(probe) for \(option) is a file, not a directory: give a directory (it is created if missing)")
                    }
                    throw UsageError("cannot create cache directory \(path) for \(option): \(probe) is a file, not a directory")
                }
                return
            }
            let parent = (probe as NSString).deletingLastPathComponent
            if parent == probe || parent.isEmpty { return }
            probe = parent
        }
    }

    /// A cache this process writes must be writable by its user: an existing directory of
    /// another's (root's `/var/cache/httpcachefs`) is said to be so, not "cannot create".
    static func checkWritable(_ path: String) throws {
        var probe = URL(fileURLWithPath: path).standardizedFileURL.path
        while access(probe, F_OK) != 0 {
            let parent = (probe as NSString).deletingLastPathComponent
            if parent == probe || parent.isEmpty { return }
            probe = parent
        }
        guard access(probe, W_OK | X_OK) != 0 else { return }
        var st = stat()
        let owner = stat(probe, &st) == 0 ? (getpwuid(st.st_uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(st.st_uid)") : "?"
        let mode = String(st.st_mode & 0o777, radix: 8)
        let other = "give one of your own with --cache-dir (the default for you is ~/.cache/httpcachefs)"
        if probe == URL(fileURLWithPath: path).standardizedFileURL.path {
            throw CommandFailure("cache directory \(probe) exists but is not writable by you (owner \(owner), mode 0\(mode)): \(other)")
        }
        throw CommandFailure("cannot create cache directory \(path): \(probe) is not writable by you (owner \(owner), mode 0\(mode)); \(other)")
    }

    static func parseLevel(_ text: String, option: String) throws -> Logger.Level {
        let t = text.trimmingCharacters(in: .whitespaces).lowercased()
        if t == "warn" { return .warning }
        guard let level = Logger.Level(rawValue: t) else {
            throw UsageError("invalid log level '\(text)' for \(option): expected trace, debug, info, notice, warning, error or critical")
        }
        return level
    }

    static func checkProxy(_ text: String, option: String) throws -> String {
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let c = URLComponents(string: withScheme), let host = c.host, !host.isEmpty,
              let scheme = c.scheme?.lowercased(),
              ["http", "https", "socks4", "socks4a", "socks5", "socks5h"].contains(scheme) else {
            throw UsageError("invalid proxy '\(text)' for \(option): expected a URL like http://host:3128 or socks5h://host:1080")
        }
        return text
    }
}

/// `CacheOptions` after merging flags, config file and defaults.
struct ResolvedCacheOptions: Equatable {
    var directory = CacheConfiguration.defaultDirectory
    var capacity = CacheConfiguration.defaultCapacity
    var sliceSize = CacheConfiguration.defaultSliceSize
    var revalidateAfter: TimeInterval = 600
    var readTimeout: TimeInterval = 60
    var ignoredQueryNames: [String] = []
    /// `Name: value` lines, config file first, then the command line.
    var headers: [String] = []
    var upstreamProxy: String?
    var insecure = false
    /// `--ignore-etag`.
    var ignoreETag = false
    /// `--allow-host` patterns: origins the proxy serves; exact ones also open refused addresses.
    var allowedHosts: [String] = []
    /// nil: the command's own default.
    var logLevel: Logger.Level?
    var logFile: String?
    /// The config file that was read, if any.
    var configFile: String?
    /// Its settings, for the options of a command's own groups (`ProxyOptions`, `mount`'s).
    var config: ConfigFile?
    /// `OriginOptions` and `CacheLimitOptions`.
    var userAgent = Version.userAgent
    var access = OriginAccess()
    /// `--credential-host` patterns (`OriginOptions`).
    var credentialHosts: [String] = []
    var maxAge: TimeInterval?
    var maxReadAhead = CacheConfiguration.defaultMaxReadAhead
    /// `--scan-share` in bytes; nil: the default share of the cap.
    var scanShare: Int64?
    /// `--entry-memory` in bytes.
    var entryMemory = CacheConfiguration.defaultEntryMemoryBudget
    var transfer = TransferOptions.Resolved()
    /// Where s3:// URLs' buckets are and the keys their requests are signed with (`S3Options`).
    var s3: S3Endpoint?
    /// Why the AWS environment or profile could not be used, if it could not.
    var s3Problem: String?

    /// The S3 settings, for a command given s3:// URLs: why not, if they cannot be used.
    func s3Endpoint() throws -> S3Endpoint {
        guard var s3 else { throw UsageError(s3Problem ?? "no S3 settings") }
        // A profile's credential_process runs here, for a command given s3:// URLs only.
        if s3.credentials == nil, let source = s3.credentialSource, source.hasPrefix("credential_process ") {
            s3.credentials = try S3CredentialProcess.run(String(source.dropFirst("credential_process ".count))).credentials
        }
        return s3
    }

    var cacheConfiguration: CacheConfiguration {
        var c = CacheConfiguration(directory: directory, capacity: capacity, sliceSize: sliceSize,
                                   revalidateAfter: revalidateAfter, readTimeout: readTimeout,
                                   keyRules: KeyRules(ignoredQueryNames: Set(ignoredQueryNames)),
                                   engineClock: .system)   // the machine's clocks and the process's timer thread, given here
        c.maxAge = maxAge
        // A bucket's bytes are its keys' (`S3Buckets.credentialIdentity`).
        c.keyRules.s3Buckets = .process
        c.scanShare = scanShare
        c.entryMemoryBudget = entryMemory
        // Bytes fetched with credentials are served only to requests with the same ones.
        if let user = access.user { c.keyRules.sharedLogin = "user \(user):\(access.password?.value ?? "")" }
        if let netrc = access.netrcFile {
            c.keyRules.netrcFile = netrc
            c.keyRules.netrcHosts = Self.netrcHosts(netrc)
        }
        c.keyRules.sharedCredentials = headers.filter {
            let name = $0.split(separator: ":", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces).lowercased()
            return name == "authorization" || name == "cookie"
        }.map { "header \($0)" }
        c.ignoreETag = ignoreETag
        c.maxReadAhead = maxReadAhead
        c.initialReadAhead = min(c.initialReadAhead, maxReadAhead)
        transfer.apply(to: &c)
        return c
    }

    /// The hosts a netrc file has a login for (`machine NAME`), "*" for its `default` entry.
    static func netrcHosts(_ path: String) -> Set<String> {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
        var hosts = Set<String>()
        for (i, w) in words.enumerated() {
            if w == "machine", i + 1 < words.count { hosts.insert(words[i + 1].lowercased()) }
            if w == "default" { hosts.insert("*") }
        }
        return hosts
    }

    var fetcherConfiguration: FetcherConfiguration {
        var c = FetcherConfiguration(clock: .system, userAgent: userAgent, extraHeaders: headers,
                                     upstreamProxy: upstreamProxy, insecure: insecure,
                                     addressPolicy: AddressPolicy.standard.allowing(
                                         hosts: allowedHosts.compactMap { HostPattern($0).exactHost }))
        // A read fails after `readTimeout` anyway; a connection or transfer that cannot help it
        // within that time should not linger either.
        c.connectTimeout = min(c.connectTimeout, readTimeout)
        c.lowSpeedTime = max(1, min(c.lowSpeedTime, readTimeout))
        c.access = access
        c.access.scope = credentialScope()
        c.allowedHosts = allowedHosts.map(HostPattern.init)
        c.via = LoopMarker.via
        // Each bucket signed with the keys of the command or mount that named it (`S3Buckets`).
        c.s3Buckets = .process
        transfer.apply(to: &c)
        return c
    }

    /// Where credentials go: the hosts named (`--credential-host`), the tiers' origins, and the
    /// origins of `urls` (a command adds those of the URLs it was given).
    func credentialScope(urls: [String] = []) -> CredentialScope {
        let scope = CredentialScope(urls: urls, hosts: credentialHosts.map(HostPattern.init))
        scope.add(origins: transfer.tiers.map { URLOrigin(scheme: $0.scheme, host: $0.host, port: $0.port) })
        return scope
    }

    /// For the cache tier's nodes (`FetcherConfiguration.forTierNodes`).
    var tierFetcherConfiguration: FetcherConfiguration { fetcherConfiguration.forTierNodes() }
}
