import CacheCore
import Foundation
import FuseMount
import Logging
import Proxy
import Settings

/// The daemon-wide parts of rclone's mount options (`RcloneOptions`): the remote control
/// (`--rc`, `RcServer`) and the timed refresh (`--poll-interval`). Both act on every mountpoint
/// of the daemon through `MountHost`, as `httpcachefs refresh` and `cache rm` do.
extension MountCommand {
    /// rclone's remote control for `host`'s mountpoints, listening before the mount is reported
    /// ready (a port in use fails the mount, naming the way out). `controlKey`: the proxy's, the
    /// login without `--rc-user`/`--rc-pass` (nil: no proxy; the caller made sure a login is given).
    func startRc(_ rc: RcloneOptions.RcSettings, host: MountHost, proxy: ProxyConfiguration?, logger: Logger) async throws -> RcServer {
        let engine = host.engine, mounts = host.mounts
        let configuration = proxy ?? ProxyConfiguration(cacheDirectory: URL(fileURLWithPath: host.cache.directory).standardizedFileURL.path,
                                                        version: Version.string)
        let login = rc.user.flatMap { user in rc.password.map { (user: user, password: $0) } }
        let hooks = RcHooks(
            engine: engine, configuration: configuration, logger: logger,
            mounts: { await host.control($0, query: $1) },
            readTree: { mountpoint, dir in
                guard mounts.mount(at: mountpoint) != nil, !dir.split(separator: "/").contains("..") else {
                    return ControlAnswer(status: 404, text: "not in the mount: /\(dir)")
                }
                return (try? await onBlockingPool { Self.readFolders(mountpoint: mountpoint, dir: dir) })
                    ?? ControlAnswer(status: 500, text: "cannot read the folders under /\(dir)")
            },
            mountpoints: { mounts.all.map(\.path) },
            fileURL: { mountpoint, path in
                guard let mount = mounts.mount(at: mountpoint) else { return nil }
                let components = path.split(separator: "/").map(String.init)
                guard !components.contains(".."), let url = MountPathURL.url(of: components, in: mount.fs.tree) else { return nil }
                return (try? KeyRules.normalized(url)) ?? url
            },
            mountStats: { mountpoint in
                guard let mount = mounts.mount(at: mountpoint) else { return (0, 0, 0) }
                return (mount.fs.openFileCount, mount.fs.tree.files.count, mount.fs.tree.indexes.count)
            })
        let server = RcServer(host: rc.address.host, port: rc.address.port,
                              access: RcAccess(login: login, controlKey: configuration.controlKey, bindAddress: rc.address.host),
                              hooks: hooks, clock: engine.configuration.engineClock.wall, logger: logger, group: DaemonLoops.shared)
        do {
            _ = try await onBlockingPool { try server.start() }
        } catch ProxyServerError.portInUse(let address, let port) {
            throw CommandFailure("the remote control cannot listen on \(address):\(port): the port is in use (an rclone's --rc?); "
                + "give it another with --rc-addr localhost:N (0 picks a free one), or drop --rc")
        }
        return server
    }

    /// "serving remote control on http://HOST:PORT/", an IPv6 address in brackets.
    static func rcServingLine(host: String, port: Int) -> String {
        let h = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "serving remote control on http://\(h):\(port)/"
    }

    /// A recursive `vfs/refresh`: every folder under `dir` of the mount at `mountpoint` listed
    /// through the kernel, as `ls -R` would, so each listing not read yet is read now (rclone's
    /// recursive refresh fills its directory cache the same way). The by-URL directory is left
    /// out (it lists nothing); at most `limit` folders. Blocks: run it on the blocking pool,
    /// never on a FUSE thread (the mount's own threads answer these reads).
    static func readFolders(mountpoint: String, dir: String, limit: Int = 100_000) -> ControlAnswer {
        let top = dir.isEmpty ? mountpoint : mountpoint + "/" + dir
        var stack = [top], folders = 0
        var failures: [String] = []
        while let path = stack.popLast() {
            guard folders < limit else {
                failures.append("stopped after \(limit) folders")
                break
            }
            guard let listing = opendir(path) else {
                failures.append("\(path): \(String(cString: strerror(errno)))")
                continue
            }
            folders += 1
            while let entry = readdir(listing) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name == "." || name == ".." || (path == mountpoint && name == MountTreeSpec.byURLName) { continue }
                var isFolder = entry.pointee.d_type == UInt8(DT_DIR)
                if entry.pointee.d_type == UInt8(DT_UNKNOWN) {
                    var st = stat()
                    isFolder = lstat(path + "/" + name, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
                }
                if isFolder { stack.append(path + "/" + name) }
            }
            closedir(listing)
        }
        let line = "read \(folders) folder\(folders == 1 ? "" : "s") under /\(dir)"
        return ControlAnswer(status: failures.isEmpty ? 200 : 502, text: ([line] + failures.map { "failed: " + $0 }).joined(separator: "\n"))
    }

    /// rclone's `--poll-interval`: every `interval`, what `httpcachefs refresh` does, for every
    /// mountpoint (the URL list and every listing read so far; `--on-change` hears of changes).
    /// Cancel the task to stop it.
    static func poll(every interval: TimeInterval, host: MountHost) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
                if Task.isCancelled { return }
                _ = await host.refresh(path: nil, why: "poll-interval")
            }
        }
    }
}
