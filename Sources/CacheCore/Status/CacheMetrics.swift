import Atomics
import CoreMetrics
import Foundation

/// What one cache counts, for `/metrics`, the status page and `httpcachefs status`.
///
/// Design: every metric object is made once, here, through swift-metrics with the factory this
/// engine was given (never `MetricsSystem.bootstrap`: many engines live in one test process, and
/// each must count alone). The cache knows only swift-metrics: whoever chooses the backend (the
/// executable: a Prometheus registry, see the `MetricsExport` target) passes its factory in and
/// renders the text. Counting an event is a few relaxed atomic adds (a `Tally` keeps its own
/// total next to the backend's counter, for the status document, whatever the backend) and, for
/// a read, one histogram sample and one short lock on a per-file table; nothing on the read path
/// allocates. Gauges (bytes used, capacity, entries, fetches in flight) are set just before a
/// scrape (`CacheEngine.recordMetricGauges()`).
public final class CacheMetrics: Sendable {
    /// When this cache was opened (the daemon's start, for a daemon).
    public let startedAt: Date
    /// Stamps the recent errors.
    private let clock: EngineClock

    // Indexed by `ReadDoor.index`, then [cache, origin] / [hit, miss].
    private let servedBytes: [[Tally]]
    private let reads: [[Tally]]
    /// Reads that failed (not cancelled), by door: counted in the hit ratio's reads.
    private let failedReads: [Tally]
    /// Opens that failed (no bytes could be read at all): also no hit.
    private let failedOpens: Tally
    /// FUSE read latency (engine part: from the read to its answer) and proxy time to first byte.
    private let fuseReadSeconds: [CoreMetrics.Timer]
    private let proxyFirstByteSeconds: [CoreMetrics.Timer]
    /// How long reads that needed origin bytes waited for them, by door.
    private let readWaitSeconds: [CoreMetrics.Timer]
    /// Bytes fetched before any read wanted them, and of those, the bytes read since: the
    /// difference is read-ahead nobody has read (yet, or ever: after a seek, at a close).
    let readAheadBytes: Tally
    let readAheadReadBytes: Tally
    /// Cached bytes found damaged on disk (checksum mismatch) and fetched again.
    let damagedBytes: Tally
    /// By `OriginClass`.
    private let originRequests: [Tally]
    let originBytes: Tally
    let retries: Tally
    let evictions: Tally
    let evictedBytes: Tally
    let remoteChanges: Tally
    private let errors: [ErrorKind: Tally]
    private let usedBytes: CoreMetrics.Gauge, capacityBytes: CoreMetrics.Gauge, freeFloorBytes: CoreMetrics.Gauge, entries: CoreMetrics.Gauge, slices: CoreMetrics.Gauge, inFlight: CoreMetrics.Gauge
    private let originsDown: CoreMetrics.Gauge
    /// For the metrics made as they are needed (one series per origin with a budget).
    private let factory: any MetricsFactory
    /// By `ReaderClass` (its index in `allCases`): reads, the bytes they were answered
    /// ([cache, origin]), and the origin requests their plans started with the bytes asked for.
    private let classReads: [Tally]
    private let classBytes: [[Tally]]
    private let classFetches: [Tally]
    private let classFetchBytes: [Tally]
    /// By fetcher (`UnreadFetched.index(of:)`: the classes, then the open's probe, labelled
    /// "open"): the bytes its transfers brought, and those of them that left the cache unread.
    private let ownerReceived: [Tally]
    private let ownerWasted: [Tally]
    /// Requests and bytes by origin (`OriginTraffic`).
    public let originTraffic: OriginTraffic

    private struct Listed {
        var recent = RecentErrors(capacity: 50)
        var doors: [DoorInfo] = []
    }
    private let listed = LockedValue(Listed())

