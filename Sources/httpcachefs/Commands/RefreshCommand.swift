import ArgumentParser
import Foundation
import Glibc
import Proxy

/// `httpcachefs refresh [PATH]`: the daemon serving the mount that holds PATH (default: the
/// working directory, else the only mount) re-reads its listings under PATH, and its URL list,
/// now; returns once they are applied, so a file just added at the origin shows in `ls` after.
struct RefreshCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: "Re-read the directory listings (and URL list) of a mount now.",
        discussion: """
            PATH is a directory (or file) inside a mount: the listings at and under it are fetched \
            again, whatever --index-ttl says, and the URL list is re-read. Without PATH: the mount \
            holding the working directory, else the only one running. The daemon is asked through \
            its proxy; one running with --no-proxy is sent SIGHUP (every listing, without waiting).
            """)

    @Argument(help: ArgumentHelp("A path inside the mount (default: the whole mount).", valueName: "path"))
    var path: String?

    func run() async throws {
        let path = path
        try await runReportingErrors {
            try await onBlockingPool { try Self.refresh(path) }
        }
    }

    static func refresh(_ given: String?) throws {
        let cwd = FileManager.default.currentDirectoryPath
        let target = given.map { ($0.hasPrefix("/") ? $0 : cwd + "/" + $0) }.map { ($0 as NSString).standardizingPath }
        let daemons = DaemonDiscovery.mine().flatMap { d in d.mountpoints.map { (daemon: d, mountpoint: $0) } }
        func inside(_ p: String, _ mp: String) -> Bool { p == mp || mp == "/" || p.hasPrefix(mp + "/") }
        let chosen: (daemon: DaemonDiscovery.Daemon, mountpoint: String)
        let where_ = target ?? (cwd as NSString).standardizingPath
        if let best = daemons.filter({ inside(where_, $0.mountpoint) }).max(by: { $0.mountpoint.count < $1.mountpoint.count }) {
            chosen = best
        } else if given == nil, daemons.count == 1 {
            chosen = daemons[0]
        } else if daemons.isEmpty {
            throw CommandFailure("no httpcachefs mount of yours is running: start one with 'httpcachefs mount MOUNTPOINT URL...'")
        } else {
            let list = daemons.map { "\($0.mountpoint) (pid \($0.daemon.pid), cache \($0.daemon.cacheDirectory))" }.joined(separator: ", ")
            throw CommandFailure(given == nil ? "\(daemons.count) httpcachefs mounts of yours are running: give a path inside one of: \(list)"
                                              : "\(where_) is in no httpcachefs mount of yours (mounts: \(list))")
        }
        let relative = target.map { String($0.dropFirst(chosen.mountpoint.count)) } ?? ""
        let shown = chosen.mountpoint + (relative.isEmpty ? "" : relative)
        guard let proxy = chosen.daemon.proxy else {
            guard kill(chosen.daemon.pid, SIGHUP) == 0 else {
                throw CommandFailure("cannot signal the daemon of \(chosen.mountpoint) (pid \(chosen.daemon.pid)): \(String(cString: strerror(errno)))")
            }
            CacheCommand.printLine("sent SIGHUP to pid \(chosen.daemon.pid) (it runs no proxy): it re-reads every listing of \(chosen.mountpoint) in the background")
            return
        }
        // `mount=` names which of the daemon's mountpoints (a daemon may serve several).
        let answer = try DaemonControl.send("refresh", query: [("mount", chosen.mountpoint)] + (relative.isEmpty ? [] : [("path", relative)]), to: proxy)
        guard answer.status == 200 else {
            throw CommandFailure("refresh of \(shown): " + answer.lines.joined(separator: "; "))
        }
        for line in answer.lines { CacheCommand.printLine(line) }
    }
}
