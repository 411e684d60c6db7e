import CacheCore
import CFuse3
import Foundation
import Glibc
import Logging

/// `--on-change COMMAND`: runs a shell command once after a refresh found files added, removed
/// or changed, with their mount paths on its standard input, one a line (so it can tell
/// Jellyfin's `/Library/Media/Updated` or Plex's `/library/sections/N/refresh?path=` which
/// folders to scan).
///
/// Runs never hold up the mount: each runs as `/bin/sh -c COMMAND` in a process group of its
/// own, waited for on a thread of its own, one at a time (paths that arrive meanwhile go to the
/// next run, together). A run that outlives `timeout` is ended (SIGTERM to its group, SIGKILL a
/// few seconds later) and logged, as is one that fails. The paths go in through a file that is
/// already unlinked, not a pipe: a command that never reads its input cannot block the daemon.
///
/// The command starts clean: it gets the paths (0), /dev/null (1) and the daemon's log (2), and
/// no other descriptor of the daemon (the spawn closes every one from 3 up, whatever its
/// close-on-exec flag). A command, or a child it detached, that held the proxy's listening
/// socket would keep the port after the daemon ends; one that held the connection of the
/// `refresh` that triggered it would keep that command waiting for its answer's end. `stop()`
/// (the mountpoint ends) ends the run under way, its group with it.
public final class ChangeCommand: Sendable {
    public enum Outcome: Sendable, Equatable {
        case exited(Int32)
        case killedBySignal(Int32)
        /// Outlived the timeout and was ended.
        case timedOut
        case failedToStart(String)
        /// Ended, or not started, because the mountpoint ended (`stop()`).
        case stopped
    }

    public let command: String
    public let timeout: Duration
    /// Where the kill timers run (the mount's scheduler, given by the executable's wiring).
    private let timers: Scheduler
    private let logger: Logger
    /// Paths waiting for the next run, and whether a run is under way.
    private let state = LockedValue<(pending: [String], running: Bool, waiters: [@Sendable (Outcome) -> Void])>(([], false, []))
    /// The group of the run under way (its pid), until it is reaped; whether `stop()` was called,
    /// and whether it ended that run. Signalled only under this lock, and cleared under it before
    /// the reap: a reused pid is never signalled.
    private let live = LockedValue<(group: pid_t?, stopped: Bool, endedRun: Bool)>((nil, false, false))

    public init(command: String, timeout: Duration = .seconds(60), timers: Scheduler, logger: Logger) {
        self.command = command
        self.timeout = timeout
        self.timers = timers
        self.logger = logger
    }

    /// A command whose program cannot be found: one line saying so, at mount time, rather than a
    /// failure logged at every refresh. Shell syntax beyond the first word is not checked.
    public static func check(_ command: String, option: String) throws {
        let words = command.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let first = words.first.map(String.init) else {
            throw ChangeCommandError("\(option) is empty: give a command, e.g. '/usr/local/bin/tell-jellyfin'")
        }
        // Shell builtins and syntax (`cd`, `VAR=x cmd`, `(`…) are left to the shell.
        if first.contains("=") || ["cd", "exec", "(", "{", "!", "if", "for", "while", ".", "set"].contains(first) { return }
        if first.contains("/") {
            guard access(first, X_OK) == 0 else {
                throw ChangeCommandError("\(option) command '\(first)' \(access(first, F_OK) == 0 ? "is not executable" : "does not exist"): give a program that exists, or one on PATH")
            }
            return
        }
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
        guard path.contains(where: { access("\($0)/\(first)", X_OK) == 0 }) else {
            throw ChangeCommandError("\(option) command '\(first)' is not on PATH: give its full path")
        }
    }

    /// Runs the command with `paths` (now, or after the run under way); `completion` hears how
    /// the run that took them ended.
    public func run(paths: [String], completion: (@Sendable (Outcome) -> Void)? = nil) {
        guard !paths.isEmpty else { return }
        if live.withLock({ $0.stopped }) { completion?(.stopped); return }
        let start: [String]? = state.withLock { s in
            s.pending += paths
            if let completion { s.waiters.append(completion) }
            guard !s.running else { return nil }
            s.running = true
            defer { s.pending = [] }
            return s.pending
        }
        if let start { launch(start) }
    }

    /// The mountpoint ends: the run under way is ended (SIGKILL to its group, which is what it
    /// started) and none starts any more. Returns at once; the run's thread reaps it.
    public func stop() {
        live.withLock { l in
            l.stopped = true
            if let group = l.group { kill(-group, SIGKILL); l.endedRun = true }
        }
    }

