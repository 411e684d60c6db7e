import Foundation

/// Programs from the system that some tests drive (headless Chromium, promtool): found on the
/// usual paths, run with their output captured in files (no pipe can fill up and block them).
public enum ExternalTool {
    /// The first executable `name` among `$PATH` and the system directories, or nil.
    public static func find(_ names: String...) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").map(String.init) ?? []
        for name in names {
            for dir in path + ["/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin"]
            where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
                return "\(dir)/\(name)"
            }
        }
        return nil
    }

    public struct Output {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// Runs `executable` to its end (killed after `timeout` seconds, then status -1), with `input`
    /// on its standard input.
    public static func run(_ executable: String, _ arguments: [String], input: String = "",
                           timeout: TimeInterval = 120) throws -> Output {
        let dir = TemporaryDirectory(prefix: "httpcachefs-tool")
        defer { dir.remove() }
        let files = ["in", "out", "err"].map(dir.appending)
        for (path, contents) in zip(files, [Data(input.utf8), nil, nil]) {
            guard FileManager.default.createFile(atPath: path, contents: contents) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
            }
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: files[0]))
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: files[1]))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: files[2]))
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        try process.run()
        var status: Int32 = -1
        if done.wait(timeout: .now() + timeout) == .timedOut {
            // Foundation reports the end only once every holder of the child's watch descriptor
            // is gone: a grandchild that inherited it (a daemon the tool started) would keep a
            // plain wait here forever. Ask, then insist, then give up on hearing about it.
            process.terminate()
            if done.wait(timeout: .now() + 5) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                _ = done.wait(timeout: .now() + 5)
            }
        } else {
            status = process.terminationStatus
        }
        let read = { (p: String) in (try? String(contentsOfFile: p, encoding: .utf8)) ?? "" }
        return Output(status: status, stdout: read(files[1]), stderr: read(files[2]))
    }
}
