import CacheCore
import Foundation
import Glibc
import Logging

/// Remote files as a read-only FUSE mount, served from the cache.
///
/// Typical use (the `mount` command does exactly this):
/// ```
/// let fs = FuseFileSystem(engine: engine, tree: spec, options: options, logger: logger)
/// try fs.start(at: "/mnt/media")   // mounted and initialised when this returns
/// ...                              // SIGHUP: fs.reload(tree:); SIGTERM: fs.unmount()
/// fs.wait()                        // returns after unmount (ours, or fusermount3 -u)
/// engine.shutdown()
/// ```
/// Or drive the loop yourself: `mount(at:)`, then `run()` on a thread of your own.
public final class FuseFileSystem: Sendable {
    let core: FileSystemCore
    let session: FuseSession
    public let options: MountOptions
    let logger: Logger
    private let done = DispatchSemaphore(value: 0)
    private let ready = DispatchSemaphore(value: 0)
    /// Set when `run()` returns: whether it did, and the loop's error if it ended on one; and the
    /// `ended()` callers to resume then.
    private let outcome = LockedValue<Outcome>(Outcome())
    private struct Outcome {
        var finished = false
        var error: String?
        var waiting: [@Sendable (String?) -> Void] = []
    }
    /// The engine's counters, where the status document lists this mount.
    private let metrics: CacheMetrics?

    /// A mount of `engine`'s cache, on the engine's clock (`CacheConfiguration.engineClock`, which
    /// the executable's wiring gave it): one time for the cache and its mount.
    public convenience init(engine: CacheEngine, tree: MountTreeSpec, options: MountOptions, logger: Logger) {
        self.init(backend: EngineBackend(engine: engine), tree: tree, options: options,
                  clock: engine.configuration.engineClock, logger: logger)
    }

    /// - Parameter clock: the mount's time (read deadlines and listing timeouts run on its
    ///   scheduler; listings are timed and aged by it); no default, so that a test's mount runs
    ///   on the clock the test gives.
    public init(backend: MountBackend, tree: MountTreeSpec, options: MountOptions, clock: EngineClock, logger: Logger) {
        self.metrics = (backend as? EngineBackend)?.engine.metrics
        self.options = options
        self.logger = logger
        core = FileSystemCore(backend: backend, spec: tree, options: options, clock: clock, logger: logger)
        session = FuseSession(core: core, options: options, logger: logger)
        session.onReady = { [weak self] in
            guard let self else { return }
            // After INIT: the kernel sets readahead from the INIT reply and would undo it earlier.
            if let mp = self.session.mountpoint { self.tuneReadahead(mp) }
            self.ready.signal()
        }
    }

    /// The tree in force (changes with `reload(tree:)`).
    public var tree: MountTreeSpec { core.spec }

    public var mountpoint: String? { session.mountpoint }

    /// Mounts at `mountpoint` (which must exist). Requests are served once `run()` runs.
    /// Listings fetched and parsed before the mount (the mount check's, keyed by listing URL,
    /// fetched from `at` on): the tree takes them as its first listings, so nothing is fetched
    /// or parsed twice. Call before `mount`/`start`.
    public func seedListings(_ listings: [String: ListingFetch.Listing], at: Date) {
        core.seedListings(listings, at: at)
    }

    public func mount(at mountpoint: String) throws {
        try session.mount(at: mountpoint)
        metrics?.addDoor(.mount(session.mountpoint ?? mountpoint, urls: Self.servedURLs(core.spec)))
    }

    /// What the status page shows a mount serves: its directories' URLs, then the folders of
    /// its files listed one by one, each once.
    static func servedURLs(_ spec: MountTreeSpec) -> [String] {
        var seen = Set<String>(), urls: [String] = []
        func add(_ url: String) { if seen.insert(url).inserted { urls.append(url) } }
        for i in spec.indexes { add(i.url) }
        for f in spec.files {
            guard urls.count < DoorInfo.urlLimit else { break }
            let noQuery = f.url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? f.url
            if let slash = noQuery.lastIndex(of: "/") { add(String(noQuery[...slash])) }
        }
        return urls
    }

    /// Serves requests on the calling thread until `unmount()`, an external unmount
    /// (`fusermount3 -u`) or a dead connection; then unmounts and releases everything.
    /// Never call this from Swift's cooperative pool: it blocks.
    public func run() {
        let door = session.mountpoint.map(DoorInfo.mount)
        defer { if let door { metrics?.removeDoor(door) } }
        let error = session.run()
        if let error { logger.error("FUSE loop ended: \(error)") }
        let waiting = outcome.withLock { o in
            o.finished = true
            o.error = error
            defer { o.waiting = [] }
            return o.waiting
        }
        done.signal()
        for resume in waiting { resume(error) }
    }

