import ArgumentParser
import CacheCore
import Fetcher
import Foundation
import FuseMount
import Logging
import Proxy
import Settings

/// What every mountpoint of one `mount` daemon shares (its engine, cache options, proxy,
/// credential scope) and the control requests that act on its mountpoints:
///
/// - `mount?arg=…&path=MOUNTPOINT`: a later `mount` on the same cache (`MountJoin`) hands over
///   its arguments; they are parsed here as that command's, their cache-wide options checked
///   against this daemon's (`conflicts`), and the mountpoint started with its own tree and mount
///   options on this engine. The answer's lines: notes (`note: …`, the mount check's warnings),
///   then `mounted …`. A refusal is one line saying what runs and what to do.
/// - `unmount?path=MOUNTPOINT`: that mountpoint stops as on SIGTERM (`GracefulStop`); the
///   attached `mount --foreground` of a systemd instance sends it when stopped.
/// - `refresh?mount=MOUNTPOINT&path=P`: the listings of that mountpoint.
/// - `s3-key?url=U`: `none` when no mountpoint named the bucket of `U`, else `key\tKEY`, the
///   cache key the daemon reads it under (`DaemonBucketCheck`).
///
/// Control requests run as tasks; the blocking parts (mounting) go to the blocking pool.
final class MountHost: Sendable {
    let engine: CacheEngine
    /// The daemon's resolved options: what later mounts must agree with.
    let cache: ResolvedCacheOptions
    /// nil: the daemon runs without a proxy (then no control request arrives at all).
    let proxy: ProxyOptions.Resolved?
    let credentials: CredentialScope
    let mounts: DaemonMounts
    let logger: Logger

    init(engine: CacheEngine, cache: ResolvedCacheOptions, proxy: ProxyOptions.Resolved?,
         credentials: CredentialScope, mounts: DaemonMounts, logger: Logger) {
        self.engine = engine
        self.cache = cache
        self.proxy = proxy
        self.credentials = credentials
        self.mounts = mounts
        self.logger = logger
    }

    func control(_ action: String, query: [URLQueryItem]) async -> ControlAnswer {
        let path = query.first { $0.name == "path" }?.value
        switch action {
        case "mount":
            guard let path, path.hasPrefix("/") else { return ControlAnswer(status: 400, text: "mount needs path=/absolute/mountpoint") }
            return await add(arguments: query.filter { $0.name == "arg" }.map { $0.value ?? "" }, at: path)
        case "unmount":
            guard let path, let mount = mounts.mount(at: path) else {
                return ControlAnswer(status: 404, text: "\(path ?? "?") is not a mountpoint of this daemon (pid \(getpid()))")
            }
            mount.stop.signal(SIGTERM)
            return ControlAnswer(status: 200, text: "unmounting \(path)")
        case "refresh":
            let at = query.first { $0.name == "mount" }?.value
            guard let mount = mounts.all.first(where: { $0.path == at }) else {
                return ControlAnswer(status: 404, text: "\(at ?? "?") is not a mountpoint of this daemon (pid \(getpid()))")
            }
            return await MountCommand.refresh(path: path, urlList: mount.urlList, fs: mount.fs, logger: logger, credentials: grant(of: mount))
        case "s3-key":
            // Which bucket an object is of, and whose keys read it here: its cache key (a keyed
            // hash of the keys' identity, no secret). `cat` and `preload` of s3:// URLs ask it.
            guard let url = query.first(where: { $0.name == "url" })?.value else { return ControlAnswer(status: 400, text: "s3-key needs url=") }
            guard S3Buckets.process.bucket(of: url) != nil else { return ControlAnswer(status: 200, text: "none") }
            do { return ControlAnswer(status: 200, text: "key\t" + (try engine.key(for: url)).string) } catch {
                return ControlAnswer(status: 400, text: "\(error)")
            }
        default:
            return ControlAnswer(status: 404, text: "unknown mount action '\(action)'")
        }
    }

