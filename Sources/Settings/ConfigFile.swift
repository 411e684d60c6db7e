import Foundation

/// The optional config file: the same settings as the shared command-line options, one
/// `key = value` per line, `#` starting a comment line, e.g.
///
///     # ~/.config/httpcachefs/config
///     cache-size = 10G
///     revalidate-after = 1h
///     header = Authorization: Bearer abc
///     header = X-Client: tv
///
/// Keys are the long option names without `--`, with `_` or `-` between words (`cache_size`, as
/// in fstab options, is `cache-size`). `header` and `ignore-query` may repeat.
/// Command-line flags win over the file (see `CacheOptions.resolve()`).
public struct ConfigFile: Equatable, Sendable {
    /// The keys the file may set; anything else is a typo worth reporting.
    static let knownKeys: Set<String> = [
        "cache-dir", "cache-size", "slice-size", "revalidate-after", "read-timeout", "ignore-query",
        "header", "upstream-proxy", "insecure", "ignore-etag", "log-level", "log-file",
        "user-agent", "ca-certificate", "netrc-file", "user", "password-file", "cache-max-age", "read-ahead-max",
        "uid", "gid", "umask",
        "max-connections", "bwlimit", "tier",
    ]
    /// Keys that accumulate instead of replacing.
    static let repeatableKeys: Set<String> = ["header", "ignore-query", "tier"]

    /// Where the file came from, for messages.
    public var path: String
    /// Single-valued keys: the last line wins.
    public var values: [String: String] = [:]
    /// Repeatable keys, in file order.
    public var lists: [String: [String]] = [:]

    public subscript(key: String) -> String? { values[key] }
    public func list(_ key: String) -> [String] { lists[key] ?? [] }

    /// `$XDG_CONFIG_HOME/httpcachefs/config`, else `~/.config/httpcachefs/config`.
    public static var defaultPath: String {
        let env = ProcessInfo.processInfo.environment
        if let xdg = env["XDG_CONFIG_HOME"], !xdg.isEmpty { return xdg + "/httpcachefs/config" }
        let home = env["HOME"] ?? NSHomeDirectory()
        return home + "/.config/httpcachefs/config"
    }

    /// Loads `explicitPath` (which must exist), or the default path if it exists, or nothing.
    public static func load(explicitPath: String?) throws -> ConfigFile? {
        let path = explicitPath.map(expandingTilde) ?? defaultPath
        guard FileManager.default.fileExists(atPath: path) else {
            if explicitPath != nil { throw UsageError("config file \(path) does not exist") }
            return nil
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("cannot read config file \(path)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw UsageError("config file \(path) is not UTF-8 text")
        }
        return try parse(text, path: path)
    }

    public static func parse(_ text: String, path: String) throws -> ConfigFile {
        var file = ConfigFile(path: path)
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let at = "\(path):\(index + 1)"
            guard let eq = line.firstIndex(of: "=") else {
                throw UsageError("\(at): expected 'key = value', got '\(line)'")
            }
            let written = line[..<eq].trimmingCharacters(in: .whitespaces)
            var key = written.lowercased().replacingOccurrences(of: "_", with: "-")
            if key.hasPrefix("--") { key.removeFirst(2) }
            var value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let q = value.first, q == "\"" || q == "'", value.last == q {
                value = String(value.dropFirst().dropLast())
            }
            guard knownKeys.contains(key) else {
                throw UsageError("\(at): unknown setting '\(written)' (known: \(knownKeys.sorted().joined(separator: ", ")))")
            }
            if repeatableKeys.contains(key) {
                file.lists[key, default: []].append(value)
            } else {
                file.values[key] = value
            }
        }
        return file
    }
}
