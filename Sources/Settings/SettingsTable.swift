/// The one table of settings: every long option of the shared option groups (`CacheOptions` and
/// its groups, `ProxyOptions`, `MountOwnerOptions`, the `mount` command's own), with where else it
/// may be given. The config file's keys (`ConfigFile.knownKeys`) and the fstab words
/// (`FstabWords`, used by `mount -o` and so by mount.httpcachefs) are made from it, and a test
/// (`SettingsTableTests`, and `HelpTextTests` against the binary's own option list) keeps the
/// option declarations and this table equal.
///
/// Adding a setting is one line here plus its `@Option` (named by `.customLong(name)`); reading
/// it from the config file is `setting(flag, name, in: file)` where the option is resolved.
public enum SettingsTable {
    public static let all: [Setting] = [
        // CacheOptions: every subcommand.
        .value("cache-dir"), .value("cache-size"), .value("slice-size"), .value("revalidate-after"),
        .value("read-timeout"), .list("ignore-query"), .list("header"), .value("upstream-proxy"),
        .flag("insecure"), .flag("ignore-etag"), .list("allow-host"), .value("log-level"), .value("log-file"),
        // rclone's -v / -vv and -q (also --verbose, --quiet): a log level.
        .flag("verbose"), .flag("quiet"),
        .value("config", inConfig: false, why: "a config file does not name another one"),
        // OriginOptions.
        .value("user-agent"), .value("ca-certificate"), .value("netrc-file"),
        .value("user", fstab: .none, why: "fstab's own 'user' word lets users mount; the origin's user goes in the config file"),
        .value("password-file"), .list("credential-host"),
        // CacheLimitOptions and TransferOptions.
        .value("cache-max-age"), .value("read-ahead-max"), .value("scan-share"), .value("entry-memory"), .value("max-connections"), .value("bwlimit"),
        .value("max-connections-per-host"), .value("tpslimit"), .value("tpslimit-burst"),
        .list("egress-budget"),
        .list("tier", fstab: .none, why: "its value holds commas, which end an fstab word: put it in the config file"),
        // S3Options: s3:// URLs.
        .value("s3-endpoint"), .value("s3-region"), .value("s3-access-key-id"), .flag("s3-force-path-style"),
        .value("s3-secret-access-key", fstab: .none, why: "/etc/fstab is readable by every user: put it in the config file (mode 0600) or $AWS_SECRET_ACCESS_KEY"),
        .value("s3-session-token", fstab: .none, why: "/etc/fstab is readable by every user: put it in the config file (mode 0600) or $AWS_SESSION_TOKEN"),
        // ProxyOptions: mount and proxy.
        .value("proxy-port"), .value("bind"), .value("token"), .list("proxy-name"),
        // MountOwnerOptions: already -o words of their own (MountOwnership reads them there).
        .value("uid", fstab: .fuseWord), .value("gid", fstab: .fuseWord), .value("umask", fstab: .fuseWord),
        .value("file-perms"), .value("dir-perms"),
        // rclone's flags (rclone names): -o allow_other, and two that are always so here.
        .flag("allow-other", fstab: .none, why: "its fstab word is libfuse's own allow_other"),
        .flag("read-only", fstab: .none, why: "always so: the mount is read-only (fstab's 'ro' is dropped)"),
        .flag("daemon", fstab: .none, why: "the default; fstab mounts go to the background anyway"),
        .list("include"), .list("exclude"),
        // rclone mount's own (RcloneOptions): taken as they mean here (`RcloneNames`).
        .value("vfs-cache-mode"), .flag("no-modtime"), .value("attr-timeout"), .value("poll-interval"),
        .value("vfs-read-chunk-size"), .value("vfs-read-chunk-size-limit"),
        .flag("rc"), .value("rc-addr"), .value("rc-user"),
        .value("rc-pass", fstab: .none, why: "/etc/fstab is readable by every user: put the password in the config file (mode 0600)"),
        // The mount command.
        .value("url-list"), .list("index"), .value("index-ttl"), .value("listing-memory"), .flag("by-url"), .flag("no-proxy"),
        .flag("no-passthrough"), .value("page-cache-fill"), .value("fuse-spin"), .value("stop-timeout"),
        .list("scanner"), .list("background-reader"), .flag("xattr-pins"),
        .value("on-change"),
        .flag("foreground", inConfig: false, why: "how the daemon runs is the command's choice (systemd passes it), not the library's"),
    ]

