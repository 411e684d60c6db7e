/// rclone mount options that mean something else here, refused with one line that says what to
/// use instead, rather than ArgumentParser's "Unknown option" (or, worse, taken for an option
/// of the same name with another meaning). The ones that mean the same are aliases
/// (`SettingsTable.rcloneNames`).
public enum RcloneNames {
    /// rclone's name -> what to do here.
    public static let refused: [String: String] = [
        "vfs-cache-mode": "httpcachefs always caches as rclone's --vfs-cache-mode full does (read-only): drop --vfs-cache-mode",
        "vfs-read-chunk-size": "httpcachefs fetches in cache slices (--slice-size, fixed when the cache is made) and grows read-ahead up to --read-ahead-max: drop --vfs-read-chunk-size",
        "vfs-read-chunk-size-limit": "httpcachefs grows read-ahead up to --read-ahead-max: use that instead of --vfs-read-chunk-size-limit",
        "vfs-read-chunk-streams": "parallel streams per file are bounded by --max-connections here: use that instead of --vfs-read-chunk-streams",
        "vfs-cache-poll-interval": "eviction runs as space is needed here: drop --vfs-cache-poll-interval",
        "poll-interval": "an HTTP origin cannot be polled: listings are read again after --index-ttl, or now with 'httpcachefs refresh'",
        "timeout": "rclone's --timeout is an idle timeout; here --read-timeout bounds how long a read waits on the network: use that",
    ]

    /// Throws the one-line refusal for the first refused rclone option in `arguments` (before a
    /// `--`), if any. `--name` and `--name=value` both count.
    public static func check(_ arguments: [String]) throws {
        for a in arguments {
            if a == "--" { return }
            guard a.hasPrefix("--") else { continue }
            let name = String(a.dropFirst(2).prefix { $0 != "=" })
            if let why = refused[name] { throw UsageError("--\(name) is rclone's: \(why)") }
        }
    }
}
