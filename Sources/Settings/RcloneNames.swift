/// rclone mount's options, as people carry them over in every unit file.
///
/// - Those that mean the same are aliases (`SettingsTable.rcloneNames`) or rows of their own
///   (`--allow-other`, `--read-only`, `--daemon`, `-v`, `--rc`...).
/// - Those whose job is done otherwise here are taken and do nothing, with one line that says what
///   does it instead (`acceptedNotes`), so a unit file moved over works as it is.
/// - Those that mean something else here are refused with one line that says what to use instead
///   (`refused`), rather than ArgumentParser's "Unknown option" (or, worse, taken for an option of
///   the same name with another meaning).
public enum RcloneNames {
    /// rclone's name -> what to do here.
    public static let refused: [String: String] = [
        "vfs-read-chunk-streams": "parallel streams per file are bounded by --max-connections here: use that instead of --vfs-read-chunk-streams",
        "vfs-cache-poll-interval": "eviction runs as space is needed here: drop --vfs-cache-poll-interval",
        "timeout": "rclone's --timeout is an idle timeout; here --read-timeout bounds how long a read waits on the network: use that",
        "rc-no-auth": "the remote control here always asks for a login (--rc-user and --rc-pass, or the owner's key): drop --rc-no-auth",
        "rc-htpasswd": "the remote control here takes one login: give --rc-user and --rc-pass",
        "rc-web-gui": "there is no web GUI here; the status page is http://127.0.0.1:PORT/.httpcachefs/status on the proxy",
        "rc-serve": "the proxy serves the cached files here (httpcachefs url prints their URLs): drop --rc-serve",
        "max-transfer": "rclone's --max-transfer stops a run after that many bytes; here --egress-budget SIZE/PERIOD caps what each origin may send per day, week or month (e.g. 750G/day): use that",
    ]

    /// rclone's options that are taken and change nothing, and why: what does their job here.
    public static let acceptedNotes: [String: String] = [
        "vfs-read-chunk-size": "httpcachefs fetches in cache slices (--slice-size, fixed when the cache is made) and grows read-ahead up to --read-ahead-max, so --vfs-read-chunk-size changes nothing",
        "vfs-read-chunk-size-limit": "httpcachefs grows read-ahead up to --read-ahead-max, so --vfs-read-chunk-size-limit changes nothing",
        "no-modtime": "dates come with the listings and answers here at no cost, so --no-modtime changes nothing",
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

    /// `--vfs-cache-mode`: `full` is what httpcachefs always does (every byte read is kept in the
    /// cache on disk, read-only), so it is taken; the others would keep less, which this cache
    /// cannot, and are refused with why.
    public static func checkCacheMode(_ text: String, option: String) throws {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "full": return
        case "off", "minimal", "writes":
            throw UsageError("--vfs-cache-mode \(text) (\(option)) is not possible here: httpcachefs always keeps what it reads in its cache on disk, as rclone's 'full' does (the mount is read-only, so there are no writes to cache): give full or drop it")
        default:
            throw UsageError("invalid value '\(text)' for \(option): rclone's cache modes are off, minimal, writes and full; httpcachefs always works as full")
        }
    }

    /// `--vfs-read-chunk-size` and `--vfs-read-chunk-size-limit`: a size, or rclone's `off` / `-1`
    /// (no limit). Checked, so a typo is still an error, though the value is not used.
    public static func checkChunkSize(_ text: String, option: String) throws {
        let t = text.trimmingCharacters(in: .whitespaces).lowercased()
        if t == "off" || t == "-1" { return }
        _ = try ByteSize.parse(text, option: option)
    }

    /// `-v`, `-vv`, `-q` as a log level: rclone's `-v` is INFO, `-vv` DEBUG and `-q` ERROR.
    /// nil: neither given. `--log-level` wins over both (the caller's order).
    public static func logLevelName(verbose: Int, quiet: Bool) throws -> String? {
        if verbose > 0 && quiet { throw UsageError("-v and -q contradict each other: give one") }
        if quiet { return "error" }
        switch verbose {
        case 0: return nil
        case 1: return "info"
        default: return "debug"
        }
    }

    /// `verbose = ...` in the config file: a count (`2` is `-vv`) or a yes/no (`yes` is `-v`).
    public static func verboseCount(_ text: String, option: String) throws -> Int {
        let t = text.trimmingCharacters(in: .whitespaces)
        if let n = Int(t), (0...3).contains(n) { return n }
        guard let on = try? BoolValue.parse(t, option: option) else {
            throw UsageError("invalid value '\(text)' for \(option): expected 0, 1 (-v), 2 (-vv), yes or no")
        }
        return on ? 1 : 0
    }
}
