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
/// Only processes this user may inspect are seen (all of them as root). A cache's runtime files
/// are read only if they are regular files of the daemon's user (never through a symlink), and
/// nothing of a cache is opened for writing: any user can make a process look like a daemon.
struct DaemonDiscovery {
    struct Daemon {
        var pid: Int32
        var cacheDirectory: String
        /// The command line, arguments separated by spaces.
        var command: String
        var uptimeSeconds: Double?
        /// Its proxy, if it runs one and wrote the runtime file.
        var proxy: ProxyStatus?
        /// The httpcachefs mount its command line names, if it is mounted: what a daemon without
        /// a proxy (no status document) can still tell about its mounts.
        var mountpoints: [String] = []
        /// The arguments of each mountpoint a later `mount` added (`DaemonMounts`), by mountpoint.
        var addedArguments: [String: [String]] = [:]
        /// The command line as its arguments, and the working directory it was started in
        /// (relative paths in it are relative to that).
        var arguments: [String] = []
        var cwd: String?
        /// The user it runs as (the owner of `/proc/PID`): commands look for this user's own.
        var uid: uid_t?

        /// It runs as the user running this command: only then are its cache's files opened
        /// (another user's, as root, are never opened by path: `StatusCommand`).
        var isMine: Bool { uid == geteuid() }

        /// How a message names it: pid, cache and mountpoints.
        var described: String {
            "pid \(pid) (cache \(cacheDirectory)" + (mountpoints.isEmpty ? ", no mount" : ", mounted on " + mountpoints.joined(separator: ", ")) + ")"
        }
    }

    /// The daemons (`mount`, `proxy`) of the user running this command (as root: root's own).
    /// Other holders of a cache (a `cat`, a `preload` of its own) come and go: not counted.
    static func mine(procRoot: String = "/proc") -> [Daemon] {
        var seen = Set<String>()
        return find(procRoot: procRoot).filter {
            $0.uid == geteuid() && ["mount", "proxy"].contains($0.arguments.dropFirst().first ?? "")
                && seen.insert($0.cacheDirectory).inserted
        }
    }

    /// How many daemons other users run, counted from command lines alone (`/proc/PID/cmdline`
    /// is readable by all, their open files are not): an `httpcachefs proxy`, or an
    /// `httpcachefs mount … --foreground` (what a mount runs as once started). For messages only
    /// ("none of yours; 2 of other users"): a user cannot see which caches those hold.
    static func othersCount(procRoot: String = "/proc") -> Int {
        let fm = FileManager.default
        var count = 0
        for name in (try? fm.contentsOfDirectory(atPath: procRoot)) ?? [] {
            guard Int32(name) != nil else { continue }
            var st = stat()
            guard stat("\(procRoot)/\(name)", &st) == 0, st.st_uid != geteuid() else { continue }
            if isDaemonCommandLine(commandLine(procRoot, name)) { count += 1 }
        }
        return count
    }

    /// `httpcachefs proxy …`, or `httpcachefs mount … --foreground`. Pure.
    static func isDaemonCommandLine(_ arguments: [String]) -> Bool {
        guard let program = arguments.first, (program as NSString).lastPathComponent == "httpcachefs",
              let command = arguments.dropFirst().first else { return false }
        return command == "proxy" || (command == "mount" && arguments.contains("--foreground"))
    }

