import Foundation
import Glibc

/// How the mount behaves; the cache's own settings live in `CacheConfiguration`.
public struct MountOptions: Sendable {
    /// How long the kernel may trust a name and its attributes (follows `--revalidate-after`).
    /// When it expires, getattr revalidates the file with the origin (through the cache).
    public var revalidateAfter: TimeInterval
    /// How long a directory listing from `--index` is used before it is fetched again
    /// (`--index-ttl`). Past it, the listing is still served at once while a refresh runs in the
    /// background (stale-while-revalidate), for `listingStaleWindow` more.
    public var listingTTL: TimeInterval
    /// One minute: with stale-while-revalidate a listing past its TTL costs no wait, only one
    /// small background request per directory looked at, so the TTL trades that request against
    /// how soon a file added at the origin shows up. rclone's directory cache keeps 5 minutes
    /// but makes `ls` wait when it expires; a minute here shows new files about as soon as
    /// someone looks twice, and a library scan of thousands of folders asks for each at most
    /// once a minute.
    public static let defaultListingTTL: TimeInterval = 60
    /// How long past its TTL a listing is still served at once (refreshed in the background).
    /// A directory nobody looked at for longer waits for its listing, so a scan that runs twice
    /// a day sees the files added in between, not the listing of its previous run. An origin
    /// that is down fails that wait at once and the old listing is served.
    public var listingStaleWindow: TimeInterval = 3600
    /// A FUSE read that has not completed after this long fails with EIO, even if the engine
    /// forgot to time it out: no read ever hangs. nil disables this backstop.
    public var readDeadline: TimeInterval?
    /// Extra `-o` options for libfuse / the kernel (e.g. `allow_other`), one option per element.
    public var fuseOptions: [String]
    /// How long the FUSE loop stays awake after a request of a burst (nanoseconds; 0: it always
    /// sleeps between requests). `LoopSpin` says why.
    public var loopSpin: UInt64 = LoopSpin.defaultWindow
    /// Largest read the kernel sends in one request.
    public var maxRead: Int

