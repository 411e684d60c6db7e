import ArgumentParser
import CacheCore
import Foundation
import FuseMount
import HLS
import Settings

/// `httpcachefs preload URL...`: fill the cache ahead of time (read every byte, keep none), in
/// this process or, while a daemon holds the cache, through that daemon's proxy.
struct PreloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preload",
        abstract: "Download remote files (or byte ranges of them) into the cache ahead of time.",
        discussion: """
            On a terminal, a progress bar shows bytes, rate and ETA; otherwise one summary line per \
            URL is printed. A URL that fails is reported and the others still run; the exit status \
            is non-zero if any failed. An HLS playlist (without --range) is preloaded as a stream: \
            its media playlists, segments, init sections and keys. --variant picks the variants of a \
            master playlist: best (highest BANDWIDTH), all, or a number: the variant with that \
            BANDWIDTH, else the highest below it, else the lowest.

            With --recursive, a folder URL is followed through its listings (HTML autoindex, nginx \
            JSON or WebDAV PROPFIND), within --max-depth and --max-files and never outside the \
            URL's path, and every file under it is preloaded: --head and --tail (the header and, \
            for MP4, the moov atom at the end, which players and library scanners read first), or \
            --range, or the whole file. One progress line covers the whole tree. The run stops \
            with a message rather than pass the cache cap. --pin keeps those bytes from eviction \
            (across restarts) within --pin-max, at most half the cap; 'cache unpin URL' releases them.
            """
    )

    @Argument(help: "The http(s) URLs to preload, or s3://BUCKET/KEY (see the --s3-* options).")
    var urls: [String]

    @Option(parsing: .unconditional, help: ArgumentHelp("Byte range of every URL: A-B (inclusive), A- or -N; positions may be sizes (10M-30M, -5M).", valueName: "range"))
    var range: String?

    @Option(help: ArgumentHelp("HLS variant: best, all, or a BANDWIDTH value.", valueName: "variant"))
    var variant: String = "best"

    @Flag(name: [.customShort("r"), .customLong("recursive")],
          help: "Follow the listings under each URL (a folder) and preload every file below it.")
    var recursive = false

    @Option(name: .customLong("head"), help: ArgumentHelp("Preload the first SIZE bytes of every file (with or without --tail), e.g. 1M.", valueName: "size"))
    var head: String?

    @Option(name: .customLong("tail"), help: ArgumentHelp("Preload the last SIZE bytes of every file, e.g. 4M (an MP4's moov atom often sits there).", valueName: "size"))
    var tail: String?

    @Option(name: .customLong("max-depth"), help: ArgumentHelp("With --recursive: levels of folders followed below the URL (default: 16).", valueName: "n"))
    var maxDepth: Int?

    @Option(name: .customLong("max-files"), help: ArgumentHelp("With --recursive: most files preloaded, and most folders listed (default: 100000).", valueName: "n"))
    var maxFiles: Int?

    @Flag(name: .customLong("pin"), help: "Keep the preloaded bytes from eviction, across restarts, until 'cache unpin URL'.")
    var pin = false

    @Option(name: .customLong("pin-max"), help: ArgumentHelp("With --pin: most bytes pinned in the whole cache (default and upper bound: half the cache cap).", valueName: "size"))
    var pinMax: String?

    @Option(name: .customLong("include"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("With --recursive: preload only files matching this glob, as 'mount --include' (rclone's filter rules); repeatable.", valueName: "glob"))
    var includes: [String] = []

    @Option(name: .customLong("exclude"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("With --recursive: leave out files and folders matching this glob, as 'mount --exclude'; repeatable.", valueName: "glob"))
    var excludes: [String] = []

    @OptionGroup var cache: CacheOptions

    mutating func validate() throws {
        if S3Options.mentionsS3(urls) {
            do {
                let endpoint = try cache.resolve().s3Endpoint()
                urls = try urls.map { try S3Options.map($0, endpoint: endpoint) }
            } catch { throw ErrorReporting.report(error) }
        }
        urls = try urls.map(URLArgument.normalize)
        try cache.useTheRunningDaemonsCache(command: "preload")
    }


    /// `--head`/`--tail`/`--range` as a plan, with its usage errors.
    func makePlan() throws -> PreloadPlan {
        let range = try self.range.map(ByteRangeSpec.parse(option:))
        if range != nil, head != nil || tail != nil {
            throw UsageError("--range cannot be combined with --head or --tail: give one or the other")
        }
        return PreloadPlan(head: try head.map { try ByteSize.parse($0, option: "--head") },
                           tail: try tail.map { try ByteSize.parse($0, option: "--tail") }, range: range)
    }

    /// The pin limit in force for a cache of `capacity` bytes: --pin-max (or the config file's
    /// `pin-max`), at most half the cap; nil without --pin.
    func pinLimit(capacity: Int64) throws -> Int64? {
        let file = try ConfigFile.load(explicitPath: cache.configFile)
        guard pin else {
            if pinMax != nil { throw UsageError("--pin-max needs --pin") }
            return nil
        }
        let hard = CacheConfiguration.halfCapacity(of: capacity)
        guard let v = setting(pinMax, "pin-max", in: file) else { return hard }
        let limit = try ByteSize.parse(v.text, option: v.option)
        guard limit <= hard else {
            throw UsageError("pin limit '\(v.text)' for \(v.option) is more than half the cache cap (\(Format.bytes(capacity))): at most \(Format.bytes(hard))")
        }
        return limit
    }

    func run() async throws {
        if recursive {
            let failures = try await runReportingErrors { try await runRecursive() }
            if failures > 0 { throw ExitCode.failure }
            return
        }
        let failures = try await runReportingErrors { () async throws -> Int in
            if head != nil || tail != nil || pin || pinMax != nil || maxDepth != nil || maxFiles != nil || !includes.isEmpty || !excludes.isEmpty {
                throw UsageError("--head, --tail, --pin, --pin-max, --max-depth, --max-files, --include and --exclude go with --recursive (a folder URL); for one file, give --range")
            }
            let range = try self.range.map(ByteRangeSpec.parse(option:))
            guard let variant = HLSPreloader.VariantChoice(argument: self.variant) else {
                throw UsageError("invalid variant '\(self.variant)' for --variant: expected best, all or a BANDWIDTH number such as 2500000")
            }
            for url in urls { _ = try KeyRules.validate(url) }
            let options = cache
            let engine: CacheEngine
            switch try await CacheAccess.open(options, credentialURLs: urls) {
            case let .engine(opened):
                engine = opened
            case let .daemon(held):
                // A bucket's objects go through only with the keys of the mount that named it.
                try await onBlockingPool { [urls] in try DaemonBucketCheck.check(urls, held: held, command: "preload") }
                let daemon = try held.client(warmUp: true)
                defer { daemon.shutdown() }
                return await Self.preload(urls: urls) { url in
                    try await Self.preload(url: url, range: range, variant: variant, through: daemon)
                }
            }
            let failures = await Self.preload(urls: urls) { url in
                try await Self.preload(url: url, range: range, variant: variant, engine: engine)
            }
            try await onBlockingPool { engine.shutdown() }
            return failures
        }
        if failures > 0 { throw ExitCode.failure }
    }

    /// `--recursive`: each URL as a folder (`LibraryPreload`), in this process or through the
    /// daemon holding the cache. Returns the number of URLs with problems.
    func runRecursive() async throws -> Int {
        let plan = try makePlan()
        let maxDepth = self.maxDepth ?? 16, maxFiles = self.maxFiles ?? 100_000
        guard maxDepth >= 0 else { throw UsageError("--max-depth must be 0 or more") }
        guard maxFiles >= 1 else { throw UsageError("--max-files must be at least 1") }
        for url in urls { _ = try KeyRules.validate(url) }
        let limits = LibraryPreload.Limits(maxDepth: maxDepth, maxFiles: maxFiles)
        let filter: ListingFilter?
        do { filter = try ListingFilter(include: includes, exclude: excludes) } catch {
            throw UsageError("bad --include/--exclude: \(error)")
        }
        let logger = cache.makeLogger(label: "httpcachefs.listing", defaultLevel: .error)
        let target: LibraryPreload.Target
        var daemon: DaemonClient?
        var engine: CacheEngine?
        switch try await CacheAccess.open(cache, credentialURLs: urls) {
        case let .engine(opened):
            engine = opened
            target = EnginePreloadTarget(engine: opened)
        case let .daemon(held):
            try await onBlockingPool { [urls] in try DaemonBucketCheck.check(urls.map(LibraryPreload.folderURL), held: held, command: "preload") }
            let client = try held.client(warmUp: true)
            daemon = client
            target = DaemonPreloadTarget(daemon: client, held: held, snapshot: try await onBlockingPool { try held.listing() })
        }
        defer { daemon?.shutdown() }
        var failures = 0
        do {
            let pinLimit = try pinLimit(capacity: target.capacity)
            for url in urls {
                var run = LibraryPreload(root: LibraryPreload.folderURL(url), plan: plan, limits: limits,
                                         pinLimit: pinLimit, logger: logger)
                run.filter = filter
                do {
                    let outcome = try await run.run(into: target)
                    CacheCommand.printLine(outcome.summary)
                    for problem in outcome.problems { ErrorReporting.printError(problem) }
                    if !outcome.problems.isEmpty { failures += 1 }
                } catch {
                    _ = ErrorReporting.report(error)
                    failures += 1
                }
            }
        } catch {
            if let engine { try await onBlockingPool { engine.shutdown() } }
            throw error
        }
        if let engine { try await onBlockingPool { engine.shutdown() } }
        return failures
    }

    /// Preloads each URL with `one`, printing its summary line or its error. Returns the number
    /// of URLs that failed; the others still run.
    static func preload(urls: [String], _ one: (String) async throws -> String) async -> Int {
        var failures = 0
        for url in urls {
            do {
                CacheCommand.printLine(try await one(url))
            } catch {
                _ = ErrorReporting.report(error)
                failures += 1
            }
        }
        return failures
    }

    /// Preloads one URL into this process's cache: an HLS playlist as a stream (without
    /// `--range`), anything else as bytes. A range is fetched exactly: the open asks one byte
    /// (not the usual first 256 KiB) and the reader's read-ahead stops at the range's end.
    static func preload(url: String, range: ByteRangeSpec?, variant: HLSPreloader.VariantChoice,
                        engine: CacheEngine) async throws -> String {
        let before = engine.status(url: url)
        let started = Date()
        let entry: EntryInfo
        do { entry = try await engine.open(url: url, takeFirstBytes: range == nil) } catch {
            throw folderHint(error, url: url)
        }
        if range == nil, try await HLSPlaylist.isPlaylist(engine: engine, entry: entry) {
            return try await preloadPlaylist(url: url, variant: variant, source: EngineHLSSource(engine: engine), via: "")
        }
        if Self.mayBeListing(url: url, contentType: entry.contentType, length: entry.length) {
            let reader = engine.makeReader(for: entry)
            let body = try? await ChunkedRead.readAll(reader, limit: Self.listingProbeLimit)
            reader.close()
            try Self.refuseListing(body ?? nil, url: url)
        }
        let (start, end) = try (range ?? .from(0)).resolve(length: entry.length, url: url)
        var fromCache: Int64 = 0
        if let before, before.info.generation == entry.generation {
            let upper = end ?? before.info.length ?? Int64.max
            fromCache = CacheCommand.Export.coveredBytes(before.cachedRanges, within: start ..< max(start, upper))
        }
        let reader = engine.makeReader(for: entry, end: end, background: true)
        defer { reader.close() }
        let bar = ProgressBar.isAvailable ? ProgressBar(label: Self.shortName(url), total: end.map { $0 - start }) : nil
        defer { bar?.finish() }
        // With a bar on screen, smaller reads keep it moving on a slow origin (the engine still
        // fetches in its own, larger, read-ahead).
        let result = try await ChunkedRead.run(reader, from: start, to: end,
                                               chunkSize: bar == nil ? ChunkedRead.defaultChunkSize : 256 << 10) { bytes in
            bar?.advance(by: Int64(bytes.count))
            return true
        }
        let elapsed = Date().timeIntervalSince(started)
        return "preloaded \(url): \(result.bytes) bytes in \(Format.duration(elapsed)) (\(Format.rate(bytes: result.bytes, seconds: elapsed))), \(fromCache) bytes from cache"
    }

    /// Preloads one URL through the proxy of the daemon that holds the cache, so its cache gets
    /// the bytes: an HLS playlist as a stream (its resources each through the proxy), anything
    /// else as one ranged request.
    static func preload(url: String, range: ByteRangeSpec?, variant: HLSPreloader.VariantChoice,
                        through daemon: DaemonClient) async throws -> String {
        let via = " through the running daemon (process \(daemon.pid))"
        let started = Date()
        let head: DaemonClient.Head
        do { head = try await onBlockingPool { try daemon.head(url: url) } } catch {
            throw folderHint(error, url: url)
        }
        if range == nil, HLSPlaylist.isPlaylistContentType(head.contentType) {
            return try await preloadPlaylist(url: url, variant: variant, source: DaemonHLSSource(daemon: daemon), via: via)
        }
        if Self.mayBeListing(url: url, contentType: head.contentType, length: head.length) {
            let body: [UInt8]? = try? await onBlockingPool {
                let bytes = LockedValue<[UInt8]>([])
                try daemon.stream(url: url, end: Int64(Self.listingProbeLimit)) { chunk in
                    bytes.withLock { $0.append(contentsOf: chunk) }
                    return true
                }
                return bytes.withLock { $0 }
            }
            try Self.refuseListing(body, url: url)
        }
        let (start, end) = try (range ?? .from(0)).resolve(length: head.length, url: url)
        let bytes = try await onBlockingPool { () throws -> Int64 in
            let bar = ProgressBar.isAvailable ? ProgressBar(label: Self.shortName(url), total: end.map { $0 - start }) : nil
            defer { bar?.finish() }
            let bytes = LockedValue<Int64>(0)
            try daemon.stream(url: url, start: start, end: end) { chunk in
                bytes.withLock { $0 += Int64(chunk.count) }
                bar?.advance(by: Int64(chunk.count))
                return true
            }
            return bytes.withLock { $0 }
        }
        let elapsed = Date().timeIntervalSince(started)
        return "preloaded \(url)\(via): \(bytes) bytes in \(Format.duration(elapsed)) (\(Format.rate(bytes: bytes, seconds: elapsed)))"
    }

    /// Preloads an HLS stream: the chosen variants' media playlists, segments, init sections and
    /// keys (`HLS.HLSPreloader`). Resources that fail are listed and make the URL count as failed.
    static func preloadPlaylist(url: String, variant: HLSPreloader.VariantChoice, source: HLSSource,
                                via: String) async throws -> String {
        let started = Date()
        let bar = ProgressBar.isAvailable ? ProgressBar(label: Self.shortName(url), total: nil) : nil
        let report: HLSPreloader.Report
        do {
            report = try await HLSPreloader(source: source, variant: variant).run(playlistURL: url) { done, known, current in
                bar?.update(done: done, total: known > 0 ? known : nil, label: Self.shortName(current))
            }
            bar?.finish()
        } catch {
            bar?.finish()
            throw error
        }
        let elapsed = Date().timeIntervalSince(started)
        let summary = "preloaded \(url) (HLS, variant \(variant))\(via): \(report.playlists) playlist\(report.playlists == 1 ? "" : "s"), \(report.resources) segment\(report.resources == 1 ? "" : "s") and keys, \(report.bytes) bytes in \(Format.duration(elapsed)) (\(Format.rate(bytes: report.bytes, seconds: elapsed)))"
        guard report.failures.isEmpty else {
            // Most errors name their URL already; the others get it in front.
            for f in report.failures { ErrorReporting.printError(f.error.contains(f.url) ? f.error : "\(f.url): \(f.error)") }
            throw CommandFailure("\(summary); \(report.failures.count) resource\(report.failures.count == 1 ? "" : "s") failed")
        }
        return summary
    }

    /// Listings larger than this are not looked at (preloaded as files).
    static let listingProbeLimit = 8 << 20

    /// A URL whose answer may be a folder's listing: a folder URL, or an HTML or JSON page.
    static func mayBeListing(url: String, contentType: String?, length: Int64?) -> Bool {
        guard (length ?? 0) <= Int64(listingProbeLimit) else { return false }
        let type = contentType?.lowercased() ?? ""
        return url.hasSuffix("/") || type.contains("html") || type.contains("json")
    }

    /// Fails with the way out when `body` lists files: preloading a listing would cache a page
    /// and say nothing about the files the user meant.
    static func refuseListing(_ body: [UInt8]?, url: String) throws {
        guard let body, let entries = try? DirectoryListing.parse(body, url: url), !entries.isEmpty else { return }
        throw CommandFailure("\(DisplayURL.redacted(url)) is a folder listing (\(entries.count) entries), not a file: add --recursive to preload the files under it (with --head/--tail or --range for part of each)")
    }

    /// `error` with a hint when a folder URL answered as a WebDAV folder does to GET.
    static func folderHint(_ error: Error, url: String) -> Error {
        guard url.hasSuffix("/"), let e = error as? CacheError, ListingFetch.mayBeWebDAV(.failure(e)) else { return error }
        return CommandFailure("\(e); if \(DisplayURL.redacted(url)) is a folder (WebDAV lists by PROPFIND), add --recursive")
    }

    /// The last path component, for the progress bar.
    static func shortName(_ url: String) -> String {
        let path = URLComponents(string: url)?.path ?? url
        let name = path.split(separator: "/").last.map(String.init) ?? url
        return name.isEmpty ? url : name
    }
}

