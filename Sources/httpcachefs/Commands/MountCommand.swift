import ArgumentParser
import CacheCore
import Dispatch
import Fetcher
import Foundation
import FuseMount
import Logging
import MetricsExport
import Proxy
import Settings

/// `httpcachefs mount MOUNTPOINT [URL | NAME=URL]... [--url-list FILE] [--index URL]... [--by-url]`:
/// remote files as a read-only FUSE file system, served from the cache, with the local proxy
/// on the same cache.
///
/// Without `--foreground` the command re-executes itself as a daemon and returns once the mount
/// is usable (exit 0) or with the reason it is not (non-zero). The daemon logs to `--log-file`,
/// else to a log of its own per mountpoint (`defaultLogPath`).
///
/// Map of this folder (`Commands/`): one file per subcommand (`HTTPCacheFS.swift`, at the root,
/// lists them).
/// - `MountCommand.swift` (this file): `mount`, and the tree it builds.
/// - `ProxyCommand.swift`: `proxy`, `ProxyOptions` (shared with `mount`: its flags and the server's start);
///   `Daemon/DaemonSignals.swift`: the stop and reload signals of both.
/// - `CatCommand.swift`, `PreloadCommand.swift`, `RefreshCommand.swift`, `StatusCommand.swift`,
///   `URLCommand.swift`, `UnmountCommand.swift`: the subcommands their names say.
/// - `CacheCommand.swift`: `cache ls/info/rm/clear`; `CacheExportCommand.swift` `cache export`;
///   `CacheVerifyCommand.swift` `cache verify`, with `DirectFetch.swift` for `--remote`.
/// Neighbours: parse through `Options/`, run through `Daemon/` (background, a held cache, control
/// requests) and `Preload/`, print through `Terminal/`; wire CacheCore, Fetcher, FuseMount and Proxy.
struct MountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount HTTP(S) URLs as read-only files, served from the cache.",
        discussion: """
            Files come from URL arguments (named after the URL's last path segment, or NAME=URL \
            where NAME may contain directories), from --url-list FILE (one 'URL' or \
            'dir/name.ext = URL' per line, '#' comments; re-read on SIGHUP), from web-server \
            directory listings (--index URL at the root, or --index DIR=URL; nginx and Apache \
            autoindex, listed lazily) and, with --by-url, from MOUNTPOINT/.url/https/HOST/PATH \
            for any URL. Files are 0444, directories 0555; sizes and dates come from the listing or \
            from Content-Length / Last-Modified. Errors: 404/410 -> ENOENT, 401/403 -> EACCES, \
            unreachable or 5xx after retries or past --read-timeout -> EIO.

            Unmount with 'httpcachefs unmount MOUNTPOINT', or SIGINT / SIGTERM to the daemon, which \
            detaches the mount at once and serves files still open until they are closed or \
            --stop-timeout passes (a second signal ends it at once; SIGHUP \
            re-reads the URL list and every listing; so does 'httpcachefs refresh'). -o takes every setting in its fstab spelling too (cache_size=20G, by_url; a typo gets 'did you mean') and passes the rest to FUSE, e.g. -o allow_other (for users \
            other than root this needs 'user_allow_other' in /etc/fuse.conf). The proxy runs on \
            --proxy-port (default 8718) unless --no-proxy; a port in use fails the mount.

            Several mounts on one cache: a mount whose cache a running mount daemon of yours \
            holds is added to that daemon (its own tree and mount options; one cap, one proxy, one \
            status page). Cache options left out follow the daemon; one given with another value \
            is refused. 'httpcachefs unmount' lets one mountpoint go; the daemon ends with its \
            last. With --foreground the command stays attached until its mountpoint goes.
            """
    )

    @Argument(help: ArgumentHelp("Directory to mount on (must exist).", valueName: "mountpoint"))
    var mountpoint: String

    @Argument(help: ArgumentHelp("Files to show at the root: URL, or NAME=URL.", valueName: "url"))
    var entries: [String] = []

    @Option(name: .customLong("url-list"), parsing: .unconditional,
            help: ArgumentHelp("File listing 'URL' or 'dir/name.ext = URL' per line ('#' comments); re-read on SIGHUP.", valueName: "file"))
    var urlList: String?

    @Option(name: .customLong("index"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("A web server's directory listing shown as a tree: URL (at the root) or DIR=URL; repeatable.", valueName: "url"))
    var indexes: [String] = []

    @Option(name: [.customLong("index-ttl"), .customLong("dir-cache-time")], parsing: .unconditional,
            help: ArgumentHelp("How long a directory listing is used before it is fetched again; past it, the listing is served at once and refreshed in the background (default: 1m). rclone name: --dir-cache-time.", valueName: "duration"))
    var indexTTL: String?

    @Option(name: .customLong("listing-memory"), parsing: .unconditional,
            help: ArgumentHelp("Memory all --index listings together may take, about 190 bytes per entry (more for names over 15 bytes); a listing past it fails; one page may take half of it, at least 64 MiB (default: 256M, over a million names).", valueName: "size"))
    var listingMemory: String?

    @Option(name: .customLong("include"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("rclone name: show only listed entries matching this glob, as rclone's filter rules read it (*.mkv, /Films/**, {a,b}); repeatable.", valueName: "glob"))
    var includes: [String] = []

    @Option(name: .customLong("exclude"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("rclone name: leave out listed entries matching this glob (*.nfo, Extras/ for a folder and all in it); repeatable. Includes are tried first, then excludes, as rclone does.", valueName: "glob"))
    var excludes: [String] = []

    @Flag(name: .customLong("by-url"), help: "Resolve any URL under MOUNTPOINT/.url/https/HOST/PATH (a query may end the last name).")
    var byURL = false

    @Flag(name: [.customShort("f"), .customLong("foreground")], help: "Stay attached and log to stderr instead of going to the background.")
    var foreground = false

    @Flag(name: .customLong("daemon"), help: "rclone name: go to the background, which is the default.")
    var daemon = false

    @Option(name: .customShort("o", allowingJoined: true),
            help: ArgumentHelp("FUSE mount options, comma-separated (e.g. allow_other); repeatable.", valueName: "options"))
    var fuseOptions: [String] = []

    @Flag(name: .customLong("no-proxy"), help: "Do not run the local HTTP proxy alongside the mount.")
    var noProxy = false

    @Flag(name: .customLong("no-passthrough"),
          help: "Read fully cached files through the daemon too, not by the kernel from the cache's files (FUSE passthrough, used where the kernel allows).")
    var noPassthrough = false

    @Option(name: .customLong("page-cache-fill"), parsing: .unconditional,
            help: ArgumentHelp("How far ahead of a program reading a cached file in order the daemon puts the file's bytes into the kernel's page cache, so its reads need no round trip to the daemon (e.g. 16M); 0 turns it off (default: 0, off: on current kernels the kernel's read-ahead asks for the stored pages anyway).", valueName: "size"))
    var pageCacheFill: String?

    @Option(name: .customLong("fuse-spin"), parsing: .unconditional,
            help: ArgumentHelp("How long the FUSE loop stays awake for the next request after one it answered itself inside a burst (a cat, a scan, cached reads), rather than sleep and be woken: fewer cross-CPU wake-ups, at most this much CPU per request (default: 50us; 0: always sleep; never on one CPU).", valueName: "duration"))
    var fuseSpin: String?

    @Option(name: .customLong("stop-timeout"), parsing: .unconditional,
            help: ArgumentHelp("On SIGTERM or SIGINT the mount is detached at once (nothing new opens) and files still open are served until they are closed or this long has passed (default: 10s).", valueName: "duration"))
    var stopTimeout: String?

    @Option(name: .customLong("scanner"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Programs that scan a media library, by process name, comma-separated (repeatable); added to ffprobe, mediainfo, exiftool, minidlnad, gerbera, Plex Media Scanner: they read with direct I/O, get read-ahead only as they read on and only what players leave of the link.", valueName: "name"))
    var scanners: [String] = []

    @Option(name: .customLong("background-reader"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Programs whose reads only take what the link has left (thumbnail or subtitle extractors), by process name, comma-separated (repeatable); added to ffmpegthumbnailer. They read with direct I/O and get read-ahead only as they read on.", valueName: "name"))
    var backgroundReaders: [String] = []

    @Option(name: .customLong("on-change"), parsing: .unconditional,
            help: ArgumentHelp("A shell command run once after a refresh (timed, 'httpcachefs refresh', SIGHUP) finds files added, removed or changed, with their paths on its standard input, one a line (e.g. to tell Jellyfin or Plex to rescan); ended after 60s.", valueName: "command"))
    var onChange: String?

    @Flag(name: .customLong("xattr-pins"),
          help: "Let the mount's owner (the user running it) and root pin a file with 'setfattr -n user.httpcachefs.pin -v 1 FILE' (head and tail, warmed; 'setfattr -x' unpins); anyone else gets EPERM. The kernel then sees the mount as writable and the owner's files as 0644; every write is still refused (EROFS).")
    var xattrPins = false

    @OptionGroup var proxy: ProxyOptions
    @OptionGroup(title: "rclone's mount options") var rclone: RcloneOptions
    @OptionGroup(title: "Owner and permissions") var owner: MountOwnerOptions
    @OptionGroup var cache: CacheOptions

    /// The mount's own settings: flags over the config file (`setting`), checked.
    struct Settings {
        var urlList: String?
        var indexes: [String]
        var indexTTL: TimeInterval?
        var listingMemory = MountOptions.defaultListingBudget
        var byURL: Bool
        var noProxy: Bool
        var noPassthrough: Bool
        var stopTimeout: TimeInterval = 10
        var pageCacheFill = MountOptions.defaultPageCacheFill
        var fuseSpin = LoopSpin.defaultWindow
        var readerClasses = ReaderClassTable.builtIn
        var listingFilter: ListingFilter?
        var xattrPins = false
        var onChange: String?
        var rclone = RcloneOptions.Resolved()
    }

    func settings(file: ConfigFile?) throws -> Settings {
        func flag(_ given: Bool, _ key: String) throws -> Bool {
            if given { return true }
            guard let file, let value = file[key] else { return false }
            return try BoolValue.parse(value, option: file.describe(key))
        }
        var s = Settings(urlList: setting(urlList, "url-list", in: file)?.text,
                         indexes: indexes.isEmpty ? (file?.list("index") ?? []) : indexes,
                         byURL: try flag(byURL, "by-url"), noProxy: try flag(noProxy, "no-proxy"),
                         noPassthrough: try flag(noPassthrough, "no-passthrough"))
        if let v = setting(indexTTL, "index-ttl", in: file) { s.indexTTL = try DurationValue.parse(v.text, option: v.option) }
        if let v = setting(listingMemory, "listing-memory", in: file) {
            let size = try ByteSize.parse(v.text, option: v.option)
            guard size >= 1 << 20 else { throw UsageError("listing memory '\(v.text)' for \(v.option) is too small: at least 1M") }
            s.listingMemory = size
        }
        if let v = setting(stopTimeout, "stop-timeout", in: file) { s.stopTimeout = try DurationValue.parse(v.text, option: v.option) }
        if let v = setting(pageCacheFill, "page-cache-fill", in: file) {
            let size = try ByteSize.parse(v.text, option: v.option)
            guard size <= 1 << 30 else { throw UsageError("page cache fill '\(v.text)' for \(v.option) is too large: at most 1G") }
            s.pageCacheFill = size
        }
        if let v = setting(fuseSpin, "fuse-spin", in: file) {
            let seconds = try DurationValue.parse(v.text, option: v.option)
            guard seconds <= 0.001 else { throw UsageError("FUSE spin '\(v.text)' for \(v.option) is too long: at most 1ms (a longer wait is better spent asleep)") }
            s.fuseSpin = UInt64((seconds * 1e9).rounded())
        }
        for (given, key, readerClass) in [(scanners, "scanner", ReaderClass.scanner), (backgroundReaders, "background-reader", .background)] {
            // Flags replace the config file's lines, as for every list; each line is named in errors.
            let texts = given.isEmpty ? (file?.list(key) ?? []) : given
            for (i, text) in texts.enumerated() {
                let option = given.isEmpty ? (file.map { $0.describe(key, item: i) } ?? "--\(key)") : "--\(key)"
                do { try s.readerClasses.add(text, as: readerClass, option: option) } catch let e as ReaderClassError {
                    throw UsageError(e.message)
                }
            }
        }
        do {
            s.listingFilter = try ListingFilter(include: includes.isEmpty ? (file?.list("include") ?? []) : includes,
                                                exclude: excludes.isEmpty ? (file?.list("exclude") ?? []) : excludes)
        } catch {
            throw UsageError("bad --include/--exclude: \(error)")
        }
        s.xattrPins = try flag(xattrPins, "xattr-pins")
        if let v = setting(onChange, "on-change", in: file) {
            do { try ChangeCommand.check(v.text, option: v.option) } catch let e as ChangeCommandError { throw UsageError(e.message) }
            s.onChange = v.text
        }
        s.rclone = try rclone.resolve(file: file)
        if entries.isEmpty && s.urlList == nil && s.indexes.isEmpty && !s.byURL {
            throw UsageError("nothing to mount on \(mountpoint): give URLs, --url-list FILE, --index URL or --by-url (or url-list / index in the config file)")
        }
        return s
    }

    func run() async throws {
        let ready = Daemon.readyChannel()  // set when this process is the daemon of a background mount
        try await runReportingErrors {
            do {
                try await mount(ready: ready)
            } catch {
                // The waiting parent prints this line; the daemon's stderr is only the log file.
                ready?.fail(ErrorReporting.message(for: error))
                throw error
            }
        }
    }

    private func mount(ready: ReadyChannel?) async throws {
        let resolved = try cache.resolve()
        let settings = try settings(file: resolved.config)
        let proxyResolved = try proxy.resolve(file: resolved.config)
        let tree = try buildTree(settings, bucketHolder: Mountpoint.absolute(mountpoint))
        if daemon && foreground && ready == nil { throw UsageError("--daemon and --foreground contradict each other: give one (the background is the default)") }
        let owned = try owner.resolve(fuseOptions: fuseOptions.flatMap(MountOptions.splitOptionList), configFile: cache.configFile)
        if let rc = settings.rclone.rc, rc.user == nil, settings.noProxy {
            throw UsageError("--rc without --rc-user/--rc-pass logs in with the control key of the proxy's proxy.json, and --no-proxy runs none: give --rc-user and --rc-pass")
        }
        let prepared = try await onBlockingPool { try Mountpoint.prepare(mountpoint) }
        if ready == nil { for note in settings.rclone.notes { LogSink.standardError.write(line: "httpcachefs: note: " + note) } }

        if ready == nil, let names = try? FileManager.default.contentsOfDirectory(atPath: prepared.path), !names.isEmpty {
            ErrorReporting.printWarning("mountpoint \(prepared.path) is not empty: the mount hides its \(names.count) entr\(names.count == 1 ? "y" : "ies") until it is unmounted")
        }
        // A daemon of this user already serving this cache takes the mountpoint: one engine, one
        // cap, one proxy for every mount of the cache (`MountJoin`).
        if ready == nil, let running = MountJoin.runningDaemon(cacheDirectory: resolved.directory) {
            try await join(running, at: prepared.path, cacheDirectory: resolved.directory)
            return
        }
        if !foreground && ready == nil {
            if let note = prepared.cleanedStaleMount { ErrorReporting.printWarning(note) }
            do {
                try await daemonize(resolved: resolved)
            } catch {
                // Two mounts of one cache started at once (fstab lines at boot): the one whose
                // daemon lost the race for the lock joins the winner's.
                guard let running = try await daemonThatWonTheLock(after: error, cacheDirectory: resolved.directory) else { throw error }
                try await join(running, at: prepared.path, cacheDirectory: resolved.directory)
            }
            return
        }

        ArgumentMasking.maskOwnArguments()   // this process lives on: no password in its `ps` line
        let logger = cache.makeLogger(label: "httpcachefs.mount", defaultLevel: .info)
        if let note = prepared.cleanedStaleMount { logger.warning("\(note)") }
        let options = cache
        let metrics = PrometheusExport()   // the backend `/metrics` renders
        // The URLs given are the credential origins (a re-read URL list adds its own: `refresh`).
        let credentials = resolved.credentialScope(urls: tree.files.map(\.url) + tree.indexes.map(\.url))
        let engine: CacheEngine
        do {
            engine = try await onBlockingPool {
                try options.openEngine(defaultLogLevel: .info, metrics: metrics, credentials: credentials)
            }
        } catch {
            // `--foreground` (systemd instances started together) losing the race: join too.
            guard ready == nil, let running = try await daemonThatWonTheLock(after: error, cacheDirectory: resolved.directory) else { throw error }
            try await join(running, at: prepared.path, cacheDirectory: resolved.directory)
            return
        }
        let mounts = DaemonMounts(cacheDirectory: resolved.directory, logger: logger)
        let host = MountHost(engine: engine, cache: resolved, proxy: settings.noProxy ? nil : proxyResolved,
                             credentials: credentials, mounts: mounts, logger: logger)
        // Signals before the first mountpoint: one sent as soon as the mount shows is never lost
        // (ignored in the moment between the mount and the handler, it left the daemon running).
        let signals = DaemonSignals(
            queue: "httpcachefs.mount.signals",
            stop: { sig in mounts.stopAll(signal: sig) },
            reload: {
                Task { _ = await host.refresh(path: nil, why: "SIGHUP") }
            },
            ignoresSIGPIPE: true)
        // The proxy first: a busy port fails the mount before anything is mounted.
        var server: ProxyServer?
        var rcServer: RcServer?
        let first: DaemonMounts.Mount
        do {
            if !settings.noProxy {
                server = try await startProxy(engine: engine, metrics: metrics, cache: resolved, logger: logger,
                                              refresh: { await host.refresh(path: $0) },
                                              mounts: { await host.control($0, query: $1) })
            }
            // The remote control too: a busy --rc-addr fails the mount before anything is mounted.
            let say: @Sendable (String) -> Void = { line in
                if let ready { ready.note("httpcachefs: " + line) } else { LogSink.standardError.write(line: "httpcachefs: " + line) }
            }
            if let rc = settings.rclone.rc {
                let started = try await startRc(rc, host: host, proxy: server?.configuration, logger: logger)
                rcServer = started
                // The address it listens on, the port it chose for `--rc-addr HOST:0` included:
                // what `rclone rc --url` takes (rclone prints the same line).
                say(Self.rcServingLine(host: rc.address.host, port: started.port ?? rc.address.port))
            }
            var started = try await startMountpoint(at: prepared.path, settings: settings, tree: tree, owned: owned, host: host, tell: say)
            started.bucketHolder = Mountpoint.absolute(mountpoint)
            first = started
            _ = mounts.add(first)
        } catch {
            signals.cancel()
            let started = server, rcStarted = rcServer
            try? await onBlockingPool {
                rcStarted?.stop()
                started?.stop()
                engine.shutdown()
            }
            throw error
        }

        for note in settings.rclone.notes { logger.notice("\(note)") }
        let poll = settings.rclone.pollInterval.map { Self.poll(every: $0, host: host) }
        ready?.ready()
        SystemdNotify.send("READY=1\nSTATUS=mounted \(prepared.path)")
        await mounts.untilEmpty()   // no thread waits for the last mountpoint
        signals.cancel()
        poll?.cancel()
        rcServer?.stop()
        server?.stop()
        try await onBlockingPool { engine.shutdown() }
        logger.info("last mountpoint gone (\(first.path) was the first): daemon ends")
    }

    /// Hands this mount to `running` (`MountJoin`); with `--foreground`, stays attached until
    /// the mountpoint goes.
    private func join(_ running: MountJoin.Running, at path: String, cacheDirectory: String) async throws {
        // The buckets are signed with this mount's own keys, resolved here, in this command's
        // environment and profile (`S3Options.handOver`): the daemon's keys never go to them, nor
        // theirs to the daemon's buckets (`S3Buckets`).
        var arguments = Self.daemonArguments()
        if !S3Buckets.process.isEmpty { arguments = S3Options.handOver(try cache.resolve().s3Endpoint()) + arguments }
        let join = MountJoin(daemon: running, mountpoint: path, cacheDirectory: cacheDirectory)
        try await onBlockingPool { [arguments] in try join.add(arguments: arguments) }
        if foreground {
            ArgumentMasking.maskOwnArguments()   // it stays: no password in its `ps` line
            try await onBlockingPool { try join.stayAttached() }
        }
    }

    /// After `error`: if it was the cache's lock, held by a `mount` daemon of this user that
    /// started meanwhile, that daemon once it serves its first mountpoint; else nil.
    private func daemonThatWonTheLock(after error: Error, cacheDirectory: String) async throws -> MountJoin.Running? {
        // "… is in use by process N (…)", or "by another process" while the winner has not yet
        // written its pid.
        guard ErrorReporting.message(for: error).contains("is in use by") else { return nil }
        return try await onBlockingPool { MountJoin.waitUntilServing(cacheDirectory: cacheDirectory) }
    }

    /// This command's mountpoint on the daemon's engine (`host`): its tree checked (each problem
    /// a line to `tell`; nothing left fails), its FUSE session started on a thread of its own,
    /// usable when this returns. The caller hands it to `host.mounts`.
    func startMountpoint(at path: String, settings: Settings, tree: MountTreeSpec,
                         owned: (ownership: MountOwnership, fuseOptions: [String]), host: MountHost,
                         tell: @escaping @Sendable (String) -> Void) async throws -> DaemonMounts.Mount {
        let resolved = host.cache, engine = host.engine, logger = host.logger
        var mountOptions = MountOptions(
            revalidateAfter: resolved.revalidateAfter, listingTTL: settings.indexTTL,
            // The engine fails a read at --read-timeout; this backstop only fires if it did not.
            readDeadline: resolved.readTimeout + 5,
            fuseOptions: owned.fuseOptions)
        mountOptions.passthrough = !settings.noPassthrough
        mountOptions.pageCacheFill = settings.pageCacheFill
        mountOptions.loopSpin = settings.fuseSpin
        mountOptions.readerClasses = settings.readerClasses
        mountOptions.xattrPins = settings.xattrPins
        mountOptions.listingBudget = settings.listingMemory
        mountOptions.listingFilter = settings.listingFilter
        mountOptions.attrTimeout = settings.rclone.attrTimeout
        owned.ownership.apply(to: &mountOptions)
        let checkStarted = Date()
        let (checked, listings) = try await check(tree, engine: engine, options: mountOptions, tell: tell, logger: logger)
        let fs = FuseFileSystem(engine: engine, tree: checked, options: mountOptions, logger: logger)
        fs.seedListings(listings, at: checkStarted)
        try await onBlockingPool { try fs.start(at: path) }
        if let command = settings.onChange {
            let runner = ChangeCommand(command: command, timers: engine.configuration.engineClock.scheduler, logger: logger)
            fs.onChange { runner.run(paths: $0) }
            fs.whenEnded { runner.stop() }   // a run still under way ends with the mountpoint
        }
        logger.info("mounted \(path): \(fs.tree.files.count) files, \(fs.tree.indexes.count) indexes\(settings.byURL ? ", by-URL directory .url" : "") (cache: \(resolved.directory))")
        return DaemonMounts.Mount(path: path, fs: fs,
                                  stop: GracefulStop(fs: fs, path: path, timeout: settings.stopTimeout, logger: logger),
                                  urlList: settings.urlList.map(Mountpoint.absolute))
    }

    /// This command's arguments after `mount`, as a running daemon re-parses them: -o setting
    /// words expanded (as `daemonize` does), and `--url-list` / `--config` made absolute (the
    /// daemon works in another directory).
    static func daemonArguments() -> [String] {
        var arguments = Array(CommandLine.arguments.dropFirst())
        arguments = (try? FstabWords.expandingMountArguments(arguments)) ?? arguments
        if let at = arguments.firstIndex(of: "mount") { arguments.removeSubrange(...at) }
        var i = 0
        while i < arguments.count {
            for option in ["--url-list", "--config"] {
                if arguments[i] == option, i + 1 < arguments.count {
                    arguments[i + 1] = Mountpoint.absolute(arguments[i + 1])
                } else if arguments[i].hasPrefix(option + "=") {
                    arguments[i] = option + "=" + Mountpoint.absolute(String(arguments[i].dropFirst(option.count + 1)))
                }
            }
            i += 1
        }
        return arguments
    }

    /// `MountCheck` on every URL and listing given: each problem is one line on the terminal (the
    /// waiting parent prints what the daemon reports), failed entries are left out, and a mount
    /// with nothing left fails. A tree with the by-URL directory always has something to mount.
    /// Also the listings the check parsed, for the mount to take as its first ones.
    private func check(_ tree: MountTreeSpec, engine: CacheEngine, options: MountOptions,
                       tell: (String) -> Void, logger: Logger) async throws -> (MountTreeSpec, [String: ListingFetch.Listing]) {
        let total = tree.files.count + tree.indexes.count
        guard total > 0 else { return (tree, [:]) }
        var mountCheck = MountCheck(engine: engine, listingTTL: options.listingTTL)
        mountCheck.maxListingEntries = options.maxListingEntries   // as the mount's own fetches
        mountCheck.maxListingBytes = options.maxListingBytes
        let results = await mountCheck.run(tree)
        let listings = mountCheck.listings.withLock { $0 }
        var failed = 0
        for (_, verdict) in results {
            switch verdict {
            case .ok: break
            case let .warning(text):
                logger.warning("\(text)")
                tell("warning: " + text)
            case let .failed(text):
                failed += 1
                logger.error("\(text)")
                tell(text)
            }
        }
        guard failed > 0 else { return (tree, listings) }
        if failed == total && !tree.byURL {
            throw CommandFailure("nothing to mount: \(total == 1 ? "the URL given failed" : "all \(total) URLs and listings given failed")")
        }
        let note = "mounting \(total - failed) of \(total) entries; \(failed) failed (above)"
        logger.warning("\(note)")
        tell("warning: " + note)
        return (MountCheck.keeping(tree, results), listings)
    }

    /// Arguments, URL list and indexes as one checked tree (clashes are errors naming both sides).
    /// - Parameter bucketHolder: the mountpoint the buckets named are registered for, which
    ///   takes them out of the process when it ends (`DaemonMounts`); nil: for the process's life.
    func buildTree(_ settings: Settings, bucketHolder: String? = nil) throws -> MountTreeSpec {
        // s3:// URLs become their objects' HTTP URLs at the endpoint (`S3Options.map`), resolved
        // once, at the first such URL.
        var endpoint: S3Endpoint?
        func mapped(_ text: String) throws -> String {
            guard S3Options.mentionsS3([text]) else { return text }
            if endpoint == nil { endpoint = try cache.resolve().s3Endpoint() }
            return try endpoint.map { try S3Options.map(text, endpoint: $0, holder: bucketHolder) } ?? text
        }
        let arguments = try entries.map { text -> (text: String, spec: EntrySpec) in
            do { return (text, try EntrySpec.parse(try mapped(text))) } catch let e as UsageError { throw e } catch { throw UsageError("bad argument '\(text)': \(error)") }
        }
        let list = try settings.urlList.map { try URLListParser.load(path: $0, mapURL: mapped) } ?? []
        let indexes = try settings.indexes.map { text -> MountTreeSpec.Index in
            do { return try MountTreeSpec.parseIndex(try mapped(text)) } catch let e as UsageError { throw e } catch { throw UsageError("bad --index '\(text)': \(error)") }
        }
        return try MountTreeSpec.build(arguments: arguments, urlList: list, urlListPath: settings.urlList,
                                       indexes: indexes, byURL: settings.byURL)
    }

    /// `refresh` (a control request to the proxy) and SIGHUP: the URL list again, if there is
    /// one, then every listing under `path` (inside the mount; nil: all of them), now.
    /// - Parameter credentials: gets the origins of the URL list's entries (the user's URLs), as
    ///   the mountpoint's own were named (with the daemon's credentials, or without: `MountHost`).
    static func refresh(path: String?, urlList: String?, fs: FuseFileSystem, logger: Logger,
                        why: String = "refresh", credentials: CredentialScope.Grant? = nil) async -> ControlAnswer {
        let components = (path ?? "").split(separator: "/").map(String.init).filter { $0 != "." }
        if components.contains("..") { return ControlAnswer(status: 400, text: "the path may not contain '..'") }
        var lines: [String] = []
        var failed = false
        if let urlList {
            let (line, ok) = reloadURLList(urlList, fs: fs, logger: logger)
            credentials?.add(urls: fs.tree.files.map(\.url))
            lines.append(line)
            failed = !ok
        }
        let shown = "/" + components.joined(separator: "/")
        guard let outcome = await fs.refreshListings(under: components) else {
            return ControlAnswer(status: 404, text: "not in the mount: \(shown)")
        }
        lines.append("re-read \(outcome.listings) listing\(outcome.listings == 1 ? "" : "s") under \(shown)")
        lines += outcome.failures.map { "failed: " + $0 }
        for line in lines { logger.info("\(why): \(line)") }
        failed = failed || !outcome.failures.isEmpty
        return ControlAnswer(status: failed ? 502 : 200, text: lines.joined(separator: "\n"))
    }

    /// The URL list again: a summary line, and whether it could be used. A bad list is logged
    /// and the current tree stays.
    static func reloadURLList(_ path: String, fs: FuseFileSystem, logger: Logger) -> (String, Bool) {
        do {
            let entries = try URLListParser.load(path: path)
            let old = fs.tree
            let new = try old.replacingURLList(entries, path: path)
            fs.reload(tree: new)
            let before = Set(old.files.map { $0.path.joined(separator: "/") + "\u{0}" + $0.url })
            let after = Set(new.files.map { $0.path.joined(separator: "/") + "\u{0}" + $0.url })
            let line = "reloaded \(path): \(new.files.count) files (\(after.subtracting(before).count) new, \(before.subtracting(after).count) removed)"
            logger.info("\(line)")
            return (line, true)
        } catch {
            logger.error("SIGHUP: keeping the current files, \(path) is not usable: \(error)")
            return ("keeping the current files, \(path) is not usable: \(error)", false)
        }
    }

    /// The proxy on the same engine. A port that is taken fails the mount, naming the port and
    /// what to do: a mount running without the proxy users expect, or `url` printing URLs on a
    /// port that belongs to another daemon, would fail later and far less clearly.
    private func startProxy(engine: CacheEngine, metrics: PrometheusExport, cache: ResolvedCacheOptions,
                            logger: Logger, refresh: @escaping @Sendable (String?) async -> ControlAnswer,
                            mounts: @escaping @Sendable (String, [URLQueryItem]) async -> ControlAnswer) async throws -> ProxyServer {
        let (configuration, generated) = try proxy.configuration(cache: cache)
        let (server, port) = try await ProxyOptions.startServer(engine: engine, configuration: configuration, metrics: metrics, logger: logger,
                                                                refresh: refresh, mounts: mounts) {
            "the proxy cannot listen on \($0):\($1): the port is in use\($2); "
                + "give this mount another port with --proxy-port N (0 picks a free one; 'httpcachefs url --cache-dir \(cache.directory)' finds it) or none with --no-proxy"
        }
        logger.info("proxy listening on \(ProxyConfiguration.localBase(bindAddress: configuration.bindAddress, port: port))")
        // The token stays out of the log: it is in the owner-only proxy.json, and 'url' uses it.
        if generated != nil { logger.notice("proxy token generated: 'httpcachefs url URL' prints proxy URLs that carry it") }
        return server
    }

    /// Re-executes this command as a detached daemon and waits until its mount is usable.
    private func daemonize(resolved: ResolvedCacheOptions) async throws {
        // With -o setting words as the options they stand for, so the daemon's command line
        // (`ps`, `status`) names its cache directory as --cache-dir like any other.
        var arguments = [CommandLine.arguments[0]]
            + ((try? FstabWords.expandingMountArguments(Array(CommandLine.arguments.dropFirst()))) ?? Array(CommandLine.arguments.dropFirst()))
        let at = (arguments.firstIndex(of: "mount") ?? 0) + 1
        var extra = ["--foreground"]
        var logPath = resolved.logFile
        if logPath == nil {
            let path = Self.defaultLogPath(mountpoint: Mountpoint.absolute(mountpoint))
            try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                     withIntermediateDirectories: true)
            extra += ["--log-file", path]
            logPath = path
        }
        arguments.insert(contentsOf: extra, at: min(at, arguments.count))
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let log = logPath, launched = arguments
        _ = try await onBlockingPool {
            try Daemon.launch(executable: executable, arguments: launched, logPath: log)
        }
    }

    /// One log per mountpoint, named after it (`/mnt/media` logs to `mnt-media.log`): in
    /// `/var/log/httpcachefs` for root (fstab mounts), else in `$XDG_STATE_HOME/httpcachefs`
    /// (`~/.local/state/httpcachefs`).
    static func defaultLogPath(mountpoint: String) -> String {
        let env = ProcessInfo.processInfo.environment
        let name = mountpoint.split(separator: "/").joined(separator: "-")
        let file = (name.isEmpty ? "root" : name) + ".log"
        if let state = env["XDG_STATE_HOME"], !state.isEmpty { return state + "/httpcachefs/" + file }
        if geteuid() == 0 { return "/var/log/httpcachefs/" + file }
        return (env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()) + "/.local/state/httpcachefs/" + file
    }
}

/// SIGTERM / SIGINT to a mount: detach the mountpoint at once (new opens fail; the directory
/// underneath shows again), keep serving the files already open, and end when the last one is
/// closed (the kernel then ends the session) or `timeout` passes, whichever comes first. A read
/// in flight is answered in full or, at the timeout, fails (ENOTCONN): never short or wrong.
/// A second signal ends the session at once. Runs on the signal queue.
final class GracefulStop: Sendable {
    private let fs: FuseFileSystem
    private let path: String
    private let timeout: TimeInterval
    private let logger: Logger
    private let signalled = LockedValue(false)

    init(fs: FuseFileSystem, path: String, timeout: TimeInterval, logger: Logger) {
        self.fs = fs
        self.path = path
        self.timeout = timeout
        self.logger = logger
    }

    func signal(_ sig: Int32) {
        let first = signalled.withLock { signalled in defer { signalled = true }; return !signalled }
        guard first else {
            logger.notice("signal \(sig) again: ending the session now, \(fs.openFileCount) files still open")
            fs.unmount()
            return
        }
        let open = fs.openFileCount
        do {
            try fs.detach()
        } catch {
            logger.error("signal \(sig): cannot detach \(path) (\(error)); unmounting now")
            fs.unmount()
            return
        }
        guard timeout > 0 else {
            logger.info("signal \(sig): unmounting \(path) (no --stop-timeout)")
            fs.unmount()
            return
        }
        // Even with no file open the kernel may hold the mount (a shell's working directory
        // in it): the timeout bounds that wait too.
        let plan = open == 0 ? "unmounting" : "serving \(open) open file\(open == 1 ? "" : "s") until closed, at most \(Format.duration(timeout))"
        logger.info("signal \(sig): detached \(path); \(plan)")
        // A timer of the process's scheduler: `unmount` only wakes the FUSE loop (a pipe write).
        Scheduler.shared.after(.seconds(timeout)) { [fs, logger] in
            guard fs.isRunning else { return }
            let left = fs.openFileCount
            logger.warning("stop timeout (\(Format.duration(self.timeout))) passed with \(left) file\(left == 1 ? "" : "s") still open: ending the session; their reads fail from now on")
            fs.unmount()
        }
    }
}