    /// 1 MiB less 32 KiB. libfuse splices an fd-backed reply through a pipe that must hold the
    /// reply, its header and a page per piece; unprivileged (and in containers without
    /// CAP_SYS_RESOURCE) a pipe grows to `/proc/sys/fs/pipe-max-size`, 1 MiB by default. A full
    /// 1 MiB read never fits, and libfuse then gives up splicing for good on that thread, falling
    /// back to `pread` + `writev` (two copies through user space): warm reads ran at half the
    /// speed. 32 KiB leaves room for the header and up to five pieces.
    public static let defaultMaxRead = (1 << 20) - (32 << 10)
    /// Owner shown for every file and directory (default: the mounting user).
    public var uid: UInt32
    public var gid: UInt32
    /// Permission bits taken from every file's 0444 and directory's 0555 (`-o umask=027` gives
    /// 0440 and 0550). With `default_permissions` the kernel enforces the modes shown; write
    /// bits never appear, the file system being read-only, but for the owner's with `xattrPins`.
    public var umask: mode_t = 0
    /// Shown in /proc/mounts as the source.
    public var fsName: String
    /// libfuse debug output on stderr.
    public var debug: Bool
    /// Open fully cached files with FUSE passthrough (Linux 6.9+, a daemon with CAP_SYS_ADMIN):
    /// the kernel then reads them straight from the cache's data file, at the disk's speed, with
    /// no request per read. Where the kernel or the daemon cannot, files open as usual.
    public var passthrough = true
    /// How far ahead of a sequential reader of cached bytes the daemon puts them into the
    /// kernel's page cache (`PageCacheFill`); 0: not at all, every read asks the daemon.
    public var pageCacheFill: Int64 = MountOptions.defaultPageCacheFill
    /// Off: on Linux 6.18 the kernel's own read-ahead asked the daemon for every page the fill
    /// stored (1058 reads of a GiB with the fill and without), so each byte was copied into the
    /// page cache twice and a warm GiB read 0.63 s filled against 0.45-0.47 s not (root
    /// `--no-passthrough`; 0.72 against 0.49 for a daemon run by a user). docs/benchmarks.md.
    public static let defaultPageCacheFill: Int64 = 0
    /// How far ahead of a sequential reader without passthrough the daemon reads a cached
    /// file's data file from the disk (`DataFileReadAhead`); 0: only as far as the kernel's own
    /// read-ahead of the data file goes.
    public var dataFileReadAhead: Int64 = MountOptions.defaultDataFileReadAhead
    /// 32 MiB: four times the disk's own read-ahead here (`read_ahead_kb` 8192 on the VM's
    /// virtio disk), so the disk always has the next reads queued; it costs page-cache pages
    /// the reader is about to ask for anyway.
    public static let defaultDataFileReadAhead: Int64 = 32 << 20
    /// Memory all `--index` listings together may take in the tree (estimated per entry, see
    /// `FileSystemCore.listingCost`): a listing that would pass it fails (EIO on its directory),
    /// each listing being capped at 64 MiB of bytes besides.
    public var listingBudget: Int64 = MountOptions.defaultListingBudget
    /// Which processes read as scanners, players or in the background (`ReaderClass`): the
    /// built-in table with `--scanner` and `--background-reader` added.
    public var readerClasses = ReaderClassTable.builtIn
    /// `--include`/`--exclude`: entries of listings the mount leaves out (nil: none).
    public var listingFilter: ListingFilter?
    /// rclone's `--attr-timeout`: the longest the kernel keeps a file's attributes before asking
    /// again (nil: as long as the cache trusts them, `revalidateAfter`; never longer than that).
    public var attrTimeout: TimeInterval?
    /// `--xattr-pins`: `setfattr -n user.httpcachefs.pin -v 1 FILE` pins a file. The kernel
    /// refuses every xattr change on a read-only mount (EROFS) before asking the daemon, so the
    /// mount is then writable for the kernel: the daemon itself still refuses every write,
    /// create, rename and attribute change with EROFS. The daemon lets only `owner` and root pin
    /// (`PinPermission`). The kernel asks for write permission on the file first, so files shown
    /// as `owner`'s are then 0644 (less the umask): the owner's `setfattr` reaches the daemon.
    public var xattrPins = false
    /// The mount's owner: the user who runs the daemon (not `uid`, which only says whom files
    /// are shown as owned by). With root, the only one who may pin.
    public var owner: UInt32 = geteuid()
    public static let defaultListingBudget: Int64 = 256 << 20
    /// The least a listed entry costs in the tree (`FileSystemCore.listingCost`): a page with
    /// more entries than the budget holds at this price fails while it is parsed.
    public static let listingEntryCost: Int64 = 184
    /// The most entries one listing may have under `listingBudget`, each at `listingEntryCost`.
    public var maxListingEntries: Int { Int(max(listingBudget / Self.listingEntryCost, 1)) }
    /// The most bytes one listing may have under `listingBudget` (`ListingFetch.limit(listingBudget:)`).
    public var maxListingBytes: Int { ListingFetch.limit(listingBudget: listingBudget) }

    public init(revalidateAfter: TimeInterval = 600, listingTTL: TimeInterval? = nil,
                readDeadline: TimeInterval? = 65, fuseOptions: [String] = [], maxRead: Int = MountOptions.defaultMaxRead,
                uid: UInt32 = getuid(), gid: UInt32 = getgid(), fsName: String = "httpcachefs",
                debug: Bool = false) {
        self.revalidateAfter = revalidateAfter
        self.listingTTL = listingTTL ?? Self.defaultListingTTL
        self.readDeadline = readDeadline
        self.fuseOptions = fuseOptions
        self.maxRead = maxRead
        self.uid = uid
        self.gid = gid
        self.fsName = fsName
        self.debug = debug
    }

