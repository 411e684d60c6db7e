import CacheCore
import Foundation
import Proxy
#if canImport(Glibc)
import Glibc
#endif

/// The httpcachefs daemons running on this machine, found without a registry of their own.
///
/// Every process that uses a cache holds `<cache dir>/lock` open for as long as it runs (the
/// directory lock), so `/proc/PID/fd` of each process links to it: a link to a file named `lock`
/// whose directory holds `index.sqlite` names a cache and the process that serves it. Its proxy
/// (if it runs one) is in the cache's `proxy.json`, which names the same pid; the rest (mounts,
/// fetches, counters) comes from the proxy's status document, or, with no proxy, from the index.
/// Only processes this user may inspect are seen (all of them as root).
struct DaemonDiscovery {
    struct Daemon {
        var pid: Int32
        var cacheDirectory: String
        /// The command line, arguments separated by spaces.
        var command: String
        var uptimeSeconds: Double?
        /// Its proxy, if it runs one and wrote the runtime file.
        var proxy: ProxyStatus?
    }

    /// `procRoot` is `/proc` except in tests.
    static func find(procRoot: String = "/proc") -> [Daemon] {
        let fm = FileManager.default
        let me = getpid()
        var found: [Daemon] = []
        for name in (try? fm.contentsOfDirectory(atPath: procRoot)) ?? [] {
            guard let pid = Int32(name), pid != me else { continue }
            let fdDir = "\(procRoot)/\(name)/fd"
            var seen = Set<String>()
            for fd in (try? fm.contentsOfDirectory(atPath: fdDir)) ?? [] {
                guard let target = try? fm.destinationOfSymbolicLink(atPath: fdDir + "/" + fd),
                      target.hasSuffix("/lock") else { continue }
                let directory = String(target.dropLast("/lock".count))
                guard !seen.contains(directory), fm.fileExists(atPath: directory + "/index.sqlite") else { continue }
                seen.insert(directory)
                let proxy = ProxyStatus.readRuntimeFile(cacheDirectory: directory).flatMap { $0.pid == pid ? $0 : nil }
                found.append(Daemon(pid: pid, cacheDirectory: directory, command: commandLine(procRoot, name),
                                    uptimeSeconds: uptime(procRoot, name), proxy: proxy))
            }
        }
        return found.sorted { $0.pid < $1.pid }
    }

    private static func commandLine(_ root: String, _ pid: String) -> String {
        guard let data = FileManager.default.contents(atPath: "\(root)/\(pid)/cmdline") else { return "?" }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
    }

    /// Seconds since the process started: field 22 of `/proc/PID/stat` (clock ticks after boot)
    /// against `/proc/uptime`.
    private static func uptime(_ root: String, _ pid: String) -> Double? {
        guard let stat = try? String(contentsOfFile: "\(root)/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")"),
              let up = try? String(contentsOfFile: "\(root)/uptime", encoding: .utf8),
              let sinceBoot = up.split(separator: " ").first.flatMap({ Double($0) }) else { return nil }
        // Fields after the command name start at field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        return max(0, sinceBoot - ticks / Double(sysconf(Int32(_SC_CLK_TCK))))
    }
}
