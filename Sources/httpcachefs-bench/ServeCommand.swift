import ArgumentParser
import Foundation
import TestSupport

/// `httpcachefs-bench serve DIR`: the benchmarks' loopback origin, serving the files of a
/// directory with full Range support, for trying httpcachefs without a web server of one's own.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the files of a directory on loopback (Range, ETag, Last-Modified), until killed.",
        discussion: "Files are read into memory at start; meant for small samples, not for large trees.")

    @Argument(help: "Directory whose regular files are served at /NAME.")
    var directory: String

    @Option(help: "Port on 127.0.0.1 (0 picks a free one).")
    var port: Int = 8719

    func run() throws {
        let origin = try OriginServer(port: port)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        for name in names {
            let path = directory + "/" + name
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue,
                  let data = FileManager.default.contents(atPath: path) else { continue }
            let attributes = try? FileManager.default.attributesOfItem(atPath: path)
            origin.setFile("/" + name, data: Array(data), lastModified: attributes?[.modificationDate] as? Date)
            print(origin.url("/" + (name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? name)))
        }
        FileHandle.standardOutput.synchronizeFile()
        while true { sleep(3600) }
    }
}
