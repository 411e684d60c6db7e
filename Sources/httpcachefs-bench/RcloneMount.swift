import ArgumentParser
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// rclone's `mount` of an HTTP directory, as the side-by-side figures run it: full VFS cache
/// mode, multi-stream reads on (`--vfs-read-chunk-streams 16 --vfs-read-chunk-size 4M`, what
/// rclone's documentation suggests), a cache directory of its own that starts empty.
///
/// One mount per figure: `stop()` unmounts and ends the process, so no download rclone still
/// has in flight runs into the next figure.
final class RcloneMount {
    /// The flags the figures' names cite.
    static let readFlags = ["--vfs-cache-mode", "full", "--vfs-read-chunk-streams", "16", "--vfs-read-chunk-size", "4M"]
    static let describedFlags = "full cache, 16 x 4M streams"

    let mountpoint: String
    private let process = Process()
    private let logFile: String

    /// Mounts the listing at `url` (a directory URL the origin answers with links) on
    /// `mountpoint` with `flags` (default `readFlags`); returns once `expectedFile` shows in it.
    init(binary: String, url: String, mountpoint: String, cacheDirectory: String, logFile: String, expectedFile: String,
         flags: [String] = RcloneMount.readFlags) throws {
        self.mountpoint = mountpoint
        self.logFile = logFile
        for dir in [mountpoint, cacheDirectory] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        }
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["mount", ":http:", mountpoint, "--http-url", url, "--read-only", "--cache-dir", cacheDirectory,
                             "--config", "/dev/null", "--log-file", logFile, "--log-level", "NOTICE"] + flags
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 {
            if FileManager.default.fileExists(atPath: mountpoint + "/" + expectedFile) { return }
            guard process.isRunning else {
                throw ValidationError("rclone mount exited with status \(process.terminationStatus):\n\(Self.tail(of: logFile))")
            }
            usleep(50_000)
        }
        stop()
        throw ValidationError("rclone mount did not show \(expectedFile) within 10 s:\n\(Self.tail(of: logFile))")
    }

    /// Unmounts and waits for the process, killing it if it lingers (its downloads in flight
    /// must not run into the next figure).
    func stop() {
        _ = try? Spawned.run("/bin/fusermount3", ["-u", "-z", mountpoint])
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<100 where process.isRunning { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// `rclone version`'s first line ("rclone v1.75.2"), or nil if `binary` is not rclone.
    static func version(binary: String) -> String? {
        let process = Process()
        let pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["version"]
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let first = String(decoding: output, as: UTF8.self).split(separator: "\n").first.map(String.init)
        return process.terminationStatus == 0 && first?.hasPrefix("rclone") == true ? first : nil
    }

    /// `rclone` on PATH, for the default of `--rclone`.
    static func onPath() -> String? {
        let dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
        return dirs.map { "\($0)/rclone" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// An HTML listing of `names` that rclone's http backend reads as a directory.
    static func listing(_ names: [String]) -> [UInt8] {
        Array(("<html><body><pre>\n" + names.map { "<a href=\"\($0)\">\($0)</a>\n" }.joined() + "</pre></body></html>\n").utf8)
    }

    private static func tail(of path: String) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no log at \(path))"
        return text.split(separator: "\n").suffix(10).joined(separator: "\n")
    }
}

/// The side-by-side figures: the same reads through rclone's mount of the same origin, in the
/// same run, each set beside httpcachefs's figure (measured: httpcachefs; reference: rclone).
struct SideBySide {
    /// rclone's binary; nil when none was given and none is on PATH (the figures then say so).
    let binary: String?
    /// The origin's directory listing of rclone's copies of the files.
    let origin: String
    let temp: TemporaryDirectory

    /// Reads `name` whole through a fresh rclone mount, beside httpcachefs's time for the same
    /// bytes (`ours`, nil when that figure failed).
    func sequential(_ name: String, expected: Int64, ours: Double?, _ what: String) throws -> Figure {
        let t = try withMount(expecting: name) { try MountBench.readWhole($0 + "/" + name, expected: expected) }
        guard let ours else { throw ValidationError("no httpcachefs figure to set beside rclone's") }
        return figure(what, measured: DataPathBench.seconds(ours), reference: DataPathBench.seconds(t), ratio: ours / t, unit: "x time")
    }

    /// One timed `pread` per offset through a fresh rclone mount.
    func randomReads(_ name: String, offsets: [Int64], length: Int) throws -> [Double] {
        try withMount(expecting: name) { try MountBench.randomReadLatencies($0 + "/" + name, offsets: offsets, length: length) }
    }

    func figure(_ what: String, measured: String, reference: String, ratio: Double, unit: String) -> Figure {
        let version = binary.flatMap(RcloneMount.version) ?? "rclone"
        return Figure(name: "mount against \(version) (\(RcloneMount.describedFlags)): \(what)", measured: measured,
                      reference: "rclone mount: " + reference, ratio: ratio, unit: unit, target: .atMost(1.0))
    }

    /// A mount with an empty cache for one figure, unmounted and its cache removed afterwards.
    private func withMount<T>(expecting name: String, _ body: (String) throws -> T) throws -> T {
        guard let binary else {
            throw ValidationError("skipped: no rclone on PATH (mount-helpers/setup-debian.sh --bench installs rclone 1.75; or pass --rclone)")
        }
        guard RcloneMount.version(binary: binary) != nil else { throw ValidationError("\(binary) is not rclone ('version' failed)") }
        let cache = temp.appending("rclone-cache")
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let mount = try RcloneMount(binary: binary, url: origin, mountpoint: temp.appending("rclone-mnt"), cacheDirectory: cache,
                                    logFile: temp.appending("rclone.log"), expectedFile: name)
        defer { mount.stop() }
        return try body(mount.mountpoint)
    }
}
