import ArgumentParser
import CacheCore
import Foundation
import Settings

/// How long bytes stay, how far reads run ahead and what stays in memory: `--cache-max-age`,
/// `--read-ahead-max`, `--scan-share` and `--entry-memory`.
/// Part of `CacheOptions` (every subcommand), each also a config-file key of the same name.
struct CacheLimitOptions: ParsableArguments {
    @Option(name: [.customLong("cache-max-age"), .customLong("vfs-cache-max-age")], parsing: .unconditional,
            help: ArgumentHelp("Evict files not read for this long, besides the --cache-size cap, e.g. 12h, 30d (default: no age limit). Open files are kept. rclone name: --vfs-cache-max-age.", valueName: "duration"))
    var maxAge: String?

    @Option(name: [.customLong("read-ahead-max"), .customLong("buffer-size"), .customLong("vfs-read-ahead"), .customLong("max-read-ahead")],
            parsing: .unconditional,
            help: ArgumentHelp("Largest read-ahead of a sequential reader: it starts at 256K and grows fourfold per sequential read up to this (default: 32M, with --tier 256M; 0: no read-ahead beyond what is read). rclone names: --buffer-size, --vfs-read-ahead, --max-read-ahead (one read-ahead here).", valueName: "size"))
    var maxReadAhead: String?

    @Option(name: .customLong("scan-share"), parsing: .unconditional,
            help: ArgumentHelp("Part of the cache size kept for the bytes media scanners read (ffprobe, mediainfo, minidlna...: headers, indexes, tails), as a percentage or a size, e.g. 2%, 100M (default: 2%; 0: none). Evicted last and only by each other, kept across restarts, so a re-scan after playback needs no origin request. preload --head/--tail fills it too.", valueName: "percent|size"))
    var scanShare: String?

    @Option(name: .customLong("entry-memory"), parsing: .unconditional,
            help: ArgumentHelp("Memory for cached files' entries that no reader uses now, kept for their next open, e.g. 16M, 256M (default: 16M, about 13,000 entries; 0: only those in use). The others stay in the cache's index on disk and are read again when opened: memory grows with what is open, not with what is cached.", valueName: "size"))
    var entryMemory: String?

    /// The largest `--entry-memory`: about 13 million entries (past that, memory is no longer the point).
    static let maxEntryMemory: Int64 = 16 << 30

    init() {}

    /// Merges flags over `file` into `r`.
    func resolve(into r: inout ResolvedCacheOptions, file: ConfigFile?) throws {
        if let v = setting(maxAge, "cache-max-age", in: file) {
            let age = try DurationValue.parse(v.text, option: v.option)
            guard age >= 1 else { throw UsageError("cache max age '\(v.text)' for \(v.option) must be at least 1s") }
            r.maxAge = age
        }
        if let v = setting(maxReadAhead, "read-ahead-max", in: file) {
            let size = try ByteSize.parse(v.text, option: v.option)
            guard size <= 1 << 30 else { throw UsageError("read-ahead '\(v.text)' for \(v.option) is too large: at most 1G") }
            r.maxReadAhead = size
        }
        if let v = setting(scanShare, "scan-share", in: file) {
            r.scanShare = try ScanShareValue.parse(v.text, capacity: r.capacity, option: v.option)
        }
        if let v = setting(entryMemory, "entry-memory", in: file) {
            let size = try ByteSize.parse(v.text, option: v.option)
            guard size <= Self.maxEntryMemory else { throw UsageError("entry memory '\(v.text)' for \(v.option) is too large: at most 16G") }
            r.entryMemory = size
        }
    }
}
