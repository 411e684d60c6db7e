import ArgumentParser
import CacheCore
import Foundation
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
            """
    )

    @Argument(help: "The http(s) URLs to preload.")
    var urls: [String]

    @Option(parsing: .unconditional, help: ArgumentHelp("Byte range of every URL: A-B (inclusive), A- or -N; positions may be sizes (10M-30M, -5M).", valueName: "range"))
    var range: String?

    @Option(help: ArgumentHelp("HLS variant: best, all, or a BANDWIDTH value.", valueName: "variant"))
    var variant: String = "best"

    @OptionGroup var cache: CacheOptions

    func run() async throws {
        let failures = try await runReportingErrors { () async throws -> Int in
            let range = try self.range.map(ByteRangeSpec.parse(option:))
            guard let variant = HLSPreloader.VariantChoice(argument: self.variant) else {
                throw UsageError("invalid variant '\(self.variant)' for --variant: expected best, all or a BANDWIDTH number such as 2500000")
            }
            for url in urls { _ = try KeyRules.validate(url) }
            let options = cache
            let engine: CacheEngine
            switch try await CacheAccess.open(options) {
            case let .engine(opened):
                engine = opened
            case let .daemon(held):
                let daemon = try held.client()
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
        let entry = try await engine.open(url: url, takeFirstBytes: range == nil)
        if range == nil, try await HLSPlaylist.isPlaylist(engine: engine, entry: entry) {
            return try await preloadPlaylist(url: url, variant: variant, source: EngineHLSSource(engine: engine), via: "")
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
        let head = try await onBlockingPool { try daemon.head(url: url) }
        if range == nil, HLSPlaylist.isPlaylistContentType(head.contentType) {
            return try await preloadPlaylist(url: url, variant: variant, source: DaemonHLSSource(daemon: daemon), via: via)
        }
        let (start, end) = try (range ?? .from(0)).resolve(length: head.length, url: url)
        let bytes = try await onBlockingPool { () throws -> Int64 in
            let bar = ProgressBar.isAvailable ? ProgressBar(label: Self.shortName(url), total: end.map { $0 - start }) : nil
            defer { bar?.finish() }
            var bytes: Int64 = 0
            try daemon.stream(url: url, start: start, end: end) { chunk in
                bytes += Int64(chunk.count)
                bar?.advance(by: Int64(chunk.count))
                return true
            }
            return bytes
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

    /// The last path component, for the progress bar.
    static func shortName(_ url: String) -> String {
        let path = URLComponents(string: url)?.path ?? url
        let name = path.split(separator: "/").last.map(String.init) ?? url
        return name.isEmpty ? url : name
    }
}