    /// `procRoot` is `/proc` except in tests.
    static func find(procRoot: String = "/proc") -> [Daemon] {
        let fm = FileManager.default
        let me = getpid()
        let ownMounts = (try? String(contentsOfFile: "\(procRoot)/self/mounts", encoding: .utf8)) ?? ""
        var found: [Daemon] = []
        for name in (try? fm.contentsOfDirectory(atPath: procRoot)) ?? [] {
            guard let pid = Int32(name), pid != me else { continue }
            let fdDir = "\(procRoot)/\(name)/fd"
            var seen = Set<String>()
            var st = stat()
            let uid: uid_t? = stat("\(procRoot)/\(name)", &st) == 0 ? st.st_uid : nil
            for fd in (try? fm.contentsOfDirectory(atPath: fdDir)) ?? [] {
                guard let target = try? fm.destinationOfSymbolicLink(atPath: fdDir + "/" + fd),
                      target.hasSuffix("/lock") else { continue }
                let directory = String(target.dropLast("/lock".count))
                // Every look at a path on a FUSE mount is answered by its daemon, which may never
                // answer: another user's (an `allow_other` mount) could hold root's `status` in a
                // stat or an open for as long as it likes. Such a cache is not looked into.
                if uid != geteuid(), foreignFuseOwner(of: directory, mounts: ownMounts, me: geteuid()) != nil { continue }
                guard !seen.contains(directory), fm.fileExists(atPath: directory + "/index.sqlite") else { continue }
                seen.insert(directory)
                // The runtime files count only as the daemon's own user's (a process can hold any
                // file named `lock`; its user controls what lies beside it): `OwnedFile`.
                let proxy = uid.flatMap { ProxyStatus.readRuntimeFile(cacheDirectory: directory, owner: $0) }.flatMap { $0.pid == pid ? $0 : nil }
                let listed = uid.map { DaemonMounts.listed(cacheDirectory: directory, pid: pid, owner: $0) } ?? []
                let arguments = commandLine(procRoot, name)
                let mounts = (try? String(contentsOfFile: "\(procRoot)/\(name)/mounts", encoding: .utf8)) ?? ""
                let cwd = try? fm.destinationOfSymbolicLink(atPath: "\(procRoot)/\(name)/cwd")
                found.append(Daemon(pid: pid, cacheDirectory: directory, command: arguments.joined(separator: " "),
                                    uptimeSeconds: uptime(procRoot, name), proxy: proxy,
                                    mountpoints: mountpoints(arguments: arguments, cwd: cwd, mounts: mounts,
                                                             added: listed.map(\.path)),
                                    addedArguments: Dictionary(listed.compactMap { l in l.arguments.map { (l.path, $0) } }) { a, _ in a },
                                    arguments: arguments, cwd: cwd, uid: uid))
            }
        }
        return found.sorted { $0.pid < $1.pid }
    }

    private static func commandLine(_ root: String, _ pid: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: "\(root)/\(pid)/cmdline") else { return ["?"] }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The mountpoint of a `mount` command line (made absolute against the process's working
    /// directory) and those `added` to the daemon later (`DaemonMounts`, its `mounts` file), each
    /// if `mounts` (its `/proc/PID/mounts`) lists a FUSE mount there.
    static func mountpoints(arguments: [String], cwd: String?, mounts: String, added: [String] = []) -> [String] {
        var paths: [String] = []
        if let at = arguments.dropFirst().firstIndex(of: "mount"),
           let command = try? MountCommand.parse(Array(arguments[(at + 1)...])) {
            var path = command.mountpoint
            if !path.hasPrefix("/"), let cwd { path = cwd + "/" + path }
            paths.append((path as NSString).standardizingPath)
        }
        for path in added where !paths.contains(path) { paths.append(path) }
        let mounted = Set(mounts.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            return fields.count > 2 && fields[2].hasPrefix("fuse") ? unescapeMountField(fields[1]) : nil
        })
        return paths.filter(mounted.contains)
    }

    /// The user whose FUSE daemon serves `path`, when that is not `me`: the deepest mount of
    /// `mounts` (`/proc/self/mounts`) holding the path is a `fuse*` one whose `user_id=` is
    /// another uid. nil for any other file system (and, given `fstype`, any other FUSE one) and
    /// for `me`'s own FUSE mounts.
    static func foreignFuseOwner(of path: String, mounts: String, me: uid_t, fstype: String? = nil) -> uid_t? {
        var deepest: (mountpoint: String, fstype: Substring, options: Substring)?
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 3 else { continue }
            let mountpoint = unescapeMountField(fields[1])
            guard mountpoint == "/" || path == mountpoint || path.hasPrefix(mountpoint + "/") else { continue }
            if deepest.map({ mountpoint.count >= $0.mountpoint.count }) ?? true {
                deepest = (mountpoint, fields[2], fields[3])
            }
        }
        guard let deepest, deepest.fstype.hasPrefix("fuse"), fstype.map({ deepest.fstype == $0 }) ?? true else { return nil }
        let owner = deepest.options.split(separator: ",").first { $0.hasPrefix("user_id=") }
            .flatMap { uid_t($0.dropFirst("user_id=".count)) }
        return owner.flatMap { $0 == me ? nil : $0 }
    }

    /// `/proc/mounts` writes space, tab, newline and backslash as `\040`-style octal escapes.
    static func unescapeMountField(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var u = Array(field.utf8)[...]
        while let b = u.first {
            if b == UInt8(ascii: "\\"), u.count >= 4, let v = UInt8(String(decoding: u.dropFirst().prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(v)
                u = u.dropFirst(4)
            } else {
                bytes.append(b)
                u = u.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
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