    /// The `# HELP` text of each metric family (swift-metrics carries none, and Prometheus wants it).
    public static let help: [String: String] = [
        "httpcachefs_served_bytes_total": "Bytes answered to readers, by where they came from (cache: data files, origin: arrived while the read waited) and by door (fuse, proxy, cli).",
        "httpcachefs_reads_total": "Reads by door and result (hit: all bytes were cached; miss: some came from the origin; failed: no answer but an error).",
        "httpcachefs_fuse_read_duration_seconds": "Time from a FUSE read to its answer from the cache engine, by result.",
        "httpcachefs_proxy_first_byte_seconds": "Time from a proxy request's head to its first body bytes, by result.",
        "httpcachefs_read_wait_seconds": "Time reads that needed origin bytes waited for them, by door.",
        "httpcachefs_read_ahead_bytes_total": "Bytes fetched from origins before any read wanted them (read-ahead, preload).",
        "httpcachefs_read_ahead_read_bytes_total": "Of the read-ahead bytes, those read since (the difference was never read, or not yet).",
        "httpcachefs_damaged_bytes_total": "Cached bytes whose checksum did not match when checked (before first being served after a start, or by the scrub); dropped and fetched again.",
        "httpcachefs_origin_requests_total": "Origin transfers by the class of their final answer (retried attempts not included; error: no HTTP answer).",
        "httpcachefs_origin_bytes_total": "Body bytes received from origins.",
        "httpcachefs_origin_retries_total": "Origin attempts retried (dropped connection, 5xx, 429, a range answered with 200).",
        "httpcachefs_evictions_total": "Slices evicted to stay under the cap and the free-space floor.",
        "httpcachefs_evicted_bytes_total": "Cached bytes evicted.",
        "httpcachefs_remote_changes_total": "Times a remote file was found to have changed (a new generation).",
        "httpcachefs_errors_total": "Failed reads and opens, by kind.",
        "httpcachefs_cache_used_bytes": "Bytes cached on disk.",
        "httpcachefs_cache_capacity_bytes": "The cap on cached bytes (--cache-size).",
        "httpcachefs_cache_free_floor_bytes": "Free space kept on the cache's file system (evicting below the cap if needed).",
        "httpcachefs_cache_entries": "Files the cache knows.",
        "httpcachefs_cache_slices": "Slice files holding cached bytes.",
        "httpcachefs_fetches_in_flight": "Origin transfers running now.",
        "httpcachefs_failed_opens_total": "Opens that failed (no read could start); with failed reads, counted as reads that were no hit in the hit ratio.",
        "httpcachefs_reader_reads_total": "Reads by the class of their reader (scanner, player, unknown, background: by the process that opened the file).",
        "httpcachefs_reader_served_bytes_total": "Bytes answered to readers by reader class and by where they came from (cache, origin).",
        "httpcachefs_reader_fetches_total": "Origin requests started for readers' reads and read-ahead, by reader class.",
        "httpcachefs_reader_fetch_bytes_total": "Bytes those requests asked for, by reader class (a request stopped early by a seek or a close delivers less).",
        "httpcachefs_reader_received_bytes_total": "Bytes the origin (or a cache tier node) sent for each reader class's requests; reader=\"open\": an open's first request, made before its reader is known.",
        "httpcachefs_reader_wasted_bytes_total": "Of the received bytes, those that left the cache (evicted, unreadable, a new version of the file) without any reader having read them; bytes cached before the daemon's start are not counted.",
        "httpcachefs_origin_host_requests_total": "HTTP requests sent to each origin (scheme://host:port), retries included, by when they were answered or failed.",
        "httpcachefs_origin_host_requests_per_second": "Requests a second to each origin over the last 10 seconds (compare with --tpslimit).",
        "httpcachefs_origin_host_bytes_total": "Body bytes received from each origin, counted as each transfer ends.",
        "httpcachefs_origins_down": "Origins that cannot be reached now (cached bytes are served, other reads fail at once until a probe gets an answer).",
        "httpcachefs_egress_budget_bytes": "Each origin's egress budget per period (--egress-budget).",
        "httpcachefs_egress_budget_used_bytes": "Bytes of each origin's egress budget used this period.",
        "httpcachefs_egress_budget_left_bytes": "Bytes left of each origin's egress budget this period (0: spent, fetches fail until the reset).",
        "httpcachefs_egress_budget_reset_timestamp_seconds": "When each origin's egress budget resets (Unix time).",
    ]

