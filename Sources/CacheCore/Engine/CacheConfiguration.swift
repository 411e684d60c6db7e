import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Everything the engine needs to know about where and how to cache.
public struct CacheConfiguration: Sendable {
    /// Root of the cache: `index.sqlite`, `data/`, `lock`.
    public var directory: String
    /// Upper bound for cached bytes (`--cache-size`).
    public var capacity: Int64
    /// Half the cap: the most any one claim on the cache may hold, so eviction always has the
    /// other half to work with: the user's pins all together (`CacheEngine.pinLimit`, and at
    /// start `Evictor.holdPinsUnderTheCap`) and one body of unknown length
    /// (`TransferStarts.unknownLengthLimit`).
    public var halfCapacity: Int64 { Self.halfCapacity(of: capacity) }
    /// Half of a cap of `capacity` bytes (`halfCapacity`), for what knows the cap only: `preload
    /// --pin`'s limit, `cache ls`'s footer.
    public static func halfCapacity(of capacity: Int64) -> Int64 { capacity / 2 }
    /// Keep at least this fraction of the file system free (evicting below the cap if needed).
    public var freeSpaceFloor: Double
    /// Size of one slice, the unit of accounting and eviction (`--slice-size`).
    public var sliceSize: Int64
    /// Entries older than this are revalidated with the origin before use (`--revalidate-after`).
    public var revalidateAfter: TimeInterval
    /// A read waiting on the network fails after this long (`--read-timeout`).
    public var readTimeout: TimeInterval
    /// Cache key rules (`--ignore-query`).
    public var keyRules: KeyRules
    /// Number of independent lock domains for per-entry state.
    public var shardCount: Int
    /// Read-ahead of a reader's first read (and after a seek); it grows fourfold per read while the reader stays
    /// sequential. 256 KiB measured best: random 64 KiB reads through the mount took 0.39 ms
    /// (p50) against 0.66 ms with 1 MiB, and sequential streams ramp up within a few reads.
    public var initialReadAhead: Int64
    /// Largest read-ahead window for a sequential reader.
    public var maxReadAhead: Int64
    /// Most parallel streams one sequential reader's read-ahead is split into (1: no split).
    public var maxStreams: Int
    /// Smallest stream: below that, a new request costs more than it brings.
    public var minStreamSize: Int64
    /// A stream carries about this long a transfer at the per-connection rate measured.
    public var streamSeconds: Double
    /// Entries not read for this long lose their bytes (`--cache-max-age`), besides the cap;
    /// nil: only the cap evicts. Slices in use and entries with an open reader are kept.
    public var maxAge: TimeInterval? = nil
    /// `--scan-share`: bytes of the cap kept for the slices scanner-class readers read
    /// (`ScanShare`); nil: `defaultScanSharePercent` of `capacity`; 0: no share.
    public var scanShare: Int64? = nil
    /// The scan share in bytes, as eviction keeps it.
    public var scanShareBytes: Int64 { max(0, min(capacity, scanShare ?? capacity * Self.defaultScanSharePercent / 100)) }
    /// The scan share's default, in percent of the cap: 2% of 5 GiB keeps the head and tail slices
    /// of a few thousand probed films (a probe fetches a few dozen KiB of each).
    public static let defaultScanSharePercent: Int64 = 2
    /// `--egress-budget`: each origin's use, shown in the status document and /metrics (the
    /// fetcher, given the same ledger, counts and enforces it); nil: no budget.
    public var egressLedger: EgressLedger? = nil
    /// `--bwlimit`: the limit in force at a time and the timetable's next change, for the status
    /// document (the fetcher enforces it); nil: no limit was given.
    public var bandwidthLimit: (@Sendable (Date) -> BandwidthLimitStatus)? = nil
    /// `--tpslimit`: requests a second to each origin, for the status document (the fetcher
    /// enforces it); nil: no limit.
    public var requestRateLimit: Double? = nil
    /// `--ignore-etag`: versions are told apart by length and Last-Modified only, and `If-Range`
    /// carries Last-Modified (for origins whose ETags change on every answer).
    public var ignoreETag = false
    /// The engine's clocks and scheduler (`EngineClock`), given by whoever builds the engine:
    /// the executable's wiring gives the machine's (`EngineClock.system`), tests their own. No
    /// default, so no part falls back to the machine's clock unseen.
    public var engineClock: EngineClock
    /// The time reads are stamped with and entries are aged by (`engineClock`'s wall clock):
    /// tests pass a clock of their own.
    public var clock: @Sendable () -> Date {
        get { engineClock.wall }
        set { engineClock.wall = newValue }
    }
    /// The `MemoryBudget`'s shares. Arrived bytes that may wait for the disk writer, in all and
    /// per transfer: memory bounded by design (a transfer past its share pauses until the writer
    /// drained).
    public var writeBudget: Int64 = 4 << 20
    public var writeBudgetPerTransfer: Int64 = 1 << 20
    /// Chunk memory that reads may hold (waiting for the rest of their bytes, or answered and
    /// not yet replied); past it, they are answered from the write queue and the data file.
    public var readRetentionBudget: Int64 = 16 << 20
    /// Memory for entries nobody uses, kept in memory after their last use (`EntryLoader`):
    /// counted at `EntryLoader.entryMemoryEstimate` (1.25 KiB, measured) an entry, 16 MiB keep 13,107;
    /// the rest are in the index, loaded again when looked up. Entries in use are not counted.
    /// `--entry-memory`.
    public var entryMemoryBudget: Int64 = CacheConfiguration.defaultEntryMemoryBudget
    /// Threads of the engine's one pool for blocking I/O (`EngineCore.pool`): answers of reads
    /// that waited, checksum checks, chunked reads, eviction and removals. Eight: a job blocks on
    /// one disk request at a time, and eight in flight keep an SSD's or a NAS's queue busy (the
    /// FUSE disk pool's measure); more would only queue in the kernel, fewer would leave a slow
    /// disk with one request at a time behind a long job (a scrub, an eviction round). Tests
    /// pass 1 to show that no job waits for another.
    public var blockingIOThreads = 8
    /// How the start's check opens a data file (`open(2)`, read-only); tests make it fail.
    /// -1 and errno on failure.
    var openDataFileForCheck: @Sendable (String) -> Int32 = { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
    /// Tests: run on the start's count of the index (`countIndexEntries`) once its read began,
    /// before it counts the first entry: a test holds the count there while it changes entries.
    var startCountHook: (@Sendable () -> Void)?
    /// Tests: told of each data folder the clean-up after the start is about to walk, and of a
    /// stop being asked (`StartCleanUp.Step`): a test holds the walk at a folder until the stop.
    var startCleanUpHook: (@Sendable (StartCleanUp.Step) -> Void)?
    /// Names of a data folder the clean-up after the start reads before it looks them up in the
    /// index and deletes the orphans among them (`DataFileWalk`); tests make it small.
    var startCleanUpBatch = 1024

    public static let defaultSliceSize: Int64 = 4 << 20
    public static let defaultCapacity: Int64 = 5 << 30
    public static let defaultMaxReadAhead: Int64 = 32 << 20
    public static let defaultEntryMemoryBudget: Int64 = 16 << 20

    public init(directory: String,
                capacity: Int64 = CacheConfiguration.defaultCapacity,
                freeSpaceFloor: Double = 0.05,
                sliceSize: Int64 = CacheConfiguration.defaultSliceSize,
                revalidateAfter: TimeInterval = 600,
                readTimeout: TimeInterval = 60,
                keyRules: KeyRules = KeyRules(),
                shardCount: Int = 16,
                initialReadAhead: Int64 = 256 << 10,
                maxReadAhead: Int64 = CacheConfiguration.defaultMaxReadAhead,
                maxStreams: Int = 8,
                minStreamSize: Int64 = 1 << 20,
                streamSeconds: Double = 0.05,
                engineClock: EngineClock) {
        self.directory = directory
        self.engineClock = engineClock
        self.capacity = capacity
        self.freeSpaceFloor = freeSpaceFloor
        self.sliceSize = sliceSize
        self.revalidateAfter = revalidateAfter
        self.readTimeout = readTimeout
        self.keyRules = keyRules
        self.shardCount = shardCount
        self.initialReadAhead = initialReadAhead
        self.maxReadAhead = maxReadAhead
        self.maxStreams = maxStreams
        self.minStreamSize = minStreamSize
        self.streamSeconds = streamSeconds
    }

    /// `$HTTPCACHEFS_CACHE_DIR` (the systemd unit sets it per instance, so a `cache-dir` in the
    /// instance's config file still wins), else `$XDG_CACHE_HOME/httpcachefs`, else for root
    /// `/var/cache/httpcachefs` (fstab mounts run as root, whose `~/.cache` is no place for a
    /// library's cache), else `~/.cache/httpcachefs`.
    public static var defaultDirectory: String {
        let env = ProcessInfo.processInfo.environment
        if let dir = env["HTTPCACHEFS_CACHE_DIR"], !dir.isEmpty { return dir }
        if let xdg = env["XDG_CACHE_HOME"], !xdg.isEmpty { return xdg + "/httpcachefs" }
        if geteuid() == 0 { return "/var/cache/httpcachefs" }
        let home = env["HOME"] ?? NSHomeDirectory()
        return home + "/.cache/httpcachefs"
    }
}