    /// A refresh that names no mountpoint (SIGHUP; `refresh` from an older version): with one
    /// mountpoint, that one under `path`; with several, every one of them (a path inside "the
    /// mount" cannot say which).
    func refresh(path: String?, why: String = "refresh") async -> ControlAnswer {
        let all = mounts.all
        guard !all.isEmpty else { return ControlAnswer(status: 503, text: "the mount is not ready yet") }
        if all.count == 1 {
            return await MountCommand.refresh(path: path, urlList: all[0].urlList, fs: all[0].fs, logger: logger, why: why, credentials: grant(of: all[0]))
        }
        var status = 200
        var lines: [String] = []
        for mount in all {
            let answer = await MountCommand.refresh(path: nil, urlList: mount.urlList, fs: mount.fs, logger: logger, why: why, credentials: grant(of: mount))
            if answer.status != 200 { status = answer.status }
            lines += answer.text.split(separator: "\n").map { "\(mount.path): \($0)" }
        }
        return ControlAnswer(status: status, text: lines.joined(separator: "\n"))
    }

    /// How `mount` names its origins: the daemon's own mountpoint with its credentials.
    private func grant(of mount: DaemonMounts.Mount) -> CredentialScope.Grant {
        mount.credentials ?? credentials.grant(headers: true, netrc: true)
    }

    /// Whether a joining mount (options `mount`) was given the daemon's (`daemon`) credentials:
    /// its `--header`s and login (`headers`), its netrc file (`netrc`). Only those it was given
    /// go to its origins: one left at its default follows the daemon's cache-wide options
    /// (`conflicts`), not its credentials: mount A's API key must never reach the host of a
    /// mount B that named none. Pure.
    static func credentialsGiven(daemon: ResolvedCacheOptions, mount: ResolvedCacheOptions) -> (headers: Bool, netrc: Bool) {
        let headers = mount.headers == daemon.headers && mount.access.user == daemon.access.user
            && mount.access.password == daemon.access.password
        return (headers, mount.access.netrcFile == daemon.access.netrcFile)
    }

    /// What the joining command is told when the daemon has credentials it was not given: its
    /// origins go without them (a 401 would otherwise be the first sign). nil: nothing withheld.
    static func withheldNote(daemon: ResolvedCacheOptions, given: (headers: Bool, netrc: Bool)) -> String? {
        var withheld: [String] = []
        if !given.headers, !daemon.headers.isEmpty { withheld.append("--header") }
        if !given.headers, daemon.access.user != nil { withheld.append("--user") }
        if !given.netrc, daemon.access.netrcFile != nil { withheld.append("netrc file") }
        guard !withheld.isEmpty else { return nil }
        return "this mount was not given the daemon's \(withheld.joined(separator: ", ")): its origins go without them "
            + "(unless another mountpoint given them names the same origin); give the same options to send them"
    }