    /// Makes every metric through `factory`; the default records nothing but the totals (a cache
    /// with no `/metrics`: the CLI, most tests).
    public init(factory: any MetricsFactory = NOOPMetricsHandler.instance, clock: EngineClock) {
        self.factory = factory
        self.clock = clock
        startedAt = clock.wall()
        let results = ["hit", "miss"]
        failedOpens = Tally("httpcachefs_failed_opens_total", [], factory)
        failedReads = ReadDoor.allCases.map { Tally("httpcachefs_reads_total", [("door", $0.rawValue), ("result", "failed")], factory) }
        servedBytes = ReadDoor.allCases.map { door in
            ["cache", "origin"].map { Tally("httpcachefs_served_bytes_total", [("door", door.rawValue), ("source", $0)], factory) }
        }
        reads = ReadDoor.allCases.map { door in
            results.map { Tally("httpcachefs_reads_total", [("door", door.rawValue), ("result", $0)], factory) }
        }
        fuseReadSeconds = results.map {
            CoreMetrics.Timer(label: "httpcachefs_fuse_read_duration_seconds", dimensions: [("result", $0)], factory: factory)
        }
        proxyFirstByteSeconds = results.map {
            CoreMetrics.Timer(label: "httpcachefs_proxy_first_byte_seconds", dimensions: [("result", $0)], factory: factory)
        }
        readWaitSeconds = ReadDoor.allCases.map {
            CoreMetrics.Timer(label: "httpcachefs_read_wait_seconds", dimensions: [("door", $0.rawValue)], factory: factory)
        }
        readAheadBytes = Tally("httpcachefs_read_ahead_bytes_total", [], factory)
        readAheadReadBytes = Tally("httpcachefs_read_ahead_read_bytes_total", [], factory)
        damagedBytes = Tally("httpcachefs_damaged_bytes_total", [], factory)
        originRequests = OriginClass.allCases.map {
            Tally("httpcachefs_origin_requests_total", [("class", $0.rawValue)], factory)
        }
        originBytes = Tally("httpcachefs_origin_bytes_total", [], factory)
        retries = Tally("httpcachefs_origin_retries_total", [], factory)
        evictions = Tally("httpcachefs_evictions_total", [], factory)
        evictedBytes = Tally("httpcachefs_evicted_bytes_total", [], factory)
        remoteChanges = Tally("httpcachefs_remote_changes_total", [], factory)
        var errors: [ErrorKind: Tally] = [:]
        for kind in ErrorKind.allCases { errors[kind] = Tally("httpcachefs_errors_total", [("kind", kind.rawValue)], factory) }
        self.errors = errors
        func gauge(_ name: String) -> CoreMetrics.Gauge { CoreMetrics.Gauge(label: name, dimensions: [], factory: factory) }
        usedBytes = gauge("httpcachefs_cache_used_bytes")
        capacityBytes = gauge("httpcachefs_cache_capacity_bytes")
        freeFloorBytes = gauge("httpcachefs_cache_free_floor_bytes")
        entries = gauge("httpcachefs_cache_entries")
        slices = gauge("httpcachefs_cache_slices")
        inFlight = gauge("httpcachefs_fetches_in_flight")
        originsDown = gauge("httpcachefs_origins_down")
        classReads = ReaderClass.allCases.map { Tally("httpcachefs_reader_reads_total", [("reader", $0.rawValue)], factory) }
        classBytes = ReaderClass.allCases.map { c in
            ["cache", "origin"].map { Tally("httpcachefs_reader_served_bytes_total", [("reader", c.rawValue), ("source", $0)], factory) }
        }
        classFetches = ReaderClass.allCases.map { Tally("httpcachefs_reader_fetches_total", [("reader", $0.rawValue)], factory) }
        classFetchBytes = ReaderClass.allCases.map { Tally("httpcachefs_reader_fetch_bytes_total", [("reader", $0.rawValue)], factory) }
        let owners = ReaderClass.allCases.map(\.rawValue) + [Self.openOwner]
        ownerReceived = owners.map { Tally("httpcachefs_reader_received_bytes_total", [("reader", $0)], factory) }
        ownerWasted = owners.map { Tally("httpcachefs_reader_wasted_bytes_total", [("reader", $0)], factory) }
        originTraffic = OriginTraffic(factory: factory, clock: clock)
    }

    /// A read of a reader of `readerClass` was answered.
    func noteRead(readerClass: ReaderClass, cacheBytes: Int64, originBytes: Int64) {
        let i = readerClass.index
        classReads[i].add(1)
        if cacheBytes > 0 { classBytes[i][0].add(cacheBytes) }
        if originBytes > 0 { classBytes[i][1].add(originBytes) }
    }

