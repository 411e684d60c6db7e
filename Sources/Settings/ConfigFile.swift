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
/// in fstab options, is `cache-size`). Every long option is a key (`SettingsTable`, with the few
/// that are not and why); `header`, `ignore-query`, `index`, `allow-host` and `proxy-name` may repeat,
/// and a flag is `name = yes`.
/// Command-line flags win over the file (see `CacheOptions.resolve()`).
public struct ConfigFile: Equatable, Sendable {
    /// The keys the file may set (`SettingsTable`); anything else is a typo worth reporting.
    static let knownKeys: Set<String> = Set((SettingsTable.all + SettingsTable.otherCommands).filter(\.inConfig).map(\.name))
    /// Keys that accumulate instead of replacing.
    static let repeatableKeys: Set<String> = Set(SettingsTable.all.filter { $0.kind == .list }.map(\.name))

    /// Where the file came from, for messages.
    public var path: String
    /// Single-valued keys: the last line wins.
    public var values: [String: String] = [:]
    /// Repeatable keys, in file order.
    public var lists: [String: [String]] = [:]
    /// The line each value came from, for messages (`describe`).
    var valueLines: [String: Int] = [:]
    var listLines: [String: [Int]] = [:]

    /// How to name `key` in a message: `'cache-size' at FILE:3` (the `item`th value of a
    /// repeatable key: its own line).
    public func describe(_ key: String, item: Int? = nil) -> String {
        let lines = listLines[key] ?? []
        let line = item.flatMap { $0 < lines.count ? lines[$0] : nil } ?? valueLines[key] ?? lines.first
        return "'\(key)' at \(path)" + (line.map { ":\($0)" } ?? "")
    }

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
                throw UsageError("expected 'key = value' at \(at), got '\(line)'")
            }
            let written = line[..<eq].trimmingCharacters(in: .whitespaces)
            let key = SettingsTable.named(written)?.name ?? SettingsTable.normalized(written)
            var value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let q = value.first, q == "\"" || q == "'", value.last == q {
                value = String(value.dropFirst().dropLast())
            }
            guard knownKeys.contains(key) else {
                let hint = SettingsTable.suggestion(for: written, among: knownKeys.sorted())
                    .map { "; did you mean '\(SettingsTable.spelled($0, like: written))'?" }
                    ?? " (known: \(knownKeys.sorted().joined(separator: ", ")))"
                throw UsageError("unknown setting '\(written)' at \(at)\(hint)")
            }
            if repeatableKeys.contains(key) {
                file.lists[key, default: []].append(value)
                file.listLines[key, default: []].append(index + 1)
            } else {
                file.values[key] = value
                file.valueLines[key] = index + 1
            }
        }
        return file
    }
}
