import NIOPosix
import Proxy

/// The process's SwiftNIO event loops: the proxy serves on them and the cache tier's node client
/// fetches on them, so a proxied miss is read, fetched from a node and answered on one thread.
/// Made on first use; they live as long as the process (every user stops its own work on them:
/// the proxy closes its connections, the node client cancels its transfers).
enum DaemonLoops {
    static let shared = MultiThreadedEventLoopGroup(numberOfThreads: ProxyConfiguration.defaultThreads)
}
