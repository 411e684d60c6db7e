import CacheCore

/// The command line's pool for blocking work (docs/threads.md): a `BlockingIOPool` whose jobs
/// may wait for the engine (opening the cache, shutdown, `cache export`'s waits for its chunked
/// reads, streams from a daemon), which is why it is not the engine's pool. Threads start as
/// jobs need them, up to eight (an HLS preload runs a few segment reads at once), and end after
/// two idle seconds: a daemon uses it while it starts and stops, and for its control requests,
/// so its threads would otherwise sit through the first seconds of a mount's load (a thread
/// started again costs tens of microseconds); further jobs wait their turn instead of starting
/// threads.
enum BlockingPool {
    static let shared = BlockingIOPool(name: "httpcachefs-cmd", threads: 8, idleTime: 2, waits: true)
}