    /// A reader of `readerClass` started an origin request for `bytes` (nil: to an end not known).
    func noteFetch(readerClass: ReaderClass, bytes: Int64?) {
        classFetches[readerClass.index].add(1)
        if let bytes, bytes > 0 { classFetchBytes[readerClass.index].add(bytes) }
    }

    /// The label of the bytes an open's first request fetched, before its reader's class is known.
    public static let openOwner = "open"

    /// A transfer of a reader of `owner`'s class (nil: an open's probe) brought `bytes`.
    func noteFetched(by owner: ReaderClass?, bytes: Int64) {
        if bytes > 0 { ownerReceived[UnreadFetched.index(of: owner)].add(bytes) }
    }

    /// Fetched bytes left the cache unread.
    func noteWasted(_ wasted: WastedBytes) {
        guard !wasted.isEmpty else { return }
        for (i, n) in wasted.bytes.enumerated() where n > 0 { ownerWasted[i].add(n) }
    }

    // MARK: Events

    /// One read answered: `cacheBytes` came from data files, `originBytes` arrived while it
    /// waited; a hit had none of the latter.
    func noteRead(door: ReadDoor, cacheBytes: Int64, originBytes: Int64, nanoseconds: Int64) {
        let d = door.index, hit = originBytes == 0
        if cacheBytes > 0 { servedBytes[d][0].add(cacheBytes) }
        if originBytes > 0 { servedBytes[d][1].add(originBytes) }
        reads[d][hit ? 0 : 1].add(1)
        if door == .fuse { fuseReadSeconds[hit ? 0 : 1].recordNanoseconds(nanoseconds) }
        if !hit { readWaitSeconds[d].recordNanoseconds(nanoseconds) }
    }

    /// A proxy response's first body bytes are ready, `nanoseconds` after its request arrived.
    /// A read failed (`noteError` records why): it counts as a read that was no hit.
    func noteFailedRead(door: ReadDoor) { failedReads[door.index].add(1) }

    /// An open failed (a file never cached while its origin is down, a 404...): its reader got
    /// nothing, which the hit ratio counts as a read that was no hit.
    func noteFailedOpen() { failedOpens.add(1) }

    func noteFirstByte(hit: Bool, nanoseconds: Int64) {
        proxyFirstByteSeconds[hit ? 0 : 1].recordNanoseconds(nanoseconds)
    }

    func noteOrigin(_ cls: OriginClass) { originRequests[cls.index].add(1) }

    // MARK: Transfers, as the layer that watches them counts them (Fetcher's `FetchTracker`)

    /// A transfer's answer arrived with `status` (a head), or it ended with that HTTP status.
    public func noteOriginAnswer(status: Int) { noteOrigin(OriginClass(status: status)) }
    /// A transfer ended without an answer: no connection, a timeout, a malformed answer, a
    /// refused address.
    public func noteOriginFailure() { noteOrigin(.error) }
    /// Body bytes a transfer brought.
    public func noteOriginBytes(_ count: Int64) { originBytes.add(count) }
    /// An attempt of a transfer was retried.
    public func noteRetry() { retries.add(1) }

    public func noteEviction(slices: Int, bytes: Int64) {
        evictions.add(Int64(slices))
        evictedBytes.add(bytes)
    }

    /// A read or an open failed (cancellations are not errors).
    func noteError(_ error: CacheError, url: String, range: Range<Int64>?) {
        guard let kind = ErrorKind(error) else { return }
        errors[kind]?.add(1)
        let status: Int?
        switch error {
        case let .notFound(_, s), let .forbidden(_, s), let .httpStatus(_, s): status = s
        default: status = nil
        }
        let record = ErrorRecord(time: clock.wall(), url: url, start: range?.lowerBound, end: range.map { $0.upperBound - 1 },
                                 kind: kind.rawValue, status: status, cause: error.description)
        listed.withLock { $0.recent.append(record) }
    }

    // MARK: Doors

    /// Records a door of this cache (a mountpoint, a proxy listener) for the status document.
    public func addDoor(_ door: DoorInfo) {
        listed.withLock { $0.doors.append(door) }
    }

    /// Removes `door` (a mount by its mountpoint alone: what it serves may have changed since).
    public func removeDoor(_ door: DoorInfo) {
        listed.withLock { $0.doors.removeAll { $0 == door || ($0.kind == "mount" && door.kind == "mount" && $0.mountpoint == door.mountpoint) } }
    }

