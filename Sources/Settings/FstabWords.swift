/// `mount -o` words, as fstab and mount(8) give them: settings from `SettingsTable`
/// (`cache_size=20G`, `by_url`) become their command-line options, fstab's own words (`noauto`,
/// `nofail`, `x-systemd.*`, ...) are dropped, and the rest (`allow_other`, `uid=`, ...) stays for
/// libfuse and the kernel. A word that is none of these but close to a setting is a typo
/// ("did you mean 'cache_size'?") rather than an option libfuse would refuse without a hint.
public enum FstabWords {
    /// Words mount(8), fstab and systemd use for themselves; never passed on.
    static let fstabOnly: Set<String> = [
        "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group", "nofail", "_netdev",
        "comment", "rw", "ro", "loop", "sw", "nobootwait",
    ]

    /// Mount options of libfuse and the kernel that a typo check must leave alone.
    static let fuseWords: Set<String> = [
        "allow_other", "allow_root", "auto_unmount", "default_permissions", "fsname", "subtype", "max_read",
        "blkdev", "blksize", "debug", "nonempty", "kernel_cache", "auto_cache", "dev", "nodev", "suid", "nosuid",
        "exec", "noexec", "async", "sync", "atime", "noatime", "relatime", "norelatime", "strictatime",
        "dirsync", "lazytime", "nolazytime", "context", "fscontext", "defcontext", "rootcontext",
        "max_background", "congestion_threshold", "uid", "gid", "umask", "mand", "nomand",
    ]

    /// The options `words` stand for, and the words left for libfuse.
    public static func split(_ words: [String]) throws -> (arguments: [String], fuseOptions: [String]) {
        var arguments: [String] = []
        var fuse: [String] = []
        for word in words where !word.isEmpty {
            let key = String(word.prefix { $0 != "=" })
            let value: String? = word.contains("=") ? String(word.drop { $0 != "=" }.dropFirst()) : nil
            let underscored = key.replacingOccurrences(of: "-", with: "_")
            if fstabOnly.contains(underscored) || underscored.hasPrefix("x_") || key.hasPrefix("x-") { continue }
            if SettingsTable.named(key)?.name == "rc-pass" {
                // Not handed to libfuse either, whose "unknown option" line would show it.
                throw UsageError("mount option '\(key)' would put a password in /etc/fstab, which every user can read: put rc-pass in the config file (--config, mode 0600)")
            }
            if let setting = SettingsTable.named(key), setting.fstab == .word {
                switch setting.kind {
                case .value, .list:
                    guard let value else {
                        throw UsageError("mount option '\(key)' needs a value: \(key)=...")
                    }
                    arguments += ["--\(setting.name)", value]
                case .flag:
                    if let value, !(try BoolValue.parse(value, option: "mount option '\(key)'")) { continue }
                    arguments.append("--\(setting.name)")
                }
                continue
            }
            if !fuseWords.contains(underscored), !key.contains("."),
               let near = SettingsTable.suggestion(for: key, among: SettingsTable.all.filter { $0.fstab != .none }.map(\.fstabWord)) {
                throw UsageError("unknown mount option '\(key)'; did you mean '\(SettingsTable.spelled(near.replacingOccurrences(of: "_", with: "-"), like: key))'?")
            }
            fuse.append(word)
        }
        return (arguments, fuse)
    }

    /// `httpcachefs mount ... -o WORDS ...` with every setting word in `-o` turned into its
    /// option (see `split`); other commands' arguments are returned as they are.
    /// rclone's options that mean something else here are refused first, whatever the command
    /// (`RcloneNames`).
    public static func expandingMountArguments(_ arguments: [String]) throws -> [String] {
        try RcloneNames.check(arguments)
        guard arguments.first == "mount" else { return arguments }
        var out = ["mount"]
        var fuse: [String] = []
        var i = 1
        while i < arguments.count {
            let a = arguments[i]
            if a == "--" {
                out += arguments[i...]
                break
            }
            var list: String?
            if a == "-o", i + 1 < arguments.count {
                list = arguments[i + 1]
                i += 2
            } else if a.hasPrefix("-o"), a.count > 2, !a.hasPrefix("--") {
                list = String(a.dropFirst(2))
                i += 1
            } else {
                out.append(a)
                i += 1
            }
            if let list {
                let words = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                let (options, rest) = try split(words)
                out += options
                fuse += rest
            }
        }
        if !fuse.isEmpty {
            let at = out.firstIndex(of: "--") ?? out.endIndex
            out.insert(contentsOf: ["-o", fuse.joined(separator: ",")], at: at)
        }
        return out
    }
}
