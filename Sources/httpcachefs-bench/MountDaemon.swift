import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs mount` (with its proxy) as the benchmarks run it: the launcher returns once the
/// mount is usable and leaves a daemon behind, which holds the cache directory's lock file; that
/// file names its process, whose memory `/proc` reports.
final class MountDaemon {
    let binary: String
    let mountpoint: String
    let cacheDirectory: String
    let logFile: String
    private let arguments: [String]

    /// Mounts `entries` (`NAME=URL`) at `mountpoint`, with the proxy on a port of its choosing
    /// unless `proxy` is false; `extraArguments` go to `mount` after the others (`--bwlimit 1M`).
    init(binary: String, mountpoint: String, cacheDirectory: String, cacheSize: Int64, entries: [String], logFile: String,
         proxy: Bool = true, extraArguments: [String] = []) throws {
        self.binary = binary
        self.mountpoint = mountpoint
        self.cacheDirectory = cacheDirectory
        self.logFile = logFile
        arguments = ["mount", mountpoint] + entries + [
            "--cache-dir", cacheDirectory, "--cache-size", String(cacheSize), "--log-file", logFile, "--log-level", "warning",
        ] + (proxy ? ["--proxy-port", "0"] : ["--no-proxy"]) + extraArguments
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try mount()
    }

    /// Mounts (again, after `unmount()`); returns once the mount is usable.
    func mount() throws {
        let status = try Spawned.run(binary, arguments)
        guard status == 0 else {
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            throw ValidationError("httpcachefs mount failed (status \(status)):\n\(log)")
        }
    }

    /// The daemon's process id, from the lock file ("process PID (...)").
    func pid() throws -> pid_t {
        let text = (try? String(contentsOfFile: cacheDirectory + "/lock", encoding: .utf8)) ?? ""
        let words = text.split(separator: " ")
        guard words.count >= 2, words[0] == "process", let pid = pid_t(words[1]) else {
            throw ValidationError("cannot tell the daemon's process from \(cacheDirectory)/lock: '\(text)'")
        }
        return pid
    }

    /// Peak resident memory since start or the last `resetPeakMemory()` (VmHWM), in bytes.
    func peakMemory() throws -> Int64 {
        let path = "/proc/\(try pid())/status"
        let status = try String(contentsOfFile: path, encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kb = Int64(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") else {
            throw ValidationError("no VmHWM in \(path)")
        }
        return kb * 1024
    }

    /// Resident memory now (VmRSS), in bytes.
    func residentMemory() throws -> Int64 {
        let path = "/proc/\(try pid())/status"
        let status = try String(contentsOfFile: path, encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = Int64(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") else {
            throw ValidationError("no VmRSS in \(path)")
        }
        return kb * 1024
    }

    /// CPU time the daemon used so far (user + system, all threads), in seconds.
    func cpuSeconds() throws -> Double {
        let path = "/proc/\(try pid())/stat"
        let stat = try String(contentsOfFile: path, encoding: .utf8)
        // Fields after the command name (which may hold spaces) in parentheses: utime and stime
        // are the 12th and 13th of them.
        guard let close = stat.lastIndex(of: ")") else { throw ValidationError("cannot parse \(path)") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw ValidationError("cannot parse \(path)")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resets VmHWM to the current resident size (writes 5 to /proc/PID/clear_refs, Linux 4.0+),
    /// so a peak belongs to one phase of a run. False if the kernel or permissions refuse.
    func resetPeakMemory() -> Bool {
        guard let pid = try? pid() else { return false }
        return (try? "5\n".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)) != nil
    }

    /// Waits (up to 10 s) until `cache info` reports all `length` bytes of `url` cached: a reader
    /// may get its last bytes before the daemon has recorded them.
    func waitUntilCached(url: String, length: Int64) throws {
        for _ in 0..<100 {
            if (try? CoreBench.checkFullyCached(binary: binary, url: url, cacheDir: cacheDirectory, length: length)) != nil { return }
            usleep(100_000)
        }
        try CoreBench.checkFullyCached(binary: binary, url: url, cacheDir: cacheDirectory, length: length)
    }

    /// The proxy URL of `original` on the daemon's proxy.
    func proxyURL(for original: String) throws -> String {
        try ProxyProcess.url(for: original, binary: binary, cacheDirectory: cacheDirectory)
    }

    /// Unmounts if still mounted and waits (up to 10 s) for the daemon to exit: it flushes its
    /// index after the unmount, and removing the cache directory under it would fail.
    func unmount() {
        let mounted = ((try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? "").contains(" \(mountpoint) ")
        guard mounted else { return }
        let daemon = try? pid()
        _ = try? Spawned.run("/bin/fusermount3", ["-u", mountpoint])
        guard let daemon else { return }
        var polls = 0
        while kill(daemon, 0) == 0 && polls < 200 {
            usleep(50_000)
            polls += 1
        }
    }
}
