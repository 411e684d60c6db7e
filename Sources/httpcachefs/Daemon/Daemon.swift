import CacheCore
import Foundation
import Glibc

/// Going to the background the way mount commands must: the command returns only once the mount
/// is usable (exit 0), or fails with the reason.
///
/// The parent re-executes the same program with extra arguments (the caller adds `--foreground`)
/// in a new session, with stdin and stdout on /dev/null and stderr appended to a log file, and
/// passes it the write end of a pipe (fd number in `$HTTPCACHEFS_READY_FD`). The child writes
/// `ready` once mounted, or `error: <reason>`, then closes it. EOF with neither means the child
/// died before it could report (a crash, an argument it could not parse): then the last line it
/// wrote to the log stands in for the reason. Every failure names the log file.
///
/// Map of this folder (`Daemon/`): the background process, and commands that find one running.
/// - `Daemon.swift` (this file): going to the background with a ready pipe.
/// - `DaemonMounts.swift`, `MountHost.swift`, `MountJoin.swift`: one daemon's mountpoints, what
///   they share, and a later `mount` joining it.
/// - `MountCheck.swift`: the check before ready. `MountPathURL.swift`: `url PATH`.
/// - `CacheAccess.swift`: a cache opened here or reached through its daemon; `DaemonClient.swift`,
///   `DaemonControl.swift`, `DaemonListing.swift`, `DaemonHLSSource.swift`,
///   `DaemonPreloadTarget.swift` the ways through.
/// - `DaemonDiscovery.swift`, `CacheLockHolder.swift`, `ListenerOwner.swift`: finding daemons
///   and trusting what they say, from /proc.
/// - `DaemonLoops.swift`, `BlockingPool.swift`: the process's NIO loops and blocking pool.
/// - `LoopMarker.swift`: the `Via` mark. `OpenFileLimit.swift`: the soft limit raised.
/// Neighbours: called by `Commands/`; calls back into `Commands/` (`MountCommand.buildTree`),
/// `Options/` and `Preload/`; prints through `Terminal/`.
enum Daemon {
    public static let readyEnvironment = "HTTPCACHEFS_READY_FD"

    /// The child's channel back to the waiting parent, or nil when not started by `launch`.
    /// Takes the variable out of the environment so the daemon's own children don't inherit it.
    public static func readyChannel() -> ReadyChannel? {
        guard let text = getenv(readyEnvironment).map({ String(cString: $0) }), let fd = Int32(text), fd > 2,
              fcntl(fd, F_GETFD) != -1 else { return nil }
        unsetenv(readyEnvironment)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return ReadyChannel(fd: fd)
    }

    /// Descriptors this process inherited (from mount(8), a shell, a test harness) must not live
    /// on in the daemon: whoever waits for them to close (Foundation's `Process` watches a socket
    /// its child inherits; `$(...)` a pipe) would otherwise wait until the unmount.
    static func markInheritedDescriptorsCloseOnExec(keeping keep: Set<Int32>) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for name in names {
            guard let fd = Int32(name), fd > 2, !keep.contains(fd) else { continue }
            let flags = fcntl(fd, F_GETFD)
            if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    /// Starts `executable` with `arguments` (argv[0] included) detached, and waits up to
    /// `timeout` for it to report. Returns the child's pid once it is ready.
    public static func launch(executable: String, arguments: [String], logPath: String?,
                              timeout: TimeInterval = 120) throws -> pid_t {
        // Opened here, not by the spawn: a log that cannot be opened is named as such, instead of
        // posix_spawn failing as if the program itself were missing.
        var logFD: Int32 = -1
        if let logPath {
            logFD = open(logPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)   // URLs are private
            guard logFD >= 0 else {
                throw DaemonError.spawn("cannot open the mount daemon's log file \(logPath): \(String(cString: strerror(errno))) (--log-file chooses another)")
            }
        }
        defer { if logFD >= 0 { close(logFD) } }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw DaemonError.spawn("pipe: \(String(cString: strerror(errno)))") }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        defer { close(readEnd) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        if logFD >= 0 {
            posix_spawn_file_actions_adddup2(&actions, logFD, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A session of its own: the terminal's Ctrl-C and hangup do not reach the daemon.
        posix_spawnattr_setflags(&attributes, Int16(0x80 /* POSIX_SPAWN_SETSID */))

        var environment = ProcessInfo.processInfo.environment
        environment[readyEnvironment] = String(writeEnd)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // Where this start's lines begin in the log: a daemon that dies without a report is
        // explained by the last of them, not by an older run's.
        let logStart = logFD >= 0 ? UInt64(max(0, lseek(logFD, 0, SEEK_END))) : 0
        markInheritedDescriptorsCloseOnExec(keeping: [writeEnd])
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(writeEnd)
        guard rc == 0 else { throw DaemonError.spawn("cannot start \(executable): \(String(cString: strerror(rc)))") }

        let message = readReport(readEnd, timeout: timeout)
        switch message {
        case "ready"?:
            return pid
        case let m? where m.hasPrefix("error: "):
            _ = reap(pid)
            throw DaemonError.failed(String(m.dropFirst("error: ".count)), log: logPath)
        case nil where isAlive(pid):
            throw DaemonError.timedOut(pid: pid, seconds: Int(timeout), log: logPath)
        default:
            let status = reap(pid)
            throw DaemonError.died(status: status, lastWords: logPath.flatMap { lastLine(of: $0, from: logStart) }, log: logPath)
        }
    }

    /// The last non-empty line written to `path` from byte `offset` on, without the
    /// `httpcachefs: error: ` prefix (the parent prints its own), at most 500 characters.
    static func lastLine(of path: String, from offset: UInt64) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard (try? handle.seek(toOffset: offset)) != nil, let data = try? handle.readToEnd() else { return nil }
        let lines = String(decoding: data.suffix(64 << 10), as: UTF8.self).split(whereSeparator: \.isNewline)
        guard var line = lines.last(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }).map(String.init) else { return nil }
        for prefix in ["httpcachefs: error: ", "Error: "] where line.hasPrefix(prefix) { line.removeFirst(prefix.count) }
        return String(line.prefix(500))
    }

    /// The child's report (its first line that is not a note), or nil at EOF / timeout. Notes
    /// (`note: LINE`) are printed to stderr as they come.
    private static func readReport(_ fd: Int32, timeout: TimeInterval) -> String? {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            while let newline = bytes.firstIndex(of: 10) {
                let line = String(decoding: bytes[..<newline], as: UTF8.self)
                bytes.removeSubrange(...newline)
                if line.hasPrefix("note: ") {
                    LogSink.standardError.write(line: String(line.dropFirst("note: ".count)))
                } else if !line.isEmpty {
                    return line
                }
            }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, Int32(min(left, 3600) * 1000))
            if r < 0 && errno == EINTR { continue }
            if r <= 0 { return nil }
            let n = read(fd, &buf, buf.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buf[0..<n]
        }
        let line = String(decoding: bytes, as: UTF8.self)
        return line.isEmpty ? nil : line
    }