    // MARK: Reading the counts

    public var currentDoors: [DoorInfo] { listed.withLock { $0.doors } }

    /// The recent errors, newest first.
    public var recentErrors: [ErrorRecord] { listed.withLock { $0.recent.newestFirst } }

    public var totals: Totals {
        func sum(_ rows: [[Tally]], _ column: Int) -> Int64 { rows.reduce(0) { $0 + $1[column].total } }
        return Totals(servedFromCache: sum(servedBytes, 0), servedFromOrigin: sum(servedBytes, 1),
                      hits: sum(reads, 0), misses: sum(reads, 1), failedReads: failedReads.reduce(0) { $0 + $1.total } + failedOpens.total,
                      originBytes: originBytes.total,
                      originRequests: Dictionary(uniqueKeysWithValues: OriginClass.allCases.map { ($0.rawValue, originRequests[$0.index].total) }),
                      retries: retries.total, evictions: evictions.total, evictedBytes: evictedBytes.total,
                      remoteChanges: remoteChanges.total,
                      errors: Dictionary(uniqueKeysWithValues: errors.map { ($0.key.rawValue, $0.value.total) }),
                      readers: Dictionary(uniqueKeysWithValues: ReaderClass.allCases.map { c in
                          (c.rawValue, ReaderTotals(reads: classReads[c.index].total, fromCache: classBytes[c.index][0].total,
                                                    fromOrigin: classBytes[c.index][1].total, fetches: classFetches[c.index].total,
                                                    fetchedBytes: classFetchBytes[c.index].total,
                                                    receivedBytes: ownerReceived[c.index].total, wastedBytes: ownerWasted[c.index].total))
                      } + [(Self.openOwner, ReaderTotals(reads: 0, fromCache: 0, fromOrigin: 0, fetches: 0, fetchedBytes: 0,
                                                         receivedBytes: ownerReceived[ReaderClass.allCases.count].total,
                                                         wastedBytes: ownerWasted[ReaderClass.allCases.count].total))]))
    }

    /// Sets the egress budgets' gauges (`--egress-budget`), one series per origin with a budget.
    func recordBudgets(_ budgets: [EgressBudgetStatus]) {
        for b in budgets {
            let origin = [("origin", b.origin)]
            CoreMetrics.Gauge(label: "httpcachefs_egress_budget_bytes", dimensions: origin, factory: factory).record(b.budgetBytes)
            CoreMetrics.Gauge(label: "httpcachefs_egress_budget_used_bytes", dimensions: origin, factory: factory).record(b.usedBytes)
            CoreMetrics.Gauge(label: "httpcachefs_egress_budget_left_bytes", dimensions: origin, factory: factory).record(b.leftBytes)
            CoreMetrics.Gauge(label: "httpcachefs_egress_budget_reset_timestamp_seconds", dimensions: origin, factory: factory)
                .record(b.resetsAt.timeIntervalSince1970)
        }
    }

    /// Sets the gauges from `summary`, just before the backend is read.
    func recordGauges(summary: CacheSummary, fetchesInFlight: Int, originsDown down: Int = 0) {
        originsDown.record(down)
        usedBytes.record(summary.usedBytes)
        capacityBytes.record(summary.capacityBytes)
        freeFloorBytes.record(summary.freeFloorBytes)
        entries.record(summary.files)
        slices.record(summary.slices)
        inFlight.record(fetchesInFlight)
    }
}


/// The class of an origin transfer's final answer.
enum OriginClass: String, CaseIterable {
    case success = "2xx", redirection = "3xx", clientError = "4xx", serverError = "5xx", error

    init(status: Int) {
        switch status {
        case 200..<300: self = .success
        case 300..<400: self = .redirection
        case 400..<500: self = .clientError
        case 500..<600: self = .serverError
        default: self = .error
        }
    }

    var index: Int { Self.allCases.firstIndex(of: self)! }
}

/// The `kind` label of `httpcachefs_errors_total`: one per `CacheError` case a read can meet.
enum ErrorKind: String, CaseIterable {
    case invalidURL = "invalid_url", notFound = "not_found", forbidden, refusedAddress = "refused_address"
    case httpStatus = "http_status", unreachable, timeout, badResponse = "bad_response"
    case rangeNotSatisfiable = "range_not_satisfiable", storage, diskFull = "disk_full"
    case remoteChanged = "remote_changed", budgetSpent = "budget_spent"

