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

    init() {}

    /// The ownership in force and the `-o` options left for libfuse. `--uid` and `-o uid=` are
    /// one setting: both given with different values is an error; either wins over the config file.
    func resolve(fuseOptions: [String], configFile: String?) throws -> (ownership: MountOwnership, fuseOptions: [String]) {
        var rest = fuseOptions
        let fromO: MountOwnership
        do { fromO = try MountOwnership.extract(from: &rest) } catch { throw UsageError("\(error)") }
        let file = try ConfigFile.load(explicitPath: configFile)
        var result = MountOwnership()
        do {
            result.uid = try pick(uid, fromO.uid, "uid", file) { try MountOwnership.parseUser($0, option: $1) }
            result.gid = try pick(gid, fromO.gid, "gid", file) { try MountOwnership.parseGroup($0, option: $1) }
            result.umask = try pick(umask, fromO.umask, "umask", file) { try MountOwnership.parseUmask($0, option: $1) }
        } catch let error as OwnershipError {
            throw UsageError(error.description)
        }
        return (result, rest)
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