    private func launch(_ paths: [String]) {
        let thread = Thread { [self] in
            var batch = paths
            while true {
                let waiters = state.withLock { s in defer { s.waiters = [] }; return s.waiters }
                let outcome = runOnce(batch)
                waiters.forEach { $0(outcome) }
                guard let next = state.withLock({ s -> [String]? in
                    if s.pending.isEmpty { s.running = false; return nil }
                    defer { s.pending = [] }
                    return s.pending
                }) else { return }
                batch = next
            }
        }
        thread.name = "httpcachefs-on-change"
        thread.start()
    }

    /// One run, on the calling thread: spawns, waits (ending it past the timeout), logs.
    private func runOnce(_ paths: [String]) -> Outcome {
        let outcome = spawnAndWait(paths)
        switch outcome {
        case .exited(0):
            logger.info("--on-change ran for \(paths.count) changed path\(paths.count == 1 ? "" : "s")")
        case let .exited(status):
            logger.error("--on-change command failed with exit status \(status) (\(paths.count) changed paths): \(command)")
        case let .killedBySignal(signal):
            logger.error("--on-change command was killed by signal \(signal): \(command)")
        case .timedOut:
            logger.error("--on-change command still ran after \(timeout.timeInterval)s and was ended: \(command)")
        case let .failedToStart(why):
            logger.error("--on-change command could not start: \(why): \(command)")
        case .stopped:
            logger.info("--on-change command ended with the mountpoint (\(paths.count) changed paths): \(command)")
        }
        return outcome
    }

    private func spawnAndWait(_ paths: [String]) -> Outcome {
        // The paths, in a file unlinked at once: the child reads it as its standard input.
        var template = Array((NSTemporaryDirectory() + "/httpcachefs-changes-XXXXXX").utf8CString)
        let input = mkstemp(&template)
        guard input >= 0 else { return .failedToStart("cannot create a temporary file: \(String(cString: strerror(errno)))") }
        _ = fcntl(input, F_SETFD, FD_CLOEXEC)   // the spawn's dup2 to 0 is what the child gets
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        defer { close(input) }
        let text = Array(paths.map { $0 + "\n" }.joined().utf8)
        var written = 0
        while written < text.count {
            let n = text[written...].withUnsafeBytes { Glibc.write(input, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return .failedToStart("cannot write the paths: \(String(cString: strerror(errno)))") }
            written += n
        }
        lseek(input, 0, SEEK_SET)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        // Nothing else of the daemon's: sockets (the proxy's, a control connection), the FUSE
        // device, the cache's files, whatever another thread opened without O_CLOEXEC.
        cfuse3_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A group of its own: ending it ends what it started too (`sh -c 'curl …; sleep …'`).
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sh"), strdup("-c"), strdup(command), nil]
        defer { argv.forEach { free($0) } }
        // Spawned under `live`'s lock: `stop()` either comes first (no spawn) or sees the group.
        let rc: Int32 = live.withLock { l in
            guard !l.stopped else { return ECANCELED }
            let rc = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, environ)
            if rc == 0 { l.group = pid }
            return rc
        }
        if rc == ECANCELED { return .stopped }
        guard rc == 0 else { return .failedToStart(String(cString: strerror(rc))) }

        // Ended past the timeout. `done` is set before the child is reaped, under the same lock
        // the timer kills under, so a reused pid is never signalled.
        let done = LockedValue(false)
        let timedOut = LockedValue(false)
        let group = pid
        let end: @Sendable (Int32) -> Void = { signal in
            done.withLock { finished in
                guard !finished else { return }
                timedOut.withLock { $0 = true }
                kill(-group, signal)
            }
        }
        // Timers of the mount's scheduler: each only signals the group, under `done`'s lock.
        let timers = timers
        let killTimer = timers.after(timeout) {
            end(SIGTERM)
            timers.after(.seconds(3)) { end(SIGKILL) }
        }
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        done.withLock { $0 = true }
        // What it started may live on in its group: it is ended with it, before the reap.
        live.withLock { l in l.group = nil; kill(-group, SIGKILL) }
        killTimer.cancel()   // not left in the scheduler for the rest of the timeout
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut.withLock({ $0 }) { return .timedOut }
        if live.withLock({ $0.endedRun }) { return .stopped }
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .killedBySignal(signal)
    }
}

/// An `--on-change` command that cannot run; its message is the whole one-line error.
public struct ChangeCommandError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
