import ArgumentParser
import Foundation
import Settings

/// rclone mount's own options, taken as they mean here (`RcloneNames` has the words):
/// `--vfs-cache-mode full` (what httpcachefs always does; the others refused with why),
/// `--attr-timeout` (how long the kernel keeps attributes), `--poll-interval` (the daemon re-reads
/// its listings that often), `--rc` and its `--rc-addr/--rc-user/--rc-pass` (rclone's remote
/// control, `RcServer`), and three that change nothing here, each with a note saying what does
/// their job (`--vfs-read-chunk-size[-limit]`, `--no-modtime`). `mount` only.
struct RcloneOptions: ParsableArguments {
    @Option(name: .customLong("vfs-cache-mode"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: full is what httpcachefs always does (every byte read is kept on disk); off, minimal and writes are refused.", valueName: "mode"))
    var cacheMode: String?

    @Flag(name: .customLong("no-modtime"), help: "rclone name: taken, changes nothing (dates come with listings and answers at no cost).")
    var noModtime = false

    @Option(name: .customLong("attr-timeout"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: the longest the kernel keeps a file's size and date before asking the daemon again (default: as long as the cache trusts them, --revalidate-after).", valueName: "duration"))
    var attrTimeout: String?

    @Option(name: .customLong("poll-interval"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: re-read the URL list and every listing read so far this often, as 'httpcachefs refresh' does (--on-change hears of changes); 0 is off (default: off; listings are also re-read after --index-ttl when looked at).", valueName: "duration"))
    var pollInterval: String?

    @Option(name: .customLong("vfs-read-chunk-size"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: taken, changes nothing (fetches go in cache slices, --slice-size, with read-ahead up to --read-ahead-max).", valueName: "size"))
    var chunkSize: String?

    @Option(name: .customLong("vfs-read-chunk-size-limit"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: taken, changes nothing (read-ahead grows up to --read-ahead-max).", valueName: "size"))
    var chunkSizeLimit: String?

    @Flag(name: .customLong("rc"),
          help: "rclone name: serve rclone's remote control (vfs/refresh, vfs/forget, vfs/stats, core/stats...) on --rc-addr, for the owner: with --rc-user/--rc-pass, else user 'httpcachefs' with the control key of the daemon's proxy.json.")
    var rc = false

    @Option(name: .customLong("rc-addr"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: where the remote control listens, loopback only (default: localhost:5572); implies --rc.", valueName: "host:port"))
    var rcAddress: String?

    @Option(name: .customLong("rc-user"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: the remote control's login name (with --rc-pass).", valueName: "name"))
    var rcUser: String?

    @Option(name: .customLong("rc-pass"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: the remote control's password (with --rc-user); better in the config file, which others cannot read.", valueName: "password"))
    var rcPassword: String?

    struct Resolved: Equatable {
        var attrTimeout: TimeInterval?
        /// nil or 0: no timed refresh.
        var pollInterval: TimeInterval?
        var rc: RcSettings?
        /// One line per option taken that changes nothing, saying what does its job here.
        var notes: [String] = []
    }

    struct RcSettings: Equatable {
        var address: RcAddress
        /// `--rc-user` / `--rc-pass`; nil: the owner's control key (`RcAccess`).
        var user: String?
        var password: String?
    }

    /// The options over the config file, checked.
    func resolve(file: ConfigFile?) throws -> Resolved {
        func flag(_ given: Bool, _ key: String) throws -> Bool {
            if given { return true }
            guard let file, let value = file[key] else { return false }
            return try BoolValue.parse(value, option: file.describe(key))
        }
        var r = Resolved()
        if let v = setting(cacheMode, "vfs-cache-mode", in: file) { try RcloneNames.checkCacheMode(v.text, option: v.option) }
        if try flag(noModtime, "no-modtime") { r.notes.append(RcloneNames.acceptedNotes["no-modtime"]!) }
        for (given, key) in [(chunkSize, "vfs-read-chunk-size"), (chunkSizeLimit, "vfs-read-chunk-size-limit")] {
            guard let v = setting(given, key, in: file) else { continue }
            try RcloneNames.checkChunkSize(v.text, option: v.option)
            r.notes.append(RcloneNames.acceptedNotes[key]!)
        }
        if let v = setting(attrTimeout, "attr-timeout", in: file) { r.attrTimeout = try DurationValue.parse(v.text, option: v.option) }
        if let v = setting(pollInterval, "poll-interval", in: file) {
            let seconds = try DurationValue.parse(v.text, option: v.option)
            guard seconds == 0 || seconds >= 1 else { throw UsageError("poll interval '\(v.text)' for \(v.option) is too short: at least 1s (0 is off)") }
            r.pollInterval = seconds > 0 ? seconds : nil
        }
        let address = setting(rcAddress, "rc-addr", in: file)
        let user = setting(rcUser, "rc-user", in: file), password = setting(rcPassword, "rc-pass", in: file)
        if try flag(rc, "rc") || address != nil {
            if (user == nil) != (password == nil) {
                throw UsageError("\(user?.option ?? password!.option) needs \(user == nil ? "--rc-user" : "--rc-pass") too: the remote control takes both or neither (then: user 'httpcachefs' with the control key of the daemon's proxy.json)")
            }
            if let user, user.text.isEmpty || user.text.contains(":") {
                throw UsageError("invalid name '\(user.text)' for \(user.option): it may not be empty or contain ':'")
            }
            if let password, password.text.isEmpty { throw UsageError("empty password for \(password.option)") }
            r.rc = RcSettings(address: try RcAddress.parse(address?.text ?? RcAddress.defaultText, option: address?.option ?? "--rc-addr"),
                              user: user?.text, password: password?.text)
        } else if let given = user ?? password {
            throw UsageError("\(given.option) is for the remote control: give --rc too")
        }
        return r
    }
}