    /// Nil for what is not a failure of the cache (a cancelled read, a held lock).
    init?(_ error: CacheError) {
        switch error {
        case .invalidURL: self = .invalidURL
        case .notFound: self = .notFound
        case .forbidden: self = .forbidden
        case .refusedAddress: self = .refusedAddress
        case .httpStatus: self = .httpStatus
        case .unreachable: self = .unreachable
        case .timeout: self = .timeout
        case .badResponse: self = .badResponse
        case .rangeNotSatisfiable: self = .rangeNotSatisfiable
        case .storage: self = .storage
        case .diskFull: self = .diskFull
        case .remoteChanged: self = .remoteChanged
        case .budgetSpent: self = .budgetSpent
        case .locked, .cancelled: return nil
        }
    }
}

/// A counter whose total can be read back (a backend's counter cannot), for the status
/// document. The total is a lock-free add; the backend's counter is whatever the factory made.
final class Tally: Sendable {
    private let value = ManagedAtomic<Int64>(0)
    private let counter: CoreMetrics.Counter

    init(_ name: String, _ dimensions: [(String, String)], _ factory: any MetricsFactory) {
        counter = CoreMetrics.Counter(label: name, dimensions: dimensions, factory: factory)
    }

    func add(_ n: Int64) {
        value.wrappingIncrement(by: n, ordering: .relaxed)
        counter.increment(by: n)
    }

    var total: Int64 { value.load(ordering: .relaxed) }
}


/// Counts since the start, for the status document.
public struct Totals: Sendable, Codable, Equatable {
    public var servedFromCache: Int64
    public var servedFromOrigin: Int64
    public var hits: Int64
    public var misses: Int64
    /// Reads and opens that failed (the origin down, an error answer...): no hit. Absent from older documents.
    public var failedReads: Int64?
    public var originBytes: Int64
    /// By class: "2xx", "3xx", "4xx", "5xx", "error".
    public var originRequests: [String: Int64]
    public var retries: Int64
    public var evictions: Int64
    public var evictedBytes: Int64
    public var remoteChanges: Int64
    /// By kind (the `kind` label of `httpcachefs_errors_total`).
    public var errors: [String: Int64]
    /// By reader class (`ReaderClass`: scanner, player, unknown, background). Absent from older documents.
    public var readers: [String: ReaderTotals]? = nil
}

/// What the readers of one class read and cost the origin.
public struct ReaderTotals: Sendable, Codable, Equatable {
    public var reads: Int64
    public var fromCache: Int64
    public var fromOrigin: Int64
    /// Origin requests their reads and read-ahead started, and the bytes those asked for.
    public var fetches: Int64
    public var fetchedBytes: Int64
    /// Bytes those requests brought (an open's first request: the row "open"), and of them the
    /// bytes that left the cache unread (evicted, unreadable, a new version): what the class
    /// cost for nothing. In memory: bytes cached before the daemon's start count as neither.
    /// Absent from older documents.
    public var receivedBytes: Int64? = nil
    public var wastedBytes: Int64? = nil
}

/// A way into this cache: a mountpoint, or a proxy listener.
public struct DoorInfo: Sendable, Codable, Equatable {
    /// "mount" or "proxy".
    public var kind: String
    public var mountpoint: String?
    public var bindAddress: String?
    public var port: Int?
    public var tokenRequired: Bool?
    /// A mount: the URLs it serves as it was mounted, each a prefix of its files' URLs (the
    /// directories it mounts, the folders of the files it lists one by one; at most
    /// `DoorInfo.urlLimit`), so the status page can show the files of one mount.
    public var urls: [String]? = nil

    public static let urlLimit = 50

    public static func mount(_ mountpoint: String) -> DoorInfo { DoorInfo(kind: "mount", mountpoint: mountpoint) }

    public static func mount(_ mountpoint: String, urls: [String]) -> DoorInfo {
        var door = DoorInfo(kind: "mount", mountpoint: mountpoint)
        door.urls = Array(urls.prefix(urlLimit))
        return door
    }

    public static func proxy(bindAddress: String, port: Int, tokenRequired: Bool) -> DoorInfo {
        DoorInfo(kind: "proxy", bindAddress: bindAddress, port: port, tokenRequired: tokenRequired)
    }
}
