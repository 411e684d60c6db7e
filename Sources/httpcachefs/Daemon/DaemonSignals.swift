import CacheCore
import Dispatch
import Foundation

/// SIGINT and SIGTERM stop a daemon gracefully (the proxy: connections closed, readers released,
/// the index flushed; a mount: `GracefulStop`) instead of killing it mid-write; SIGHUP, where the
/// daemon has a `reload`, reloads its URL list. Handlers run on a queue of their own, never in
/// signal context. The one signal set of `proxy`, a mount daemon and `mount --foreground` on a
/// running daemon (`MountJoin`).
final class DaemonSignals: Sendable {
    private let sources: LockedValue<[DispatchSourceSignal]>
    private let handled: [Int32]
    private let restoresDefaults: Bool

    /// - Parameters:
    ///   - stop: SIGINT and SIGTERM (given the signal).
    ///   - reload: SIGHUP; nil: SIGHUP keeps its default action.
    ///   - ignoresSIGPIPE: a mount's writes to a reader gone away fail with EPIPE instead.
    ///   - restoresDefaults: `cancel` gives the signals their default action back (`proxy`, which
    ///     goes on to shut the engine down: a second Ctrl-C then ends it).
    init(queue label: String, stop: @escaping @Sendable (Int32) -> Void, reload: (@Sendable () -> Void)? = nil,
         ignoresSIGPIPE: Bool = false, restoresDefaults: Bool = false) {
        if ignoresSIGPIPE { signal(SIGPIPE, SIG_IGN) }
        let queue = DispatchQueue(label: label)
        let handled = [SIGINT, SIGTERM] + (reload == nil ? [] : [SIGHUP])
        var made: [DispatchSourceSignal] = []
        for sig in handled {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { if sig == SIGHUP, let reload { reload() } else { stop(sig) } }
            source.resume()
            made.append(source)
        }
        sources = LockedValue(made)
        self.handled = handled
        self.restoresDefaults = restoresDefaults
    }

    func cancel() {
        sources.withLock { sources in
            sources.forEach { $0.cancel() }
            sources = []
        }
        if restoresDefaults { for sig in handled { signal(sig, SIG_DFL) } }
    }
}