    public var fileMode: mode_t { (xattrPins && uid == owner ? 0o644 : 0o444) & ~umask }
    public var directoryMode: mode_t { 0o555 & ~umask }

    /// Splits `-o a,b=c` style strings into single options, dropping empties.
    public static func splitOptionList(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The full option list given to libfuse: read-only, with kernel permission checks
    /// (modes are 0444 / 0555) and reads just under 1 MiB (`defaultMaxRead`); the user's options come last.
    ///
    /// With `xattrPins` it is writable for the kernel only (see there); `-o rw` is dropped.
    var libfuseOptions: [String] {
        var opts = ["fsname=\(fsName.replacingOccurrences(of: ",", with: "_"))", "subtype=httpcachefs", xattrPins ? "rw" : "ro",
                    "default_permissions", "max_read=\(maxRead)"]
        for o in fuseOptions where !opts.contains(o) && o != "rw" && o != "ro" {
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

/// `uid=`, `gid=` and `umask=` among the `-o` options, as rclone and every FUSE file system that
/// serves media servers take them. libfuse's low-level API rejects them (its high-level library
/// is what knows them), so they are taken out of the list and shown by the file system itself.
public struct MountOwnership: Equatable, Sendable {
    public var uid: UInt32?
    public var gid: UInt32?
    public var umask: mode_t?

    public init(uid: UInt32? = nil, gid: UInt32? = nil, umask: mode_t? = nil) {
        self.uid = uid
        self.gid = gid
        self.umask = umask
    }

    /// Takes the ownership options out of `options` (single `-o` words), parsing each.
    public static func extract(from options: inout [String]) throws -> MountOwnership {
        var found = MountOwnership()
        var rest: [String] = []
        for o in options {
            let (key, value) = (o.prefix { $0 != "=" }, o.drop { $0 != "=" }.dropFirst())
            switch key {
            case "uid": found.uid = try parseUser(String(value), option: "-o uid")
            case "gid": found.gid = try parseGroup(String(value), option: "-o gid")
            case "umask": found.umask = try parseUmask(String(value), option: "-o umask")
            default: rest.append(o)
            }
        }
        options = rest
        return found
    }

    /// A numeric id or a user name known to the system.
    public static func parseUser(_ text: String, option: String) throws -> UInt32 {
        if let id = numericID(text) { return id }
        guard !text.isEmpty, let pw = getpwnam(text) else {
            throw OwnershipError("invalid user '\(text)' for \(option): expected a numeric uid or a user name known here")
        }
        return pw.pointee.pw_uid
    }

    /// A numeric id or a group name known to the system.
    public static func parseGroup(_ text: String, option: String) throws -> UInt32 {
        if let id = numericID(text) { return id }
        guard !text.isEmpty, let gr = getgrnam(text) else {
            throw OwnershipError("invalid group '\(text)' for \(option): expected a numeric gid or a group name known here")
        }
        return gr.pointee.gr_gid
    }

    /// Octal, as umask(1) writes it: `022`, `0027`, `7`.
    public static func parseUmask(_ text: String, option: String) throws -> mode_t {
        guard !text.isEmpty, text.count <= 4, text.allSatisfy({ ("0"..."7").contains($0) }), let v = mode_t(text, radix: 8), v <= 0o777 else {
            throw OwnershipError("invalid umask '\(text)' for \(option): expected octal permission bits such as 022 or 027")
        }
        return v
    }

    /// Ids are 32-bit; -1 (4294967295) means "no change" to chown and is no owner.
    private static func numericID(_ text: String) -> UInt32? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }), let v = UInt32(text), v != UInt32.max else { return nil }
        return v
    }
}

public struct OwnershipError: Error, CustomStringConvertible, Equatable {
    public var description: String
    init(_ description: String) { self.description = description }
}
