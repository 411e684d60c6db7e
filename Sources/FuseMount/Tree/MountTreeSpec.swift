import Foundation

/// What the mount shows before anything is fetched: files (from arguments and the URL list),
/// directory indexes grafted at paths, and the by-URL directory.
///
/// Built once at start and again on every URL-list reload; `build` refuses anything ambiguous
/// (two entries at one path, a file used as a directory) with both culprits named.
///
/// Map of this folder (`Tree/`): what the mount shows and how it changes.
/// - `MountTreeSpec.swift` (this file): files, indexes and `.url/`, clash-checked.
/// - `EntrySpec.swift`: one `URL` or `NAME = URL` item. `EntryName.swift`: names as bytes.
/// - `FileSystemCore+Spec.swift`: the spec applied at start and on reload (SIGHUP).
/// - `FileSystemCore+Refresh.swift`: listings re-read on demand (`httpcachefs refresh`).
/// - `FileSystemCore+Changes.swift`: what a refresh changed, told to `--on-change`;
///   `ChangeCommand.swift` runs that command.
/// Neighbours: extends `Core/`'s `FileSystemCore`, and re-reads listings through `Listings/`;
/// the executable builds the spec (`MountCommand.buildTree`), `Listings/`' URL lists make entries.
public struct MountTreeSpec: Equatable, Sendable {
    /// Where an entry came from, for error messages.
    public enum Source: Equatable, Sendable, CustomStringConvertible {
        case argument(String)
        case urlList(path: String?, line: Int)
        case index(String)

        public var description: String {
            switch self {
            case let .argument(text): return "argument '\(text)'"
            case let .urlList(path, line): return "\(path ?? "URL list") line \(line)"
            case let .index(text): return "--index '\(text)'"
            }
        }

        public var isURLList: Bool { if case .urlList = self { return true } else { return false } }
    }

    public struct File: Equatable, Sendable {
        public var path: [String]
        public var url: String
        public var source: Source
        public init(path: [String], url: String, source: Source) {
            self.path = path
            self.url = url
            self.source = source
        }
    }

    /// A web server's directory listing shown as a directory (`path` empty: the mount root).
    public struct Index: Equatable, Sendable {
        public var path: [String]
        /// The listing URL, always ending in `/` so relative links resolve inside it.
        public var url: String
        public var source: Source
        public init(path: [String], url: String, source: Source) {
            self.path = path
            self.url = url
            self.source = source
        }
    }

    /// Name of the by-URL directory at the root.
    public static let byURLName = ".url"

    public var files: [File]
    public var indexes: [Index]
    public var byURL: Bool

    public init(files: [File] = [], indexes: [Index] = [], byURL: Bool = false) {
        self.files = files
        self.indexes = indexes
        self.byURL = byURL
    }

    /// Parses `--index URL` (grafted at the root) or `--index DIR=URL`.
    public static func parseIndex(_ text: String) throws -> Index {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var path: [String] = []
        var url = trimmed
        if let (name, u) = EntrySpec.splitNamed(trimmed) {
            path = try PathName.components(name)
            url = u
        }
        url = try EntrySpec.validateURL(url)
        if let q = url.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            // A query on a listing URL is kept, but the slash belongs to the path.
            let base = url[..<q]
            if !base.hasSuffix("/") { url = base + "/" + url[q...] }
        } else if !url.hasSuffix("/") {
            url += "/"
        }
        return Index(path: path, url: url, source: .index(text))
    }

    /// Combines every source and checks that the result is unambiguous.
    public static func build(arguments: [(text: String, spec: EntrySpec)] = [],
                             urlList: [URLListEntry] = [], urlListPath: String? = nil,
                             indexes: [Index] = [], byURL: Bool = false) throws -> MountTreeSpec {
        var spec = MountTreeSpec(byURL: byURL)
        spec.files = arguments.map { File(path: $0.spec.path, url: $0.spec.url, source: .argument($0.text)) }
            + urlList.map { File(path: $0.spec.path, url: $0.spec.url, source: .urlList(path: urlListPath, line: $0.line)) }
        spec.indexes = indexes
        try spec.validate()
        return spec
    }

    /// The same spec with the URL-list files replaced (for a reload).
    public func replacingURLList(_ entries: [URLListEntry], path: String?) throws -> MountTreeSpec {
        var spec = self
        spec.files = files.filter { !$0.source.isURLList }
            + entries.map { File(path: $0.spec.path, url: $0.spec.url, source: .urlList(path: path, line: $0.line)) }
        try spec.validate()
        return spec
    }

    /// Throws `MountTreeError` for the first ambiguity found.
    public func validate() throws {
        enum Slot { case file(Source), directory(Source), index(Source) }
        var slots: [[String]: Slot] = [:]
        func source(_ s: Slot) -> Source {
            switch s { case let .file(x), let .directory(x), let .index(x): return x }
        }
        func claimParents(_ path: [String], _ src: Source) throws {
            for n in stride(from: 1, to: path.count, by: 1) {
                let prefix = Array(path.prefix(n))
                switch slots[prefix] {
                case let .file(other)?:
                    throw MountTreeError.fileUsedAsDirectory(path: prefix.joined(separator: "/"), file: other, child: src)
                case nil: slots[prefix] = .directory(src)
                default: break
                }
            }
        }
        if byURL {
            slots[[Self.byURLName]] = .index(.argument("--by-url"))
        }
        for index in indexes {
            try claimParents(index.path, index.source)
            if let existing = slots[index.path] {
                switch existing {
                case .directory: break  // files below an index directory overlay its listing
                default: throw MountTreeError.clash(path: index.path.joined(separator: "/"), first: source(existing), second: index.source)
                }
            }
            slots[index.path] = .index(index.source)
        }
        for file in files {
            try claimParents(file.path, file.source)
            if let existing = slots[file.path] {
                if case .directory = existing {
                    throw MountTreeError.fileUsedAsDirectory(path: file.path.joined(separator: "/"), file: file.source, child: source(existing))
                }
                throw MountTreeError.clash(path: file.path.joined(separator: "/"), first: source(existing), second: file.source)
            }
            slots[file.path] = .file(file.source)
        }
    }
}

/// Why a tree spec is ambiguous.
public enum MountTreeError: Error, Equatable, CustomStringConvertible {
    case clash(path: String, first: MountTreeSpec.Source, second: MountTreeSpec.Source)
    case fileUsedAsDirectory(path: String, file: MountTreeSpec.Source, child: MountTreeSpec.Source)

    public var description: String {
        switch self {
        case let .clash(path, first, second):
            return "name clash: '\(path)' is given by \(first) and by \(second)"
        case let .fileUsedAsDirectory(path, file, child):
            return "name clash: '\(path)' is a file (\(file)) but \(child) needs it to be a directory"
        }
    }
}