    /// `mount(at:)`, then `run()` on a dedicated thread; returns once the kernel initialised
    /// the mount (so it is usable), or throws.
    public func start(at mountpoint: String, timeout: TimeInterval = 30) throws {
        try mount(at: mountpoint)
        let thread = Thread { [self] in
            BlockingIOPool.nameCurrentThread("fuse-loop")  // as `top` and `perf` show it
            run()
        }
        thread.name = "httpcachefs-fuse"
        thread.start()
        if ready.wait(timeout: .now() + timeout) == .timedOut {
            unmount()
            wait()
            throw FuseMountError.notReady(path: mountpoint)
        }
    }

    /// Asks the loop to end and unmount. Returns at once; `wait()` for the end.
    public func unmount() { session.stop() }

    /// The first half of a graceful stop: the mountpoint is detached at once (nothing new opens
    /// there; it shows the directory underneath again), files already open are still served, and
    /// the loop ends by itself once the last is closed. `unmount()` ends it sooner (a timeout).
    public func detach() throws { try session.detach() }

    /// Files open through the mount now.
    public var openFileCount: Int { core.openFileCount }

    /// Blocks until `run()` has returned (after `unmount()` or an external unmount).
    /// Returns the loop's error, if it ended on one.
    @discardableResult
    public func wait() -> String? {
        done.wait()
        done.signal()  // let other waiters through too
        return outcome.withLock { $0.error }
    }

    /// `wait()` without holding a thread (the mount command awaits this for its whole life):
    /// returns once `run()` has returned, with the loop's error if it ended on one.
    public func ended() async -> String? {
        await withCheckedContinuation { continuation in
            let now: String?? = outcome.withLock { o in
                if o.finished { return .some(o.error) }
                o.waiting.append { continuation.resume(returning: $0) }
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    public var isRunning: Bool { outcome.withLock { !$0.finished } }

    /// Calls `handler` once the loop has ended (at once if it has), on the loop's thread and
    /// before any `ended()` caller resumes: what the mountpoint started (its `--on-change`
    /// command) is ended before the daemon hears the mountpoint is gone and ends itself.
    public func whenEnded(_ handler: @escaping @Sendable () -> Void) {
        let now = outcome.withLock { o in
            if o.finished { return true }
            o.waiting.insert({ _ in handler() }, at: 0)
            return false
        }
        if now { handler() }
    }

    /// Swaps in a new tree (URL-list reload): removed entries vanish, new ones appear, nodes
    /// that did not change keep their inodes, open files and kernel caches.
    public func reload(tree: MountTreeSpec) {
        core.reload(spec: tree)
    }

    /// Calls `handler` (on an engine or FUSE thread; it must not block) with the paths of files
    /// and folders a refresh added, removed or changed, under the mountpoint: once per listing
    /// refreshed as its TTL ran out, once for all the listings of `refreshListings`.
    public func onChange(_ handler: @escaping @Sendable ([String]) -> Void) {
        let session = session
        core.setChangeHandler { paths in
            let root = session.mountpoint ?? ""
            handler(paths.map { root + "/" + $0 })
        }
    }

    /// Re-reads the directory listings at and under `path` (components inside the mount; empty:
    /// the whole mount) now, whatever their TTL. nil when `path` is not in the mount.
    public func refreshListings(under path: [String]) async -> ListingRefresh? {
        await withCheckedContinuation { continuation in
            core.refreshListings(under: path) { continuation.resume(returning: $0) }
        }
    }

    /// Linux caps FUSE readahead at 128 KiB unless the mount's BDI says otherwise, which cuts
    /// every sequential read into 128 KiB requests. One max_read (1 MiB) of kernel readahead
    /// is the sweet spot measured here: 2.4x faster cold reads than 128 KiB; 4 MiB and more were
    /// slower, since the cache does its own, larger read-ahead and deeper kernel readahead only
    /// makes it cancel and re-plan fetches. Root only, best effort.
    private func tuneReadahead(_ mountpoint: String) {
        guard geteuid() == 0 else { return }
        // Not stat(): it would wait for INIT, which nobody answers before run() starts.
        guard let dev = Mountpoint.deviceNumber(of: mountpoint) else { return }
        let path = "/sys/class/bdi/\(dev)/read_ahead_kb"
        let kb = max(options.effectiveMaxRead / 1024, 128)
        if (try? "\(kb)\n".write(toFile: path, atomically: false, encoding: .utf8)) != nil {
            logger.debug("readahead for \(mountpoint) set to \(kb) KiB")
        }
    }
}