    private static func isAlive(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Waits for an exited child; its exit code, or 128 + signal.
    private static func reap(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }
}

/// The daemon's end of the readiness pipe: exactly one report, then closed.
final class ReadyChannel: Sendable {
    /// The pipe; -1 once reported.
    private let pipe: LockedValue<Int32>

    init(fd: Int32) { pipe = LockedValue(fd) }

    public func ready() { report("ready") }

    /// A line for the waiting parent to print on its terminal before the final report
    /// (a URL the mount check found wrong). Ignored once the report is sent.
    public func note(_ line: String) {
        pipe.withLock { fd in
            guard fd >= 0 else { return }
            let bytes = Array(("note: " + line.replacingOccurrences(of: "\n", with: " ") + "\n").utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
    }

    public func fail(_ reason: String) { report("error: " + reason.replacingOccurrences(of: "\n", with: " ")) }

    private func report(_ line: String) {
        pipe.withLock { fd in
            guard fd >= 0 else { return }
            let bytes = Array((line + "\n").utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            fd = -1
        }
    }
}

/// Why a background mount did not start, as the waiting command prints it: the daemon's own
/// reason first, then where its log is.
enum DaemonError: Error, Equatable, CustomStringConvertible {
    case spawn(String)
    /// The daemon's one-line report.
    case failed(String, log: String?)
    /// Exited without a report; `lastWords` is the last line it logged, if any.
    case died(status: Int32, lastWords: String?, log: String?)
    case timedOut(pid: pid_t, seconds: Int, log: String?)

    public var description: String {
        switch self {
        case let .spawn(why): return why
        case let .failed(why, log):
            return why + Self.logNote(log)
        case let .died(status, lastWords, log):
            return "the mount daemon exited (status \(status)) before the mount was ready"
                + (lastWords.map { ": \($0)" } ?? "") + Self.logNote(log)
        case let .timedOut(pid, seconds, log):
            return "the mount daemon (pid \(pid)) was not ready after \(seconds)s" + Self.logNote(log)
        }
    }

    private static func logNote(_ log: String?) -> String { log.map { " (daemon log: \($0))" } ?? "" }
}

/// systemd's readiness protocol (`Type=notify`): one datagram to `$NOTIFY_SOCKET`. A no-op
/// outside systemd. Lets a unit run `mount --foreground` (logs in the journal) and still start
/// its dependents only once the mount is usable.
public enum SystemdNotify {
    @discardableResult
    public static func send(_ state: String) -> Bool {
        guard var path = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !path.isEmpty else { return false }
        let abstract = path.hasPrefix("@")
        if abstract { path.removeFirst() }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let offset = abstract ? 1 : 0  // abstract names start with a NUL byte
        guard bytes.count + offset < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            for (i, b) in bytes.enumerated() { raw[i + offset] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + offset + bytes.count + (abstract ? 0 : 1))
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, sa, length) }
            }
        }
        return sent == message.count
    }
}
