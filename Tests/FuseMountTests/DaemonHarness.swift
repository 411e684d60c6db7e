import CacheCore
import Foundation
import FuseMount
import Glibc
import TestSupport
import XCTest

/// Runs the real `httpcachefs` binary as a subprocess, so daemonizing, signals and unmounting are
/// real: a loopback origin in this process, a mountpoint, cache and log in a temporary directory.
final class DaemonHarness {
    let origin: OriginServer
    let directory: TemporaryDirectory
    let binary: String
    var mountpoint: String { directory.appending("mnt") }
    var cacheDirectory: String { directory.appending("cache") }
    var logFile: String { directory.appending("mount.log") }

    init() throws {
        try requireFuse()
        binary = try Self.locateBinary()
        origin = try OriginServer()
        directory = TemporaryDirectory(prefix: "httpcachefs-daemon")
        try FileManager.default.createDirectory(atPath: directory.appending("mnt"), withIntermediateDirectories: true)
    }

    /// `TestSupport.BinaryUnderTest`: `$HTTPCACHEFS_BINARY`, else the build next to the tests.
    /// A missing build skips (loudly); a variable naming no executable fails.
    static func locateBinary() throws -> String {
        do {
            return try BinaryUnderTest.locate()
        } catch let error as BinaryUnderTest.NotFound where !error.wasNamed {
            let message = "SKIPPING daemon test: \(error)"
            print("⚠️  \(message)")
            throw XCTSkip(message)
        }
    }

    struct Outcome {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs a program to completion (at most `timeout`) and captures its output.
    @discardableResult
    func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
             timeout: TimeInterval = 60) throws -> Outcome {
        let out = directory.appending("stdout-\(UUID().uuidString.prefix(6))")
        let err = directory.appending("stderr-\(UUID().uuidString.prefix(6))")
        let pid = try Subprocess.spawn(executable, arguments, environment: environment, stdout: out, stderr: err)
        let status = Subprocess.wait(pid, timeout: timeout)
        if status == nil {
            kill(pid, SIGKILL)
            _ = Subprocess.wait(pid, timeout: 10)
            XCTFail("\(executable) \(arguments) did not finish within \(Int(timeout))s")
        }
        let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return Outcome(status: status ?? -1, stdout: read(out), stderr: read(err))
    }

    /// `httpcachefs mount MOUNTPOINT ARGS... --cache-dir ... --log-file ... --no-proxy`.
    @discardableResult
    func mount(_ arguments: [String], proxy: Bool = false) throws -> Outcome {
        try run(binary, ["mount", mountpoint] + arguments + ["--cache-dir", cacheDirectory, "--log-file", logFile]
                + (proxy ? [] : ["--no-proxy"]))
    }

    /// The daemon serving our mountpoint: found by its unique command line, never by name.
    func daemonPID() -> pid_t? {
        let procs = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in procs {
            guard let pid = pid_t(entry), pid != getpid(),
                  let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if args.contains("--foreground") && args.contains(mountpoint) && args.contains(cacheDirectory) { return pid }
        }
        return nil
    }

    func isAlive(_ pid: pid_t) -> Bool {
        kill(pid, 0) == 0 && !ProcessExit.isZombie(pid)
    }

    // The waits below sleep until the kernel reports the event they wait for; `timeout` only
    // bounds a hang (a failure), never a timing the test asserts.

    /// Waits for `pid` to end (`ProcessExit`: its pidfd turns readable when it exits).
    func waitForExit(_ pid: pid_t, _ what: String, timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line) {
        if !ProcessExit.wait(pid, timeout: timeout) { XCTFail("timed out waiting for: \(what)", file: file, line: line) }
    }

    /// Waits until the mount table shows `condition` (`MountTableEvents`: the kernel reports
    /// each mount and unmount).
    func waitForMountTable(_ what: String, timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line,
                           _ condition: () -> Bool) {
        if !MountTableEvents.wait(timeout: timeout, until: condition) { XCTFail("timed out waiting for: \(what)", file: file, line: line) }
    }

    /// Waits until the daemon's log holds `text` `occurrences` times or more: the daemon says
    /// what it did, and inotify on the log's folder says when it wrote (`FileEvents`).
    func waitForLog(_ text: String, occurrences: Int = 1, timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line) {
        if !FileEvents.wait(in: directory.path, timeout: timeout, until: { log.components(separatedBy: text).count - 1 >= occurrences }) {
            XCTFail("timed out waiting for the log to say: \(text)\n\(log)", file: file, line: line)
        }
    }

    /// Waits until `condition` over the files in `folder` holds, looking again at each change
    /// inotify reports there (`FileEvents`): a runtime file written, a command's output.
    func waitForFiles(in folder: String, _ what: String, timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line,
                      _ condition: () -> Bool) {
        if !FileEvents.wait(in: folder, timeout: timeout, until: condition) { XCTFail("timed out waiting for: \(what)", file: file, line: line) }
    }

    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    func path(_ rel: String) -> String { mountpoint + "/" + rel }

    /// Leaves nothing behind: the daemon (by pid) is killed, the mount lazily removed.
    func cleanup() {
        if let pid = daemonPID() { kill(pid, SIGKILL) }
        if Mountpoint.isMounted(mountpoint) { _ = umount2(mountpoint, Int32(MNT_DETACH)) }
        origin.stop()
        directory.remove()
    }
}

/// posix_spawn and waitpid, without Foundation's Process (whose exit monitoring missed children
/// that had spawned a daemon of their own).
enum Subprocess {
    static func spawn(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                      stdout: String? = nil, stderr: String? = nil) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let env = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard rc == 0 else { throw POSIX.Failure(errno: rc) }
        return pid
    }

    /// The exit status (128 + signal if killed), or nil if still running after `timeout` (0:
    /// whether it has ended now). Sleeps until the child ends (`ProcessExit`), then reaps it.
    static func wait(_ pid: pid_t, timeout: TimeInterval) -> Int32? {
        if timeout > 0 { _ = ProcessExit.wait(pid, timeout: timeout) }
        var status: Int32 = 0
        while true {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid { return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f) }
            if r < 0 && errno == EINTR { continue }
            return r < 0 ? -1 : nil
        }
    }
}
