import CacheCore
import Foundation
import FuseMount
import Settings
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs url PATH`: the remote URL of a file (or folder) inside a running mount, read off
/// the mount's own description, so no request to the daemon is needed.
///
/// The daemon serving PATH is the user's daemon whose mountpoint holds it (the deepest one);
/// its command line (`/proc/PID/cmdline`, relative paths against its working directory) and
/// config file give the tree it was started with (`MountCommand.buildTree`): a file named by an
/// argument or the URL list maps to its URL, a path under an `--index` to the listing's URL with
/// each further name percent-encoded (as listings are), `.url/https/HOST/PATH` to that URL.
/// The result is in its one spelling (`URLSpelling`), which is also how a listing's own link is
/// keyed, so the proxy URL serves the bytes the mount shows.
enum MountPathURL {
    struct Found {
        var url: String
        var daemon: DaemonDiscovery.Daemon
    }

    /// nil when `text` is no path (a URL); an error when it is a path but in no mount, or the
    /// mount cannot say which URL it shows there.
    static func resolve(_ text: String, daemons: [DaemonDiscovery.Daemon]) throws -> Found? {
        guard !text.contains("://") else { return nil }
        let cwd = FileManager.default.currentDirectoryPath
        let path = ((text.hasPrefix("/") ? text : cwd + "/" + text) as NSString).standardizingPath
        func inside(_ mp: String) -> Bool { path == mp || mp == "/" || path.hasPrefix(mp + "/") }
        let candidates = daemons.flatMap { d in d.mountpoints.map { (daemon: d, mountpoint: $0) } }
        guard let chosen = candidates.filter({ inside($0.mountpoint) }).max(by: { $0.mountpoint.count < $1.mountpoint.count }) else {
            let mounts = candidates.map(\.mountpoint)
            // Another user's mount (root's `status` lists its daemon): say whose, as `url
            // --cache-dir` of another user's cache does.
            let table = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
            if let owner = DaemonDiscovery.foreignFuseOwner(of: path, mounts: table, me: geteuid(), fstype: "fuse.httpcachefs") {
                throw CommandFailure("'\(text)' is in an httpcachefs mount of uid \(owner)'s, not yours (uid \(geteuid())): its proxy URLs are signed with that user's key, which only that user can read; run 'httpcachefs url' as that user")
            }
            throw CommandFailure("'\(text)' is neither an http(s) URL nor a path inside an httpcachefs mount"
                                 + (mounts.isEmpty ? " (none of yours is running)" : " (mounts: \(mounts.joined(separator: ", ")))"))
        }
        let components = path.dropFirst(chosen.mountpoint == "/" ? 1 : chosen.mountpoint.count)
            .split(separator: "/").map(String.init)
        // The mount itself says whether the name is there (a lookup, answered from the listing):
        // the tree alone maps any name under an --index to a URL, one the listing may not have.
        var st = stat()
        guard stat(path, &st) == 0 else {
            let cause = String(cString: strerror(errno))
            throw CommandFailure("\(path): \(cause) (in the mount \(chosen.mountpoint)): give a file the mount shows")
        }
        let tree = try tree(of: chosen.daemon, mountpoint: chosen.mountpoint)
        guard let url = url(of: components, in: tree) else {
            throw CommandFailure("\(path) is in the mount \(chosen.mountpoint), but no file or listing of it is there")
        }
        return Found(url: try KeyRules.normalized(asFolder(url, isFolder: (st.st_mode & S_IFMT) == S_IFDIR)), daemon: chosen.daemon)
    }

    /// A folder's URL is its listing's, which ends in '/' (before any query): the spelling the
    /// listing is cached under and the one a server lists without a redirect.
    static func asFolder(_ url: String, isFolder: Bool) -> String {
        guard isFolder else { return url }
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let path = parts.first, !path.hasSuffix("/") else { return url }
        return path + "/" + (parts.count > 1 ? "?" + parts[1] : "")
    }

    /// The URL shown at `components` (below the mountpoint), or nil.
    static func url(of components: [String], in tree: MountTreeSpec) -> String? {
        if let file = tree.files.first(where: { $0.path == components }) { return file.url }
        if tree.byURL, components.first == MountTreeSpec.byURLName, components.count >= 3,
           ["http", "https"].contains(components[1]) {
            return components[1] + "://" + components[2...].joined(separator: "/")
        }
        let index = tree.indexes.filter { components.starts(with: $0.path) }.max { $0.path.count < $1.path.count }
        guard let index else { return nil }
        let rest = components.dropFirst(index.path.count)
        let encoded = rest.map { $0.addingPercentEncoding(withAllowedCharacters: segmentAllowed) ?? $0 }
        // The listing URL ends in '/' (before any query, which children do not carry).
        let base = index.url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? index.url
        return base + encoded.joined(separator: "/")
    }

    /// RFC 3986 pchar less `/`: what a name inside one path segment keeps as it is.
    static let segmentAllowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@")

    /// The tree the daemon serves at `mountpoint`, from its command line and config file, or,
    /// for a mountpoint a later `mount` added, from that command's arguments (`DaemonMounts`).
    static func tree(of daemon: DaemonDiscovery.Daemon, mountpoint: String) throws -> MountTreeSpec {
        let arguments: [String]
        if let added = daemon.addedArguments[mountpoint] {
            arguments = added
        } else if let at = daemon.arguments.dropFirst().firstIndex(of: "mount") {
            arguments = Array(daemon.arguments[(at + 1)...])
        } else {
            arguments = []
        }
        guard !arguments.isEmpty, var command = try? MountCommand.parse(arguments) else {
            throw CommandFailure("cannot read the command line of the daemon (pid \(daemon.pid)) serving this mount")
        }
        let absolute = { (p: String) in p.hasPrefix("/") || daemon.cwd == nil ? p : daemon.cwd! + "/" + p }
        command.urlList = command.urlList.map(absolute)
        command.cache.configFile = command.cache.configFile.map(absolute)
        do {
            let settings = try command.settings(file: try ConfigFile.load(explicitPath: command.cache.configFile))
            return try command.buildTree(settings)
        } catch {
            throw CommandFailure("cannot tell the files of the mount of pid \(daemon.pid): \(error)")
        }
    }
}
