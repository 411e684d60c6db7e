import ArgumentParser
import Fetcher
import Foundation
import Settings

/// How requests present themselves to origins and whom they trust: `--user-agent`,
/// `--ca-certificate`, `--netrc-file`, `--user`, `--password-file` and `--credential-host`. Part
/// of `CacheOptions` (every subcommand), each also a config-file key of the same name.
///
/// Credentials (`--user`, every `--header`) go only to credential origins: those of the URLs the
/// command was given, and the hosts `--credential-host` names (`CredentialScope`).
///
/// No password is ever taken on the command line, where `ps` shows it: it comes from a file
/// (`--password-file`, a netrc file) that the background daemon reads again itself, so its
/// arguments hold only the file's path.
struct OriginOptions: ParsableArguments {
    @Option(name: .customLong("user-agent"), parsing: .unconditional,
            help: ArgumentHelp("User-Agent sent to origins (default: \(Version.userAgent)).", valueName: "string"))
    var userAgent: String?

    @Option(name: .customLong("ca-certificate"), parsing: .unconditional,
            help: ArgumentHelp("PEM file of the CA certificate(s) that verify origins' TLS certificates, e.g. a private CA (in place of libcurl's CA bundle file; on Debian the CAs in /etc/ssl/certs stay trusted).", valueName: "file"))
    var caCertificate: String?

    @Option(name: .customLong("netrc-file"), parsing: .unconditional,
            help: ArgumentHelp("netrc file with per-host credentials for URLs that carry none (default: $NETRC, else ~/.netrc if it exists).", valueName: "file"))
    var netrcFile: String?

    @Option(name: .customLong("user"), parsing: .unconditional,
            help: ArgumentHelp("Basic-auth user for URLs that carry no credentials, sent only to the origins of the URLs given (and --credential-host), never after a redirect to another origin; the password comes from --password-file.", valueName: "name"))
    var user: String?

    @Option(name: .customLong("password-file"), parsing: .unconditional,
            help: ArgumentHelp("File whose first line is the password for --user (never give a password on the command line).", valueName: "file"))
    var passwordFile: String?

    @Option(name: .customLong("credential-host"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Also send --user and --header credentials to this host (a glob like --allow-host: media.example.com, *.example.com, host:8443); repeatable. By default they go only to the origins (scheme, host, port) of the URLs given: mounted URLs, --index, --url-list entries, cat/preload URLs, --tier origins.", valueName: "host[:port]"))
    var credentialHosts: [String] = []

    init() {}

    /// Merges flags over `file` into `r`: the User-Agent and `access`.
    func resolve(into r: inout ResolvedCacheOptions, file: ConfigFile?) throws {
        if let v = setting(userAgent, "user-agent", in: file) { r.userAgent = try Self.checkUserAgent(v.text, option: v.option) }
        if let v = setting(caCertificate, "ca-certificate", in: file) { r.access.caCertificate = try Self.checkCertificate(v.text, option: v.option) }
        if let v = setting(netrcFile, "netrc-file", in: file) {
            r.access.netrcFile = try Self.readablePath(v.text, option: v.option, what: "netrc file")
        } else if let env = ProcessInfo.processInfo.environment["NETRC"], !env.isEmpty {
            r.access.netrcFile = try Self.readablePath(env, option: "$NETRC", what: "netrc file")
        } else {
            let home = expandingTilde("~/.netrc")
            r.access.netrcFile = FileManager.default.fileExists(atPath: home) ? home : nil
        }
        let user = setting(self.user, "user", in: file)
        let password = setting(passwordFile, "password-file", in: file)
        if let user {
            guard !user.text.isEmpty, !user.text.contains(":"), !hasControlCharacter(user.text) else {
                throw UsageError("invalid user '\(user.text)' for \(user.option): it must be non-empty, without ':' or control characters")
            }
            r.access.user = user.text
        }
        if let password {
            guard user != nil else {
                throw UsageError("\(password.option) needs a user: give --user NAME (or 'user' in the config file)")
            }
            r.access.password = Secret(try Self.readPassword(password.text, option: password.option))
        }
        if !credentialHosts.isEmpty {
            r.credentialHosts = try credentialHosts.map { try Self.checkCredentialHost($0, option: "--credential-host") }
        } else if let file {
            r.credentialHosts = try file.list("credential-host").enumerated().map {
                try Self.checkCredentialHost($1, option: file.describe("credential-host", item: $0))
            }
        }
    }

    /// A host name, address or glob, with an optional port: no scheme, path or spaces.
    static func checkCredentialHost(_ text: String, option: String) throws -> String {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard !t.isEmpty, !t.contains("/"), !t.contains("@"), !t.contains(where: \.isWhitespace), !hasControlCharacter(t) else {
            throw UsageError("invalid host '\(text)' for \(option): expected a host name, address or glob with an optional port, like media.example.com, *.example.com or 10.0.0.5:8443")
        }
        return t
    }

    static func checkUserAgent(_ text: String, option: String) throws -> String {
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty, !hasControlCharacter(text) else {
            throw UsageError("invalid user agent '\(text)' for \(option): it must be non-empty, on one line")
        }
        return text
    }

    /// An absolute path to a readable file holding at least one PEM certificate.
    static func checkCertificate(_ text: String, option: String) throws -> String {
        let path = try readablePath(text, option: option, what: "CA certificate")
        guard let data = FileManager.default.contents(atPath: path),
              String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            throw UsageError("CA certificate \(path) for \(option) holds no PEM certificate ('-----BEGIN CERTIFICATE-----')")
        }
        return path
    }

    /// The first line of a regular file: the daemon reads it again at its start, so a pipe
    /// (`<(...)`, read once) would leave it nothing.
    static func readPassword(_ text: String, option: String) throws -> String {
        let path = try readablePath(text, option: option, what: "password file")
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            throw UsageError("password file \(path) for \(option) must be a regular file (the mount daemon reads it again)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("cannot read password file \(path) for \(option)")
        }
        let first = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
        let password = first.hasSuffix("\r") ? String(first.dropLast()) : String(first)
        guard !password.isEmpty else { throw UsageError("password file \(path) for \(option) is empty: its first line is the password") }
        return password
    }

    /// `text` with `~` expanded, made absolute (the daemon may run elsewhere), and readable.
    static func readablePath(_ text: String, option: String, what: String) throws -> String {
        guard !text.isEmpty else { throw UsageError("empty path for \(option)") }
        var path = expandingTilde(text)
        if !path.hasPrefix("/") { path = FileManager.default.currentDirectoryPath + "/" + path }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw UsageError("\(what) \(path) for \(option) does not exist")
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw UsageError("\(what) \(path) for \(option) is not readable")
        }
        return path
    }
}

/// The flag's value, else the config file's under `key`, with how to name it in a message
/// (`--key`, or `'key' at FILE:LINE`).
func setting(_ flag: String?, _ key: String, in file: ConfigFile?) -> (text: String, option: String)? {
    if let flag { return (flag, "--\(key)") }
    if let file, let value = file[key] { return (value, file.describe(key)) }
    return nil
}

private func hasControlCharacter(_ text: String) -> Bool {
    text.unicodeScalars.contains { CharacterSet.controlCharacters.contains($0) }
}