    /// Settings of one other command that the config file may set too (not `mount` options, so
    /// not fstab words): `preload --pin-max`.
    public static let otherCommands: [Setting] = [
        .value("pin-max", fstab: .none, why: "an option of preload, not of mount"),
    ]

    /// Option names that are spelled otherwise as well (`--port` is `--proxy-port`), rclone's
    /// names among them (`rcloneNames`).
    public static let aliases: [String: String] = ["port": "proxy-port"].merging(rcloneNames) { a, _ in a }

    /// rclone mount's names for settings that mean the same here ("rclone name" in `--help`):
    /// most people arriving come from rclone. Taken on the command line, in the config file and
    /// as -o words. rclone's names that mean something else are refused with the way out
    /// (`RcloneNames.refused`); `--allow-other`, `--read-only`, `--daemon`, `--vfs-cache-mode`,
    /// `--rc`... are rows of their own.
    public static let rcloneNames: [String: String] = [
        "vfs-cache-max-size": "cache-size",
        "vfs-cache-max-age": "cache-max-age",
        "dir-cache-time": "index-ttl",
        // rclone's in-memory buffer, its on-disk read-ahead and FUSE's read-ahead: here one
        // read-ahead, grown while a reader reads in order, bounded by this.
        "buffer-size": "read-ahead-max",
        "vfs-read-ahead": "read-ahead-max",
        "max-read-ahead": "read-ahead-max",
    ]

    /// The setting named `key`, written with dashes or underscores, any case.
    public static func named(_ key: String) -> Setting? {
        let k = normalized(key)
        return byName[aliases[k] ?? k]
    }

    /// `cache_size`, `Cache-Size` and `--cache-size` are one key: `cache-size`.
    public static func normalized(_ key: String) -> String {
        var k = key.lowercased().replacingOccurrences(of: "_", with: "-")
        while k.hasPrefix("-") { k.removeFirst() }
        return k
    }

    private static let byName: [String: Setting] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// The name among `candidates` closest to `written` (at most two edits, or a prefix of at
    /// least four letters), for "did you mean" in messages; nil when none is that close.
    public static func suggestion(for written: String, among candidates: [String]) -> String? {
        let w = normalized(written)
        guard !w.isEmpty else { return nil }
        let scored = candidates.map { ($0, editDistance(w, normalized($0))) }.filter { $0.1 <= min(2, max(1, w.count / 3)) }
        if let best = scored.min(by: { $0.1 < $1.1 }) { return best.0 }
        if w.count >= 4, let prefixed = candidates.first(where: { normalized($0).hasPrefix(w) }) { return prefixed }
        return nil
    }

    /// `candidate` spelled the way the user spelled `written`: with underscores if they used any.
    public static func spelled(_ candidate: String, like written: String) -> String {
        written.contains("_") ? candidate.replacingOccurrences(of: "-", with: "_") : candidate
    }

    /// Levenshtein distance, with a swap of two neighbours counting as one edit.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }
}

/// One row of `SettingsTable`.
public struct Setting: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        /// `--name VALUE`; `name = value`; `name=value`.
        case value
        /// Repeatable: every occurrence counts (`header`, `index`).
        case list
        /// `--name`; `name = yes`; `name` (or `name=yes`).
        case flag
    }

    public enum Fstab: Equatable, Sendable {
        /// An -o word that becomes the option (`cache_size=20G` is `--cache-size 20G`).
        case word
        /// An -o word left to the mount options, which read it there (`uid=`).
        case fuseWord
        /// Not an -o word (`why` says so).
        case none
    }

    /// The long option's name, with dashes: `cache-size`.
    public var name: String
    public var kind: Kind
    /// A config-file key.
    public var inConfig: Bool
    public var fstab: Fstab
    /// Why it is not a config key or fstab word, when it is not.
    public var why: String?

    public static func value(_ name: String, inConfig: Bool = true, fstab: Fstab = .word, why: String? = nil) -> Setting {
        Setting(name: name, kind: .value, inConfig: inConfig, fstab: fstab, why: why)
    }

    public static func list(_ name: String, inConfig: Bool = true, fstab: Fstab = .word, why: String? = nil) -> Setting {
        Setting(name: name, kind: .list, inConfig: inConfig, fstab: fstab, why: why)
    }

    public static func flag(_ name: String, inConfig: Bool = true, fstab: Fstab = .word, why: String? = nil) -> Setting {
        Setting(name: name, kind: .flag, inConfig: inConfig, fstab: fstab, why: why)
    }

    /// The fstab spelling: `cache_size`.
    public var fstabWord: String { name.replacingOccurrences(of: "-", with: "_") }
}
