import Foundation

/// One file from a URL list, with the line it came from (for error messages).
public struct URLListEntry: Equatable, Sendable {
    public var spec: EntrySpec
    public var line: Int

    public init(spec: EntrySpec, line: Int) {
        self.spec = spec
        self.line = line
    }
}

/// Parses a URL-list file: one entry per line, `URL` or `dir/name.ext = URL`.
///
/// Blank lines and lines whose first non-blank character is `#` are skipped. A `#` after a blank
/// that follows the URL starts a trailing comment (`http://h/a.mp4   # the pilot`): a URL never
/// holds a raw blank, so that `#` cannot be part of it. A `#` with no blank before it is part of
/// the URL (a fragment, `movie.mp4#t=10`), and so is one in a name before the URL
/// (`Episode #1.mkv = URL`). Any bad line fails the whole file, so a typo never silently drops
/// files from a mount (on SIGHUP the previous tree stays in place).
public enum URLListParser {
    /// `mapURL`: each entry's text (`URL` or `NAME = URL`) before it is parsed; the mount makes
    /// s3:// URLs HTTP URLs with it. What it throws fails the file at that line.
    public static func parse(_ text: String, mapURL: (String) throws -> String = { $0 }) throws -> [URLListEntry] {
        var entries: [URLListEntry] = []
        var lineNumber = 0
        let text = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text  // byte-order mark
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            var line = Substring(raw)
            if line.hasSuffix("\r") { line = line.dropLast() }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let entry = withoutTrailingComment(trimmed)
            let mapped: String
            do { mapped = try mapURL(entry) } catch {
                throw URLListError(path: nil, line: lineNumber, message: "\(error)")
            }
            entries.append(URLListEntry(spec: try spec(mapped, line: lineNumber), line: lineNumber))
        }
        return entries
    }

    /// `line` up to its trailing comment: the first blank-then-`#` after the URL's `://`, with the
    /// blanks before it.
    static func withoutTrailingComment(_ line: String) -> String {
        guard let scheme = line.range(of: "://") else { return line }
        var previousIsBlank = false
        for i in line[scheme.upperBound...].indices {
            let c = line[i]
            if c == "#", previousIsBlank {
                return line[..<i].trimmingCharacters(in: .whitespaces)
            }
            previousIsBlank = c == " " || c == "\t"
        }
        return line
    }

    /// Reads and parses `path`.
    public static func load(path: String, mapURL: (String) throws -> String = { $0 }) throws -> [URLListEntry] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw URLListError(path: path, line: nil, message: "cannot read: \(error.localizedDescription)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw URLListError(path: path, line: nil, message: "not UTF-8 text")
        }
        do { return try parse(text, mapURL: mapURL) } catch var error as URLListError {
            error.path = path
            throw error
        }
    }

    private static func spec(_ text: String, line: Int) throws -> EntrySpec {
        let spec: EntrySpec
        do { spec = try EntrySpec.parse(text) } catch let error as EntrySpecError {
            throw URLListError(path: nil, line: line, message: error.description)
        }
        // A control character (a stray tab or escape from an editor or a copy) would make a file
        // that always fails, or a name that breaks every listing of the mount.
        if (spec.path + [spec.url]).contains(where: { $0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }) {
            throw URLListError(path: nil, line: line, message: "a control character in '\(text.debugDescription.dropFirst().dropLast())'")
        }
        return spec
    }
}

/// A bad URL list, with the file and line at fault.
public struct URLListError: Error, Equatable, CustomStringConvertible {
    public var path: String?
    public var line: Int?
    public var message: String

    public var description: String {
        var where_ = path ?? "URL list"
        if let line { where_ += ":\(line)" }
        return "\(where_): \(message)"
    }
}
