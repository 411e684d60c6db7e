import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// posix_spawn + waitpid: the `mount` command leaves a daemon behind, and waiting on it must not
/// depend on anything but the launcher's own exit.
enum Spawned {
    static func run(_ path: String, _ args: [String]) throws -> Int32 {
        let pid = try start(path, args, quietStderr: false)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Starts `path` with stdin and stdout on /dev/null (stderr too if `quietStderr`) and returns
    /// its pid without waiting: a daemon in the background.
    static func start(_ path: String, _ args: [String], quietStderr: Bool = true) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        if quietStderr { posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) }
        let argv = ([path] + args).map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard rc == 0 else { throw ValidationError("cannot run \(path): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// Elapsed seconds of a run that must succeed.
    static func time(_ path: String, _ args: [String]) throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        let status = try run(path, args)
        guard status == 0 else { throw ValidationError("\(path) \(args.prefix(3).joined(separator: " ")) failed with status \(status)") }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}
