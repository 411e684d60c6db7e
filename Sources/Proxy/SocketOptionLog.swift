import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Sets a socket option on an accepted connection and says, once per option, when the kernel
/// refuses it, naming the option: a refused option is logged and the connection kept, where a
/// bootstrap's `childChannelOption` closes the connection without a word.
///
/// Threads: runs on the connection's event loop, inside the channel initializer.
enum SocketOptionLog {
    private static let reported = NIOLockedValueBox<Set<String>>([])

    static func set<Option: ChannelOption>(_ option: Option, value: Option.Value, name: String, on channel: Channel,
                                           logger: Logger) {
        do {
            try channel.syncOptions?.setOption(option, value: value)
        } catch {
            guard reported.withLockedValue({ $0.insert(name).inserted }) else { return }
            logger.warning("cannot set the socket option \(name) on a proxy connection; serving without it",
                           metadata: ["error": "\(error)"])
        }
    }
}
