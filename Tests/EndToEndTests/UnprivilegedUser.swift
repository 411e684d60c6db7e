import Foundation
import Glibc
import TestSupport
import XCTest

/// A normal (non-root) account to run the daemon and the commands as, the way most users do.
///
/// Created by the test set-up when missing (`useradd --system --create-home`, idempotent); every
/// command runs through `runuser -u USER --` with a clean environment whose HOME (and so every
/// XDG directory) lies in a directory of the test owned by that user. The binary is copied there
/// too: CI's checkout under /root is not readable by anyone else.
struct UnprivilegedUser {
    static let name = "httpcachefs-test"

    let uid: uid_t
    let gid: gid_t
    /// The test's directory, owned by the user: `home/`, `mnt/`, `bin/httpcachefs`.
    let root: String
    var home: String { root + "/home" }
    var binary: String { root + "/bin/httpcachefs" }

    /// Needs root (to create the user and to switch to it), /dev/fuse, fusermount3 and runuser;
    /// without one of them the test says why, loudly, and is skipped.
    static func prepare(binaryUnderTest: String, root: String) throws -> UnprivilegedUser {
        var missing: [String] = []
        if geteuid() != 0 { missing.append("not running as root (needed to create and become a normal user)") }
        if access("/dev/fuse", F_OK) != 0 { missing.append("no /dev/fuse") }
        for tool in ["/usr/sbin/runuser", "/usr/bin/fusermount3", "/usr/sbin/useradd"] where access(tool, X_OK) != 0 {
            missing.append("no \(tool)")
        }
        if !missing.isEmpty {
            let message = "SKIPPING the unprivileged-user end-to-end suite: " + missing.joined(separator: ", ")
            print("⚠️  \(message)")
            throw XCTSkip(message)
        }
        if getpwnam(name) == nil {
            let made = try Self.exec("/usr/sbin/useradd", ["--system", "--create-home", "--shell", "/usr/sbin/nologin", name])
            // A concurrent set-up may have made it first: only a missing user afterwards fails.
            guard getpwnam(name) != nil else { throw Failure("useradd \(name) failed: \(made.stderr)") }
        }
        guard let entry = getpwnam(name) else { throw Failure("no user \(name)") }
        let user = UnprivilegedUser(uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid, root: root)
        for dir in [root, user.home, root + "/bin", root + "/mnt"] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            guard chown(dir, user.uid, user.gid) == 0, chmod(dir, 0o755) == 0 else {
                throw Failure("cannot hand \(dir) to \(name): \(String(cString: strerror(errno)))")
            }
        }
        try FileManager.default.copyItem(atPath: binaryUnderTest, toPath: user.binary)
        chmod(user.binary, 0o755)
        return user
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }

    struct Outcome {
        var status: Int32
        var stdout: [UInt8]
        var stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// The clean environment of a login of this user: HOME in the test's directory, and nothing
    /// of root's (no XDG variable, no TMPDIR: the defaults under HOME are what is tested).
    var environment: [String] {
        ["HOME=\(home)", "USER=\(Self.name)", "LOGNAME=\(Self.name)", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
         "LANG=C.UTF-8"]
    }

    /// Runs `program args...` as the user (cwd: its HOME) and waits at most `timeout`.
    func run(_ program: String, _ args: [String], timeout: TimeInterval = 60) throws -> Outcome {
        try Self.exec("/usr/sbin/runuser", ["-u", Self.name, "--", "/usr/bin/env", "-i", "--chdir=\(home)"] + environment + [program] + args,
                      timeout: timeout)
    }

    /// `httpcachefs args...` as the user.
    func httpcachefs(_ args: [String]) throws -> Outcome { try run(binary, args) }

    /// Starts `httpcachefs args...` as the user in the background (output discarded); the
    /// test's tear-down ends it by pid.
    @discardableResult
    func start(_ args: [String]) throws -> pid_t { try spawn(binary, args) }

    /// Starts `program args...` as the user in the background (output discarded).
    @discardableResult
    func spawn(_ program: String, _ args: [String]) throws -> pid_t {
        let argv = (["/usr/sbin/runuser", "-u", Self.name, "--", "/usr/bin/env", "-i", "--chdir=\(home)"] + environment + [program] + args)
            .map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd in Int32(0)...2 { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0) }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, argv[0]!, &actions, nil, argv, environ)
        guard rc == 0 else { throw Failure("cannot start runuser: \(String(cString: strerror(rc)))") }
        return pid
    }

    /// Runs a program as root with stdin from /dev/null; stdout and stderr captured to files of
    /// the test (the daemon a `mount` leaves behind must not hold a pipe this waits on).
    static func exec(_ program: String, _ args: [String], timeout: TimeInterval = 60) throws -> Outcome {
        let dir = TemporaryDirectory(prefix: "httpcachefs-exec")
        defer { dir.remove() }
        let out = dir.appending("out"), err = dir.appending("err")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([program] + args).map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, program, &actions, nil, argv, envp)
        guard rc == 0 else { throw Failure("cannot start \(program): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0, code: Int32?
        _ = ProcessExit.wait(pid, timeout: timeout)   // sleeps until the kernel says it ended
        var r: pid_t
        repeat { r = waitpid(pid, &status, WNOHANG) } while r < 0 && errno == EINTR
        if r == pid { code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f) }
        if code == nil {
            kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
            throw Failure("\(program) \(args.joined(separator: " ")) did not finish within \(Int(timeout))s")
        }
        let stdout = Array((try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
        let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        return Outcome(status: code!, stdout: stdout, stderr: stderr)
    }

    /// Whether the user can open `/dev/fuse` for reading and writing.
    func canOpenFuseDevice() throws -> Bool {
        try run("/usr/bin/test", ["-r", "/dev/fuse", "-a", "-w", "/dev/fuse"]).status == 0
    }
}
