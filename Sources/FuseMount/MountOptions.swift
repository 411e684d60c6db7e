import Foundation
import Glibc

/// How the mount behaves; the cache's own settings live in `CacheConfiguration`.
public struct MountOptions: Sendable {
    /// How long the kernel may trust a name and its attributes (follows `--revalidate-after`).
    /// When it expires, getattr revalidates the file with the origin (through the cache).
    public var revalidateAfter: TimeInterval
    /// How long a directory listing from `--index` is reused before it is fetched again.
    public var listingTTL: TimeInterval
    /// A FUSE read that has not completed after this long fails with EIO, even if the engine
    /// forgot to time it out: no read ever hangs. nil disables this backstop.
    public var readDeadline: TimeInterval?
    /// Extra `-o` options for libfuse / the kernel (e.g. `allow_other`), one option per element.
    public var fuseOptions: [String]
    /// Largest read the kernel sends in one request.
    public var maxRead: Int
    /// Owner shown for every file and directory (default: the mounting user).
    public var uid: UInt32
    public var gid: UInt32
    /// Shown in /proc/mounts as the source.
    public var fsName: String
    /// libfuse debug output on stderr.
    public var debug: Bool

    public init(revalidateAfter: TimeInterval = 600, listingTTL: TimeInterval? = nil,
                readDeadline: TimeInterval? = 65, fuseOptions: [String] = [], maxRead: Int = 1 << 20,
                uid: UInt32 = getuid(), gid: UInt32 = getgid(), fsName: String = "httpcachefs",
                debug: Bool = false) {
        self.revalidateAfter = revalidateAfter
        self.listingTTL = listingTTL ?? revalidateAfter
        self.readDeadline = readDeadline
        self.fuseOptions = fuseOptions
        self.maxRead = maxRead
        self.uid = uid
        self.gid = gid
        self.fsName = fsName
        self.debug = debug
    }

    /// Splits `-o a,b=c` style strings into single options, dropping empties.
    public static func splitOptionList(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The full option list given to libfuse: always read-only, with kernel permission checks
    /// (modes are 0444 / 0555) and 1 MiB reads; the user's options come last.
    var libfuseOptions: [String] {
        var opts = ["fsname=\(fsName.replacingOccurrences(of: ",", with: "_"))", "subtype=httpcachefs", "ro",
                    "default_permissions", "max_read=\(maxRead)"]
        for o in fuseOptions where !opts.contains(o) && o != "rw" {
            if o.hasPrefix("max_read=") || o.hasPrefix("fsname=") || o.hasPrefix("subtype=") {
                opts.removeAll { $0.hasPrefix(String(o.prefix(while: { $0 != "=" })) + "=") }
            }
            opts.append(o)
        }
        return opts
    }

    /// The `max_read` in force (a user's `-o max_read=` wins), which `init` must repeat to libfuse.
    var effectiveMaxRead: Int {
        for o in libfuseOptions.reversed() where o.hasPrefix("max_read=") {
            if let v = Int(o.dropFirst("max_read=".count)) { return v }
        }
        return maxRead
    }
}