    /// The `mount` request: `arguments` are the later command's (after `mount`), `path` its
    /// mountpoint, absolute.
    func add(arguments: [String], at path: String) async -> ControlAnswer {
        let notes = LockedValue<[String]>([])
        // Its buckets (and keys) are the daemon's while the mountpoint is: a refused mount's leave.
        var bucketsNamed = false
        do {
            var command: MountCommand
            do { command = try MountCommand.parse(arguments) } catch is ExitCode {
                // A value the options' own check refused: it printed the reason to the log.
                throw CommandFailure("the daemon (pid \(getpid())) could not use these arguments (its log says why): give this mount its own --cache-dir, or restart the daemon")
            } catch {
                throw UsageError(MountCommand.message(for: error).split(separator: "\n").first.map(String.init) ?? "bad arguments")
            }
            command.mountpoint = path
            // The cache is this daemon's (the command found it holding it), whatever this
            // process's environment would make of the arguments.
            command.cache.cacheDirectory = cache.directory
            let resolved = try command.cache.resolve()
            let settings = try command.settings(file: resolved.config)
            let proxyResolved = try command.proxy.resolve(file: resolved.config)
            if let conflict = Self.conflicts(daemon: (cache, proxy), mount: (resolved, settings.noProxy ? nil : proxyResolved)).first {
                throw CommandFailure("the daemon (pid \(getpid())) serving cache \(Mountpoint.absolute(cache.directory)) runs with \(conflict.daemon); this mount asks for \(conflict.mount): "
                    + "\(Self.remedy(for: conflict.option, arguments: arguments, file: resolved.config)) (or give the same value) to add \(path) to it, or give this mount its own --cache-dir")
            }
            if settings.rclone.rc != nil || settings.rclone.pollInterval != nil {
                notes.withLock { $0.append("--rc and --poll-interval are the running daemon's (pid \(getpid())): its own remote control and polling, if any, serve this mountpoint too") }
            }
            bucketsNamed = true
            let tree = try command.buildTree(settings, bucketHolder: path)
            let owned = try command.owner.resolve(fuseOptions: command.fuseOptions.flatMap(MountOptions.splitOptionList), configFile: command.cache.configFile)
            let prepared = try await onBlockingPool { try Mountpoint.prepare(path) }
            if let note = prepared.cleanedStaleMount { notes.withLock { $0.append("warning: " + note) } }
            guard mounts.mount(at: prepared.path) == nil else {
                throw CommandFailure("\(prepared.path) is already a mountpoint of this daemon: 'httpcachefs unmount \(prepared.path)' first")
            }
            // Its origins get the daemon's credentials only if it was given them (`credentialsGiven`).
            let given = Self.credentialsGiven(daemon: cache, mount: resolved)
            let grant = credentials.grant(headers: given.headers, netrc: given.netrc)
            grant.add(urls: tree.files.map(\.url) + tree.indexes.map(\.url))
            if let note = Self.withheldNote(daemon: cache, given: given) { notes.withLock { $0.append(note) } }
            var mount = try await command.startMountpoint(at: prepared.path, settings: settings, tree: tree, owned: owned, host: self) { line in
                notes.withLock { $0.append(line) }
            }
            mount.arguments = ArgumentMasking.masked(arguments)   // listed in the runtime file
            mount.credentials = grant
            mount.bucketHolder = path
            guard mounts.add(mount) else {
                mount.fs.unmount()
                throw CommandFailure("the daemon (pid \(getpid())) is ending (its last mountpoint just went): run the mount again, it then starts its own")
            }
            let lines = notes.withLock { $0 }.map { "note: " + $0 }
                + ["mounted \(prepared.path) on the daemon (pid \(getpid())) serving cache \(Mountpoint.absolute(cache.directory)), with \(mounts.all.count) mountpoints now"]
            return ControlAnswer(status: 200, text: lines.joined(separator: "\n"))
        } catch {
            if bucketsNamed, mounts.mount(at: path) == nil { DaemonMounts.releaseBuckets(of: path) }
            let message = ErrorReporting.message(for: error)
            logger.error("mount of \(path) refused: \(message)")
            let lines = notes.withLock { $0 }.map { "note: " + $0 } + [message.replacingOccurrences(of: "\n", with: " ")]
            return ControlAnswer(status: 409, text: lines.joined(separator: "\n"))
        }
    }

    /// What to drop to end a conflict, named where the mount's value came from: its
    /// command line (`drop --proxy-port`), the config file and its line (`drop 'proxy-port' at
    /// ~/.config/httpcachefs/config:3`), both (the flag wins, the line would then apply), or
    /// `$NETRC` for the netrc file. `option` is a `Conflict.option`: one flag, or a group naming
    /// its flags. Pure.
    static func remedy(for option: String, arguments: [String], file: ConfigFile?) -> String {
        let flags = option.split(whereSeparator: { " (),".contains($0) }).filter { $0.hasPrefix("--") }.map(String.init)
        let words = arguments.prefix { $0 != "--" }
        var places: [String] = []
        for flag in flags where words.contains(where: { $0 == flag || $0.hasPrefix(flag + "=") }) { places.append(flag) }
        for flag in flags {
            let key = String(flag.dropFirst(2))
            if let file, file[key] != nil || !file.list(key).isEmpty { places.append(file.describe(key) + " in the config file") }
        }
        if places.isEmpty, flags.contains("--netrc-file"), let env = ProcessInfo.processInfo.environment["NETRC"], !env.isEmpty {
            places.append("$NETRC from the environment")
        }
        return places.isEmpty ? "drop \(option)" : "drop " + places.joined(separator: " and ")
    }

