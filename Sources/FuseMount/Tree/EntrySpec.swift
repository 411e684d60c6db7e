import CacheCore
import Foundation

/// One `URL` or `NAME = URL` item, as given on the command line or on a URL-list line.
///
/// The name may contain `/` to place the file in a sub-directory (created as needed). Without a
/// name the file is named after the URL's last path segment, percent-decoded.
public struct EntrySpec: Equatable, Sendable {
    /// Path components below the mount root; never empty, never `.`/`..`, no `/` inside.
    public var path: [String]
    public var url: String

    public init(path: [String], url: String) {
        self.path = path
        self.url = url
    }

    /// Parses `URL` or `NAME=URL` (spaces around `=` allowed).
    ///
    /// The separator is the first `=` whose left side is not itself part of a URL (has no `://`)
    /// and whose right side starts with a scheme, so `=` inside a query string never splits.
    public static func parse(_ text: String) throws -> EntrySpec {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw EntrySpecError.empty }
        if let (name, url) = splitNamed(trimmed) {
            return EntrySpec(path: try PathName.components(name), url: try validateURL(url))
        }
        let url = try validateURL(trimmed)
        let name = try FileName.derive(fromURL: url)
        try PathName.validate(component: name, in: name)  // a long last segment is no file name
        return EntrySpec(path: [name], url: url)
    }

    static func splitNamed(_ s: String) -> (String, String)? {
        var searchStart = s.startIndex
        while let eq = s[searchStart...].firstIndex(of: "=") {
            let left = s[..<eq]
            if left.contains("://") { return nil }
            let right = s[s.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if hasScheme(right) {
                let name = left.trimmingCharacters(in: .whitespaces)
                return name.isEmpty ? nil : (name, right)
            }
            searchStart = s.index(after: eq)
        }
        return nil
    }

    /// `letters://` at the start: enough to tell a URL from a name.
    static func hasScheme(_ s: String) -> Bool {
        guard let r = s.range(of: "://") else { return false }
        let scheme = s[..<r.lowerBound]
        return !scheme.isEmpty && scheme.allSatisfy { $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }
    }

    /// The URL in its one spelling (`URLSpelling`: a raw space becomes %20), or why it cannot be.
    static func validateURL(_ url: String) throws -> String {
        do {
            _ = try KeyRules.validate(url)
            return try KeyRules.normalized(url)
        } catch let error as CacheError {
            throw EntrySpecError.invalidURL(url, reason: error.description)
        }
    }
}

public enum EntrySpecError: Error, Equatable, CustomStringConvertible {
    case empty
    case invalidURL(String, reason: String)
    case badName(String, reason: String)
    case noName(url: String)

    public var description: String {
        switch self {
        case .empty: return "empty entry"
        case let .invalidURL(_, reason): return reason
        case let .badName(name, reason): return "bad file name '\(name)': \(reason)"
        case let .noName(url) where (URLComponents(string: url)?.path ?? "").hasSuffix("/"):
            return "'\(url)' ends with '/', so it names a directory: mount its listing with --index \(url) (or name a single file: NAME=\(url))"
        case let .noName(url):
            return "cannot name a file after '\(url)' (no last path segment); give a name: NAME=\(url)"
        }
    }
}

/// File names derived from URLs.
public enum FileName {
    /// The URL's last path segment, percent-decoded (query and fragment ignored).
    ///
    /// A segment whose decoded form would contain `/` or NUL stays encoded, so one URL is always
    /// one file name.
    public static func derive(fromURL url: String) throws -> String {
        guard let c = URLComponents(string: url) else { throw EntrySpecError.invalidURL(url, reason: "not a URL") }
        let path = c.percentEncodedPath
        guard !path.hasSuffix("/"), let raw = path.split(separator: "/").last.map(String.init), !raw.isEmpty else {
            throw EntrySpecError.noName(url: url)
        }
        let decoded = raw.removingPercentEncoding ?? raw
        let name = (decoded.contains("/") || decoded.contains("\0") || decoded.isEmpty) ? raw : decoded
        if name == "." || name == ".." { throw EntrySpecError.noName(url: url) }
        return name
    }
}

/// Relative paths inside the mount.
public enum PathName {
    /// Longest name Linux accepts in one component (bytes).
    public static let maxComponentBytes = 255

    /// Splits `a/b/c.mp4` into components, ignoring leading, trailing and doubled slashes.
    public static func components(_ path: String) throws -> [String] {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !parts.isEmpty else { throw EntrySpecError.badName(path, reason: "empty") }
        for p in parts { try validate(component: p, in: path) }
        return parts
    }

    static func validate(component p: String, in path: String) throws {
        if p == "." || p == ".." { throw EntrySpecError.badName(path, reason: "'.' and '..' are not allowed") }
        if p.contains("\0") { throw EntrySpecError.badName(path, reason: "contains NUL") }
        if p.utf8.count > maxComponentBytes {
            throw EntrySpecError.badName(path, reason: "a component is longer than \(maxComponentBytes) bytes")
        }
    }
}
