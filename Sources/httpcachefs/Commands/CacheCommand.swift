import ArgumentParser
import CacheCore
import Foundation
import TerminalText

/// `httpcachefs cache ...`: look into and manage the on-disk cache.
struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Inspect and manage the cache.",
        subcommands: [List.self, Info.self, Remove.self, Clear.self, Unpin.self, Verify.self, Export.self]
    )
}

extension CacheCommand {
    /// Runs `body` with the cache open on a dedicated thread, reporting errors as one line.
    /// While a daemon holds the cache: `held` (asking the daemon), or the lock error without it.
    static func withEngine<T: Sendable>(_ options: CacheOptions, name: String,
                                        held: (@Sendable (HeldCache) throws -> T)? = nil,
                                        _ body: @escaping @Sendable (CacheEngine) throws -> T) async throws -> T {
        try await runReportingErrors {
            try await onBlockingPool {
                switch try CacheAccess.openBlocking(options) {
                case let .engine(engine):
                    defer { engine.shutdown() }
                    return try body(engine)
                case let .daemon(daemon):
                    guard let held else { throw daemon.lockedError }
                    return try held(daemon)
                }
            }
        }
    }

    /// Runs `body` with what the cache holds: the cache itself, or, while a daemon holds it, a
    /// read-only snapshot of its index with the daemon's live figures (`DaemonListing`).
    static func withListing<T: Sendable>(_ options: CacheOptions, name: String,
                                         _ body: @escaping @Sendable (CacheListing) throws -> T) async throws -> T {
        try await runReportingErrors {
            try await onBlockingPool {
                switch try CacheAccess.openBlocking(options) {
                case let .engine(engine):
                    defer { engine.shutdown() }
                    return try body(engine)
                case let .daemon(held):
                    return try body(try held.listing())
                }
            }
        }
    }

    /// The entry for `url` under this command's own key, or a clear "not cached" failure (after
    /// checking the URL itself).
    static func status(of url: String, in cache: CacheListing) throws -> EntryStatus {
        _ = try cache.configuration.keyRules.key(for: url)
        guard let status = cache.status(url: url) else { throw CommandFailure("not in the cache: \(DisplayURL.redacted(url))") }
        return status
    }

    /// The entries for `url` (`CacheListing.entries`), or a clear "not cached" failure (after
    /// checking the URL itself).
    static func statuses(of url: String, in cache: CacheListing) throws -> [EntryStatus] {
        _ = try cache.configuration.keyRules.key(for: url)
        let found = cache.entries(url: url)
        guard !found.isEmpty else { throw CommandFailure("not in the cache: \(DisplayURL.redacted(url))") }
        return found
    }

    /// `urls` with their s3:// URLs made the HTTP URLs of their objects at the S3 endpoint this
    /// command's settings name (`S3Options.map`): their keys are then those the same keys give.
    static func mappingS3(_ urls: [String], cache: CacheOptions) throws -> [String] {
        guard S3Options.mentionsS3(urls) else { return urls }
        do {
            let endpoint = try cache.resolve().s3Endpoint()
            return try urls.map { try S3Options.map($0, endpoint: endpoint) }
        } catch { throw ErrorReporting.report(error) }
    }

    /// Made `Format.terminalSafe`: tables and summaries quote what origins sent (`cache info`
    /// shows an entry's ETag and Content-Type as the origin wrote them). `json`: the text is a
    /// JSON document, left as it is (its encoder escaped the C0 controls; `\u{7F}` would make it
    /// invalid JSON).
    static func printLine(_ s: String, json: Bool = false) {
        _ = FileDescriptorOutput.writeAll(fd: 1, Array(((json ? s : Format.terminalSafe(s)) + "\n").utf8)[...])
    }

    // MARK: ls

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls", abstract: "List cached files: URL, size, how much is cached, last access.")

        @OptionGroup var cache: CacheOptions

        mutating func validate() throws { try cache.useTheRunningDaemonsCache(command: "cache ls") }

        func run() async throws {
            // Paged from the index (`CacheListStream`) unless it must be opened (made or
            // migrated) first: then the cache as today, whole.
            let options = cache
            if try await runReportingErrors({ try await onBlockingPool { try CacheListStream.print(options) } }) { return }
            try await CacheCommand.withListing(cache, name: "ls") { engine in
                let entries = engine.list().sorted { $0.info.url < $1.info.url }
                let usage = engine.usage
                if entries.isEmpty {
                    CacheCommand.printLine("no cached files (\(engine.configuration.directory))")
                    return
                }
                // A PINNED column once anything is pinned (`preload --pin`).
                let pinned = engine.pinnedBytes
                // On a terminal the table fits its width and names read decoded; a pipe or a file
                // gets the full, percent-encoded URLs (what `cache rm` and `cache info` take).
                let width = TerminalWidth.ofStandardOutput()
                var rows = [Self.header(pinned: pinned > 0)]
                for e in entries {
                    rows.append(Self.row(e, terminal: width != nil, pinned: pinned > 0 ? engine.pinnedBytes(url: e.info.url) : nil))
                }
                rows = TextTable.fitted(rows, width: width, shrinking: 0)
                CacheCommand.printLine(TextTable.table(rows, rightAligned: Self.rightAligned(pinned: pinned > 0)))
                CacheCommand.printLine(Self.footer(usage: usage, pinned: pinned))
            }
        }