    struct Conflict: Equatable {
        var option: String
        /// How the daemon's and the mount's values are named ("--cache-size 5.0 GiB").
        var daemon: String
        var mount: String
    }

    /// The cache-wide and daemon-wide options (cap, slices, timeouts, origin access, transfer,
    /// proxy) where a later mount asks for something else than the running daemon: a value given
    /// (flag or config file) that differs from the daemon's. A value left at its default follows
    /// the daemon. Secrets (headers, tokens, logins, upstream proxy) are named, never shown.
    typealias Sides = (cache: ResolvedCacheOptions, proxy: ProxyOptions.Resolved?)

    static func conflicts(daemon: Sides, mount: Sides) -> [Conflict] {
        typealias Item = (option: String, value: (Sides) -> String, secret: Bool)
        func bytes(_ n: Int64) -> String { Format.bytes(n) }
        let items: [Item] = [
            ("--cache-size", { bytes($0.0.capacity) }, false),
            ("--slice-size", { bytes($0.0.sliceSize) }, false),
            ("--revalidate-after", { Format.duration($0.0.revalidateAfter) }, false),
            ("--read-timeout", { Format.duration($0.0.readTimeout) }, false),
            ("--ignore-query", { $0.0.ignoredQueryNames.joined(separator: ",") }, false),
            ("--header", { $0.0.headers.joined(separator: "\n") }, true),
            ("--upstream-proxy", { $0.0.upstreamProxy ?? "" }, true),
            ("--insecure", { $0.0.insecure ? "on" : "off" }, false),
            ("--ignore-etag", { $0.0.ignoreETag ? "on" : "off" }, false),
            ("--allow-host", { $0.0.allowedHosts.joined(separator: ",") }, false),
            ("--user-agent", { $0.0.userAgent }, false),
            ("origin login options (--user, --password-file, --netrc-file, --ca-certificate)", { "\($0.0.access)" }, true),
            ("--credential-host", { $0.0.credentialHosts.joined(separator: ",") }, false),
            ("--cache-max-age", { $0.0.maxAge.map(Format.duration) ?? "" }, false),
            ("--read-ahead-max", { bytes($0.0.maxReadAhead) }, false),
            ("--scan-share", { $0.0.scanShare.map(bytes) ?? "" }, false),
            ("--entry-memory", { bytes($0.0.entryMemory) }, false),
            ("transfer options (--max-connections, --max-connections-per-host, --tpslimit, --egress-budget, --bwlimit, --tier)", { "\($0.0.transfer)" }, false),
            ("--log-level", { $0.0.logLevel.map { "\($0)" } ?? "" }, false),
            ("--log-file", { $0.0.logFile ?? "" }, false),
            ("--no-proxy", { $0.1 == nil ? "on" : "off" }, false),
            ("--proxy-port", { $0.1.map { String($0.port) } ?? "" }, false),
            ("--bind", { $0.1?.bindAddress ?? "" }, false),
            ("--token", { $0.1?.token ?? "" }, true),
            ("--proxy-name", { $0.1?.proxyNames.joined(separator: ",") ?? "" }, false),
        ]
        let defaults: Sides = (ResolvedCacheOptions(), ProxyOptions.Resolved())
        var found: [Conflict] = []
        for item in items {
            let running = item.value(daemon), asked = item.value(mount)
            guard asked != running, asked != item.value(defaults) else { continue }
            // Without a proxy on one side, the proxy's own options say nothing more.
            if ["--proxy-port", "--bind", "--token", "--proxy-name"].contains(item.option), daemon.1 == nil || mount.1 == nil { continue }
            func shown(_ v: String) -> String {
                if item.secret { return "another " + item.option }
                if item.option.hasPrefix("transfer") { return item.option + " of its own" }
                if item.option == "--no-proxy" { return v == "on" ? "--no-proxy" : "a proxy" }
                return "\(item.option) \(v.isEmpty ? "(none)" : v)"
            }
            found.append(Conflict(option: item.option,
                                  daemon: item.secret ? "its own \(item.option)" : shown(running), mount: shown(asked)))
        }
        return found
    }
}
