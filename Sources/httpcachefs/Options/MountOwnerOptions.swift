import ArgumentParser
import Foundation
import FuseMount
import Settings

/// `mount --uid N --gid N --umask NNN`, the same as `-o uid=N,gid=N,umask=NNN` (the fstab
/// spelling), or `uid`/`gid`/`umask` in the config file: who owns the files and directories the
/// mount shows, and which of their permission bits (0444 and 0555) are taken away. Defaults: the
/// mounting user and group, no bits taken.
///
/// The kernel checks these modes (`default_permissions`), but only users the mount lets in at all
/// reach that check: without `-o allow_other` that is the mounting user alone, whatever the modes.
struct MountOwnerOptions: ParsableArguments {
    @Option(name: .customLong("uid"), parsing: .unconditional,
            help: ArgumentHelp("Owner of every file and directory, a uid or user name (default: the mounting user); same as -o uid=N.", valueName: "uid"))
    var uid: String?

    @Option(name: .customLong("gid"), parsing: .unconditional,
            help: ArgumentHelp("Group of every file and directory, a gid or group name (default: the mounting user's group); same as -o gid=N.", valueName: "gid"))
    var gid: String?

    @Option(name: .customLong("umask"), parsing: .unconditional,
            help: ArgumentHelp("Octal permission bits taken from files (0444) and directories (0555), e.g. 027 for 0440/0550; same as -o umask=NNN. Other users need -o allow_other as well.", valueName: "octal"))
    var umask: String?

    @Option(name: .customLong("file-perms"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: files' permission bits, e.g. 0440 (write bits are ignored: the mount is read-only); the --umask that gives them.", valueName: "octal"))
    var filePerms: String?

    @Option(name: .customLong("dir-perms"), parsing: .unconditional,
            help: ArgumentHelp("rclone name: directories' permission bits, e.g. 0550 (write bits ignored); the --umask that gives them.", valueName: "octal"))
    var dirPerms: String?

    @Flag(name: .customLong("allow-other"), help: "rclone name: same as -o allow_other (for users other than root this needs 'user_allow_other' in /etc/fuse.conf).")
    var allowOther = false

    @Flag(name: .customLong("read-only"), help: "rclone name: accepted; the mount is always read-only.")
    var readOnly = false

    init() {}

    /// The ownership in force and the `-o` options left for libfuse. `--uid` and `-o uid=` are
    /// one setting: both given with different values is an error; either wins over the config file.
    func resolve(fuseOptions: [String], configFile: String?) throws -> (ownership: MountOwnership, fuseOptions: [String]) {
        var rest = fuseOptions
        let file0 = try ConfigFile.load(explicitPath: configFile)
        let allowOtherInFile = try file0?["allow-other"].map { try BoolValue.parse($0, option: file0!.describe("allow-other")) } ?? false
        if (allowOther || allowOtherInFile) && !rest.contains("allow_other") { rest.append("allow_other") }
        let fromO: MountOwnership
        do { fromO = try MountOwnership.extract(from: &rest) } catch { throw UsageError("\(error)") }
        let file = try ConfigFile.load(explicitPath: configFile)
        var result = MountOwnership()
        do {
            result.uid = try pick(uid, fromO.uid, "uid", file) { try MountOwnership.parseUser($0, option: $1) }
            result.gid = try pick(gid, fromO.gid, "gid", file) { try MountOwnership.parseGroup($0, option: $1) }
            result.umask = try pick(umask, fromO.umask, "umask", file) { try MountOwnership.parseUmask($0, option: $1) }
            let files = try setting(filePerms, "file-perms", in: file).map { try MountOwnership.parseUmask($0.text, option: $0.option) }
            let dirs = try setting(dirPerms, "dir-perms", in: file).map { try MountOwnership.parseUmask($0.text, option: $0.option) }
            if files != nil || dirs != nil {
                if result.umask != nil { throw UsageError("--umask and --file-perms/--dir-perms (rclone's) set the same bits: give one of them") }
                result.umask = try Self.umask(filePerms: files, dirPerms: dirs)
            }
        } catch let error as OwnershipError {
            throw UsageError(error.description)
        }
        return (result, rest)
    }

    /// The one umask that turns 0444 files and 0555 directories into rclone's `--file-perms` and
    /// `--dir-perms` (write bits dropped: nothing here is writable). Read bits are one mask for
    /// both, so the two must agree on them; execute bits are the directories' own.
    static func umask(filePerms: mode_t?, dirPerms: mode_t?) throws -> mode_t {
        let fromFiles = filePerms.map { 0o444 & ~$0 }
        let fromDirs = dirPerms.map { 0o555 & ~$0 }
        if let f = fromFiles, let d = fromDirs, f != d & 0o444 {
            throw UsageError("--file-perms \(String(filePerms!, radix: 8)) and --dir-perms \(String(dirPerms!, radix: 8)) take different read bits, which one --umask cannot: give both the same read bits (e.g. 0440 and 0550)")
        }
        return (fromFiles ?? 0) | (fromDirs ?? fromFiles ?? 0)
    }

    private func pick<T: Equatable>(_ flag: String?, _ option: T?, _ key: String, _ file: ConfigFile?,
                                    parse: (String, String) throws -> T) throws -> T? {
        let fromFlag = try flag.map { try parse($0, "--\(key)") }
        if let fromFlag, let option, fromFlag != option {
            throw UsageError("--\(key) \(flag!) and -o \(key)=... disagree: give one of them")
        }
        if let value = fromFlag ?? option { return value }
        return try setting(nil, key, in: file).map { try parse($0.text, $0.option) }
    }
}

extension MountOwnership {
    /// Sets what was given on `options`; the rest keeps its defaults.
    func apply(to options: inout MountOptions) {
        if let uid { options.uid = uid }
        if let gid { options.gid = gid }
        if let umask { options.umask = umask }
    }
}
