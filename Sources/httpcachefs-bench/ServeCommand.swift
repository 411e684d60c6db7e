import ArgumentParser
import Foundation
import TestSupport

/// `httpcachefs-bench serve DIR`: the benchmarks' loopback origin, serving a directory tree with
/// full Range support and nginx-style directory listings, for trying httpcachefs without a web
/// server of one's own (`try-it.sh` uses it).
///
/// Every regular file below DIR is served at its path (`/sub dir/My Movie.mp4`, percent-encoded
/// in requests as clients do), every directory at `DIR/` as a listing that `mount --index` reads,
/// and a directory asked for without its slash is redirected to it, as web servers do. Files are
/// opened at start and read as responses stream (nothing is held in memory); no path is looked up
/// on disk per request: what was found at start is all there is, so no request path
/// (`..`, `%2e%2e`) can reach a file that was not listed.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a directory tree on loopback (Range, ETag, Last-Modified, listings), until killed.",
        discussion: "Files are opened at start and read as requests stream; files added later are not served.")

    @Argument(help: "Directory whose files and subdirectories are served.")
    var directory: String

    @Option(help: "Port on 127.0.0.1 (0 picks a free one).")
    var port: Int = 8719

    @Option(help: "Behind an emulated link: its round trip in milliseconds (0: none).")
    var linkRttMs: Double = 0

    @Option(help: "Behind an emulated link: its rate in Mbit/s, shared by all connections (0: no cap).")
    var linkMbit: Double = 0

    func run() throws {
        let tree = try ServedTree.scan(directory)
        let origin = try OriginServer(port: port)
        if linkRttMs > 0 || linkMbit > 0 {
            origin.emulateLink(.milliseconds(linkRttMs / 2, perConnectionMbit: 0, sharedMbit: linkMbit))
        }
        for file in tree.files {
            try origin.setDiskFile(file.path, file: file.disk, lastModified: file.modified)
            print(origin.url(ServedTree.encode(file.path)))
        }
        for dir in tree.directories {
            origin.setResponse(dir.path, status: 200, headers: [("Content-Type", "text/html; charset=utf-8")],
                               body: Array(ServedTree.listing(dir).utf8))
            if dir.path != "/" {
                origin.setResponse(String(dir.path.dropLast()), status: 301,
                                   headers: [("Location", ServedTree.encode(dir.path))], body: [])
            }
        }
        print("listing: \(origin.url("/"))")
        fflush(nil)  // every stream: the URLs are the readiness signal for scripts reading a redirected stdout
        while true { sleep(3600) }
    }
}

/// The files and directories below a root, as the origin serves them.
struct ServedTree {
    struct File {
        var path: String  // decoded, from "/"
        var disk: String  // where it is on disk
        var size: Int64
        var modified: Date?
    }

    struct Directory {
        var path: String  // decoded, from "/", ending in "/"
        var files: [File] = []
        var subdirectories: [(name: String, modified: Date?)] = []
    }

    var files: [File] = []
    var directories: [Directory] = []

    /// Walks `root` (symbolic links to directories are not followed; hidden names are skipped).
    static func scan(_ root: String) throws -> ServedTree {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        guard fm.fileExists(atPath: root, isDirectory: &isDir), isDir.boolValue else {
            throw ValidationError("\(root) is not a directory")
        }
        var tree = ServedTree()
        func walk(_ disk: String, _ path: String) throws {
            var dir = Directory(path: path)
            for name in try fm.contentsOfDirectory(atPath: disk).sorted() where !name.hasPrefix(".") {
                let full = disk + "/" + name
                let attributes = try? fm.attributesOfItem(atPath: full)
                let modified = attributes?[.modificationDate] as? Date
                switch attributes?[.type] as? FileAttributeType {
                case .typeDirectory?:
                    dir.subdirectories.append((name, modified))
                    try walk(full, path + name + "/")
                case .typeRegular?, .typeSymbolicLink?:
                    guard fm.fileExists(atPath: full, isDirectory: &isDir), !isDir.boolValue,
                          fm.isReadableFile(atPath: full) else { continue }
                    var st = stat()   // follows a symbolic link, as serving it does
                    guard stat(full, &st) == 0 else { continue }
                    let file = File(path: path + name, disk: full, size: Int64(st.st_size), modified: modified)
                    dir.files.append(file)
                    tree.files.append(file)
                default:
                    continue
                }
            }
            tree.directories.append(dir)
        }
        try walk(root, "/")
        return tree
    }

    /// A path as it goes into a URL: each segment percent-encoded.
    static func encode(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false)
            .map { $0.addingPercentEncoding(withAllowedCharacters: segmentAllowed) ?? String($0) }
            .joined(separator: "/")
    }

    private static let segmentAllowed: CharacterSet = {
        var s = CharacterSet.urlPathAllowed
        s.remove(charactersIn: "/;?#")
        return s
    }()

    /// An nginx autoindex page: what `mount --index` parses and a browser shows.
    static func listing(_ dir: Directory) -> String {
        let title = "Index of " + escape(dir.path)
        var html = "<html>\n<head><title>\(title)</title></head>\n<body>\n<h1>\(title)</h1><hr><pre>"
        if dir.path != "/" { html += "<a href=\"../\">../</a>\n" }
        func row(_ name: String, _ modified: Date?, _ size: String) {
            let date = modified.map(dateFormatter.string(from:)) ?? "-"
            html += "<a href=\"\(escape(encode(name)))\">\(escape(name))</a> \(date) \(size)\n"
        }
        for sub in dir.subdirectories { row(sub.name + "/", sub.modified, "-") }
        for file in dir.files { row(String(file.path.split(separator: "/").last ?? ""), file.modified, String(file.size)) }
        return html + "</pre><hr></body>\n</html>\n"
    }

    private static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    private static let dateFormatter: DateFormatter = {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "dd-MMM-yyyy HH:mm"
        return f
    }()
}
