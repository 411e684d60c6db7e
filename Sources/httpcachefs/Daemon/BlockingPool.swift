import NIOPosix

/// The command line's one pool for blocking work (docs/threads.md): a fixed set of threads,
/// started with the first job, that every command's blocking calls share. Eight, because a
/// daemon parks one on its FUSE loop for its life and an HLS preload runs a few segment reads at
/// once; further jobs wait their turn instead of starting threads.
enum BlockingPool {
    static let shared: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 8)
        pool.start()
        return pool
    }()
}