        static func header(pinned: Bool) -> [String] { ["URL", "SIZE", "CACHED", "LAST ACCESS"] + (pinned ? ["PINNED"] : []) }
        static func rightAligned(pinned: Bool) -> Set<Int> { pinned ? [1, 2, 4] : [1, 2] }

        /// One file's row; `pinned`: the bytes its pins keep (whole slices), nil without a PINNED column.
        static func row(_ e: EntryStatus, terminal: Bool, pinned: Int64?) -> [String] {
            let url = DisplayURL.redacted(e.info.url)
            var row = [terminal ? TextTable.displayName(url) : url, e.info.length.map(Format.bytes) ?? "?",
                       Format.percent(e.cachedBytes, of: e.info.length), Format.date(e.lastAccess)]
            if let pinned { row.append(pinned > 0 ? Format.bytes(pinned) : "-") }
            return row
        }

        static func footer(usage: CacheUsage, pinned: Int64) -> String {
            "\(usage.entries) file\(usage.entries == 1 ? "" : "s"), \(Format.bytes(usage.bytes)) of \(Format.bytes(usage.capacity)) used" + (pinned > 0 ? ", \(Format.bytes(pinned)) pinned (at most \(Format.bytes(CacheConfiguration.halfCapacity(of: usage.capacity))))" : "")
        }
    }

    // MARK: info

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "info",
            abstract: "Show what the cache holds for one URL: ranges, validators, hits and misses, errors.")

        @Argument(help: "The URL, as given to cat, preload, mount or the proxy.")
        var url: String

        @OptionGroup var cache: CacheOptions

        mutating func validate() throws {
            url = try CacheCommand.mappingS3([url], cache: cache)[0]
            try cache.useTheRunningDaemonsCache(command: "cache info")
        }

        func run() async throws {
            let url = url
            try await CacheCommand.withListing(cache, name: "info") { engine in
                let found = try CacheCommand.statuses(of: url, in: engine)
                guard found.count > 1 || found[0].info.key != (try? engine.configuration.keyRules.key(for: url)) else {
                    return CacheCommand.printLine(Self.render(found[0], pinned: engine.pinnedRanges(url: url)))
                }
                // Not under this command's credentials: each identity that read it, by its hash.
                let n = found.count
                CacheCommand.printLine(found.enumerated().map { i, s in
                    "\(DisplayURL.redacted(url)): cached under other credentials than this command's (\(i + 1) of \(n), credentials #\(s.info.key.credentialHash.map { String($0.prefix(12)) } ?? "none"))\n" + Self.render(s)
                }.joined(separator: "\n"))
            }
        }

        static func render(_ s: EntryStatus, pinned: [Range<Int64>] = []) -> String {
            let i = s.info
            var rows: [[String]] = [
                ["URL:", DisplayURL.redacted(i.url)],
                ["Cache key:", DisplayURL.redacted(i.key.string)],
            ]
            if i.finalURL != i.url { rows.append(["Final URL:", DisplayURL.redacted(i.finalURL)]) }
            rows += [
                ["Length:", i.length.map { "\($0) bytes (\(Format.bytes($0)))" } ?? "unknown"],
                ["Content type:", i.contentType ?? "-"],
                ["ETag:", i.etag ?? "-"],
                ["Last-Modified:", i.lastModified ?? "-"],
                ["Accepts ranges:", i.acceptsRanges ? "yes" : "no"],
                ["Generation:", "\(i.generation)"],
                ["Validated:", Format.date(i.validatedAt)],
                ["Last access:", Format.date(s.lastAccess)],
                ["Cached:", "\(s.cachedBytes) bytes (\(Format.bytes(s.cachedBytes)), \(Format.percent(s.cachedBytes, of: i.length)))"],
                ["Cached ranges:", rangesText(s.cachedRanges)],
                ["Coverage map:", i.length.map { coverageMap(s.cachedRanges, length: $0) } ?? "-"],
            ]
            if let length = i.length {
                rows.append(["", "each cell is 1/64 of the file (\(Format.bytes((length + 63) / 64))): # cached, + partly, . not cached"])
            }
            if !pinned.isEmpty {
                let bytes = pinned.reduce(Int64(0)) { $0 + $1.upperBound - $1.lowerBound }
                rows.append(["Pinned:", "\(bytes) bytes (\(Format.bytes(bytes))): \(rangesText(pinned)); 'cache unpin' releases them"])
            }
            rows += [
                ["Hits / misses:", "\(s.hits) / \(s.misses)"],
                ["From cache:", "\(s.bytesFromCache) bytes (\(Format.bytes(s.bytesFromCache))) saved"],
                [s.fetchedFromTier == nil ? "From origin:" : "Fetched:", "\(s.bytesFromOrigin) bytes (\(Format.bytes(s.bytesFromOrigin)))"],
            ]
            if let tier = s.fetchedFromTier, let origin = s.fetchedFromOrigin {
                // Behind a cache tier: which fetches a node answered, as the fetching process
                // (the daemon, while one runs) counted them since it started.
                rows.append(["  from the tier:", "\(tier) bytes (\(Format.bytes(tier))) since the daemon started"])
                rows.append(["  from the origin:", "\(origin) bytes (\(Format.bytes(origin))) since the daemon started"])
            }
            if s.recentErrors.isEmpty {
                rows.append(["Recent errors:", "none"])
            } else {
                for (n, e) in s.recentErrors.enumerated() { rows.append([n == 0 ? "Recent errors:" : "", DisplayURL.redactingPasswords(in: e)]) }
            }
            return TextTable.table(rows)
        }

        /// Inclusive offsets, like `--range` and HTTP, so a line can be pasted back.
        /// The file as `width` cells from start to end: `#` all cached, `+` partly, `.` not at all.
        static func coverageMap(_ ranges: [Range<Int64>], length: Int64, width: Int = 64) -> String {
            guard length > 0 else { return "(empty file)" }
            // `length * cell / width` in full width: an origin may claim up to 2^62 bytes, and that
            // times a cell number passes Int64 (the map trapped for any length past 128 PiB).
            func boundary(_ cell: Int) -> Int64 {
                Int64(width).dividingFullWidth(length.multipliedFullWidth(by: Int64(cell))).quotient
            }
            let cells = (0..<width).map { cell -> Character in
                let lo = boundary(cell), hi = max(lo + 1, boundary(cell + 1))
                let cached = ranges.reduce(Int64(0)) { $0 + max(0, min($1.upperBound, hi) - max($1.lowerBound, lo)) }
                return cached >= hi - lo ? "#" : cached > 0 ? "+" : "."
            }
            return "[" + String(cells) + "]"
        }

        static func rangesText(_ ranges: [Range<Int64>], limit: Int = 16) -> String {
            if ranges.isEmpty { return "none" }
            var parts = ranges.prefix(limit).map { "\($0.lowerBound)-\($0.upperBound - 1)" }
            if ranges.count > limit { parts.append("... \(ranges.count - limit) more") }
            return parts.joined(separator: ", ")
        }
    }

    /// `cache rm` and `cache unpin` through the daemon holding the cache: checks each URL here,
    /// asks the daemon's control door for `action` on all of them and prints each `done` line
    /// (`WORD\tBYTES\tURL`). Throws for the failures first, then for the URLs the daemon had
    /// nothing for (`missing\tURL`, or with `noBytesIsNothing` a done line of 0 bytes).
    static func eachURLThroughDaemon(_ held: HeldCache, _ action: String, urls: [String], done word: String,
                                     failure: String, nothing: String, noBytesIsNothing: Bool = false) throws {
        let rules = try held.options.configuration().keyRules
        for url in urls { _ = try rules.key(for: url) }
        let answer = try held.control(action, query: urls.map { ("url", $0) })
        var missing: [String] = [], failures: [String] = []
        for line in answer.lines {
            let fields = line.split(separator: "\t", maxSplits: 2).map(String.init)
            switch fields.first {
            case word where fields.count == 3 && noBytesIsNothing && fields[1] == "0": missing.append(fields[2])
            case word where fields.count == 3:
                printLine("\(word) \(DisplayURL.redacted(fields[2])) (\(Format.bytes(Int64(fields[1]) ?? 0))) through the daemon holding the cache (pid \(answer.pid))")
            case "missing" where fields.count >= 2: missing.append(fields[1])
            default: failures.append(fields.dropFirst().joined(separator: ": "))
            }
        }
        if !failures.isEmpty { throw CommandFailure("\(failure) \(failures.joined(separator: "; "))") }
        if !missing.isEmpty { throw CommandFailure("\(nothing) \(missing.map(DisplayURL.redacted).joined(separator: ", "))") }
    }

    // MARK: rm

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Forget cached files and delete their bytes.")

        @Argument(help: "URLs to remove.")
        var urls: [String]

        @OptionGroup var cache: CacheOptions

        mutating func validate() throws {
            urls = try CacheCommand.mappingS3(urls, cache: cache)
            try cache.useTheRunningDaemonsCache(command: "cache rm")
        }

        func run() async throws {
            let urls = urls
            try await CacheCommand.withEngine(cache, name: "rm", held: { held in
                // Through the daemon that holds the cache: it forgets the files in its own engine.
                try CacheCommand.eachURLThroughDaemon(held, "rm", urls: urls, done: "removed", failure: "could not remove",
                                                      nothing: "not in the cache:")
            }) { engine in
                var missing: [String] = []
                for url in urls {
                    _ = try engine.key(for: url)
                    // Its entry by this command's key, else every credentials' (`statuses`).
                    let found = engine.statuses(url: url)
                    guard !found.isEmpty else { missing.append(url); continue }
                    for s in found { try engine.remove(key: s.info.key) }
                    let identities = found.count > 1 ? ", \(found.count) credentials" : ""
                    CacheCommand.printLine("removed \(DisplayURL.redacted(url)) (\(Format.bytes(found.reduce(0) { $0 + $1.cachedBytes }))\(identities))")
                }
                if !missing.isEmpty {
                    throw CommandFailure("not in the cache: \(missing.map(DisplayURL.redacted).joined(separator: ", "))")
                }
            }
        }
    }

    // MARK: unpin

    struct Unpin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unpin", abstract: "Let eviction take the bytes 'preload --pin' kept (the bytes stay cached until then).")

        @Argument(help: "URLs to unpin.")
        var urls: [String]

        @OptionGroup var cache: CacheOptions

        mutating func validate() throws {
            urls = try CacheCommand.mappingS3(urls, cache: cache)
            try cache.useTheRunningDaemonsCache(command: "cache unpin")
        }

        func run() async throws {
            let urls = urls
            try await CacheCommand.withEngine(cache, name: "unpin", held: { held in
                try CacheCommand.eachURLThroughDaemon(held, "unpin", urls: urls, done: "unpinned", failure: "could not unpin",
                                                      nothing: "nothing pinned for", noBytesIsNothing: true)
            }) { engine in
                var missing: [String] = []
                for url in urls {
                    let bytes = try engine.unpin(url: url)
                    if bytes == 0 { missing.append(url); continue }
                    CacheCommand.printLine("unpinned \(DisplayURL.redacted(url)) (\(Format.bytes(bytes)))")
                }
                if !missing.isEmpty { throw CommandFailure("nothing pinned for \(missing.map(DisplayURL.redacted).joined(separator: ", "))") }
            }
        }
    }

    // MARK: clear

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear", abstract: "Forget every cached file.")

        @OptionGroup var cache: CacheOptions

        mutating func validate() throws { try cache.useTheRunningDaemonsCache(command: "cache clear") }

        func run() async throws {
            try await CacheCommand.withEngine(cache, name: "clear", held: { held in
                let answer = try held.control("clear")
                let fields = answer.lines.first?.split(separator: "\t").map(String.init) ?? []
                guard fields.count == 3, fields[0] == "cleared", let n = Int(fields[1]), let bytes = Int64(fields[2]) else {
                    throw CommandFailure("unexpected answer from the daemon (pid \(answer.pid)): \(answer.lines.joined(separator: "; "))")
                }
                CacheCommand.printLine("cleared \(n) file\(n == 1 ? "" : "s") (\(Format.bytes(bytes))) through the daemon holding the cache (pid \(answer.pid))")
            }) { engine in
                let before = engine.usage
                try engine.clear()
                CacheCommand.printLine("cleared \(before.entries) file\(before.entries == 1 ? "" : "s") (\(Format.bytes(before.bytes)))")
            }
        }
    }
}

/// What `cache ls` and `cache info` read: the open cache, or a daemon's (`DaemonListing`).
protocol CacheListing {
    var configuration: CacheConfiguration { get }
    var usage: CacheUsage { get }
    func list() -> [EntryStatus]
    func status(url: String) -> EntryStatus?
    /// Ranges pinned by `preload --pin`, the bytes they keep (whole slices), and their total.
    func pinnedRanges(url: String) -> [Range<Int64>]
    func pinnedBytes(url: String) -> Int64
    var pinnedBytes: Int64 { get }
}

extension CacheEngine: CacheListing {}

extension CacheListing {
    /// The entries of `url`: the one its key names with this command's credentials and
    /// buckets, else every entry of that URL whatever credentials read it (`KeyRules.plainKey`):
    /// a signed bucket's entries, found from a process that has not its keys.
    func entries(url: String) -> [EntryStatus] {
        if let s = status(url: url) { return [s] }
        guard let plain = try? configuration.keyRules.plainKey(for: url) else { return [] }
        return list().filter { $0.info.key.names(plain) }
    }
}
