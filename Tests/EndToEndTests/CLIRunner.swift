import Foundation
import TestSupport
import XCTest

/// Runs the `httpcachefs` binary as a subprocess for one test, in that test's temporary
/// directory: its cache (`cache`), an empty config home (never the developer's own config), the
/// captured output. A value holding nothing but the directory, so the readers of a test that
/// runs several commands at once (the fleet's hosts) each call it from their own thread.
struct CLIRunner: Sendable {
    let temp: TemporaryDirectory
    var cacheDir: String { temp.appending("cache") }

    struct Result: Sendable {
        var status: Int32
        var stdout: [UInt8]
        var stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// The binary under test: `$HTTPCACHEFS_BINARY` (CI sets it to the release build), else the
    /// `httpcachefs` built next to this test bundle (`swift test` builds every product).
    static func binary() throws -> URL { URL(fileURLWithPath: try BinaryUnderTest.locate()) }

    /// Runs `httpcachefs args... --cache-dir <this test's cache>` (or, with `raw`, `args` as a
    /// whole command line) with stdin closed, and waits at most a minute.
    func run(_ args: [String], cacheDirectory: String?? = .some(nil), environment: [String: String] = [:],
             raw: Bool = false) throws -> Result {
        let process = try makeProcess(args, cacheDirectory: cacheDirectory, environment: environment, raw: raw)
        let out = temp.appending("stdout-\(UUID().uuidString)")
        let err = temp.appending("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: err) }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        // Foundation says when the child ended (it reaps it); the minute only bounds a hang.
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        try process.run()
        if ended.wait(timeout: .now() + 60) == .timedOut {
            process.terminate()
            process.waitUntilExit()
            XCTFail("httpcachefs \(args.joined(separator: " ")) did not finish within a minute")
        }
        process.waitUntilExit()
        return Result(status: process.terminationStatus,
                      stdout: Array(try Data(contentsOf: URL(fileURLWithPath: out))),
                      stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// Starts `httpcachefs args...` in the background (output discarded).
    func start(_ args: [String]) throws -> Process {
        let process = try makeProcess(args, cacheDirectory: .some(nil), environment: [:], raw: false)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// `cacheDirectory`: `.some(nil)` = this test's cache dir, `nil` = no `--cache-dir` flag.
    private func makeProcess(_ args: [String], cacheDirectory: String??, environment: [String: String],
                             raw: Bool) throws -> Process {
        let binary = try Self.binary()
        let process = Process()
        var env = ProcessInfo.processInfo.environment
        env["XDG_CONFIG_HOME"] = temp.appending("no-config")   // never the developer's own config
        env["XDG_CACHE_HOME"] = temp.appending("xdg-cache")
        env.merge(environment) { _, new in new }
        process.environment = env
        process.standardInput = FileHandle.nullDevice
        if raw {
            process.executableURL = URL(fileURLWithPath: args[0])
            process.arguments = Array(args.dropFirst())
        } else {
            process.executableURL = binary
            var full = args
            if case let .some(dir) = cacheDirectory { full += ["--cache-dir", dir ?? cacheDir] }
            process.arguments = full
        }
        return process
    }

}
