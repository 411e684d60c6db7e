import CacheCore
import Foundation
import Glibc
import Settings

/// A profile's `credential_process` (`~/.aws/config`): a command the AWS tools run for temporary
/// keys, printing them as JSON (`AWSSharedFiles.processCredentials`). Run through `/bin/sh -c`
/// as the AWS CLI's own docs write such lines, with the process's environment, its output read
/// up to 64 KiB, given 60 s. Its keys then sign the buckets it was run for; the background
/// renewal (`S3Buckets.Renewal`) runs it again before they expire, in the process that ran it
/// first (a mount joining a daemon hands over keys, not the command: they last their time).
///
/// Threads: `run` blocks (a command): the caller's option parsing, or the renewal's own thread.
enum S3CredentialProcess {
    /// Each command's last keys' expiration in this process (nil: none given), so that the
    /// buckets mapped with its keys are renewed on time.
    private static let expirations = LockedValue([String: Date?]())

    static func run(_ command: String) throws -> (credentials: SigV4.Credentials, expiration: Date?) {
        let out = try ExternalOutput.capture("/bin/sh", ["-c", command], limit: 64 << 10, timeout: 60)
        guard out.status == 0 else {
            throw UsageError("the AWS profile's credential_process failed (exit status \(out.status))\(out.stderr.isEmpty ? "" : ": " + out.stderr)")
        }
        switch AWSSharedFiles.processCredentials(out.stdout) {
        case let .success(result):
            expirations.withLock { $0[command] = result.expiration }
            return result
        case let .failure(why):
            throw UsageError("the AWS profile's credential_process cannot be used: \(why)")
        }
    }

    /// The renewal of the keys `command` gave this process, if it ran it.
    static func renewal(command: String) -> S3Buckets.Renewal? {
        guard let known = expirations.withLock({ $0[command] }) else { return nil }
        return S3Buckets.Renewal(expiration: known ?? .distantFuture, renew: { try run(command) },
                                 report: { LogSink.standardError.write(line: "httpcachefs: " + $0) })
    }
}

/// A command's standard output (bounded) and the last line of its standard error, without a
/// shell of ours in between and without any pipe that could fill and block it: both go to files.
enum ExternalOutput {
    struct Output {
        var status: Int32
        var stdout: [UInt8]
        var stderr: String
    }

    static func capture(_ executable: String, _ arguments: [String], limit: Int, timeout: TimeInterval) throws -> Output {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpcachefs-cp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: dir) }
        let outPath = dir.appendingPathComponent("out"), errPath = dir.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outPath.path, contents: nil, attributes: [.posixPermissions: 0o600])
        _ = FileManager.default.createFile(atPath: errPath.path, contents: nil, attributes: [.posixPermissions: 0o600])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: outPath)
        process.standardError = try FileHandle(forWritingTo: errPath)
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        try process.run()
        if done.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            _ = done.wait(timeout: .now() + 5)
            throw UsageError("\(URL(fileURLWithPath: executable).lastPathComponent) \(arguments.last ?? "") did not end within \(Int(timeout)) s")
        }
        let out = (try? FileHandle(forReadingFrom: outPath).readData(ofLength: limit)).map { [UInt8]($0) } ?? []
        let err = (try? String(contentsOf: errPath, encoding: .utf8)) ?? ""
        let last = err.split(separator: "\n").last.map { String($0.prefix(300)) } ?? ""
        return Output(status: process.terminationStatus, stdout: out, stderr: last)
    }
}
