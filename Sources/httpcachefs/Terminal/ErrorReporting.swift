import ArgumentParser
import CacheCore
import Foundation
import Glibc
import Settings

/// A command that could not do its job for a reason that is not the cache's (a file that cannot
/// be written, an entry that is not cached, a verification that found problems).
struct CommandFailure: Error, CustomStringConvertible, Equatable {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The one place where the CLI turns errors into what the user sees: a single line
/// `httpcachefs: error: <what went wrong>` on stderr, no stack trace, and a non-zero exit.
///
/// Exit codes: 64 (EX_USAGE, as ArgumentParser uses) for values the user typed wrong,
/// 1 for everything else.
///
/// Map of this folder (`Terminal/`): what the user sees.
/// - `ErrorReporting.swift` (this file): errors as one line and an exit code; command bodies
///   run on `onBlockingPool`.
/// - `LineLogHandler.swift`: log lines to stderr or a file, one `write` each.
/// - `ProgressBar.swift`: `preload`'s one-line bar. `Format.swift`: sizes, rates, times, tables.
/// - `TerminalWidth.swift`: the width a table fits (`cache ls`), nil when not a terminal.
/// - `FileDescriptorOutput.swift`: complete writes, EPIPE as a normal stop, atomic files.
/// Neighbours: uses only `Daemon/`'s `BlockingPool`; `Commands/`, `Daemon/`, `Options/` and `Preload/` call it.
enum ErrorReporting {
    static func exitCode(for error: Error) -> ExitCode {
        if error is UsageError { return .validationFailure }
        if case CacheError.invalidURL = error { return .validationFailure }
        return .failure
    }

    static func message(for error: Error) -> String {
        switch error {
        case let error as CacheError:
            if case .locked = error {
                return "\(error.description) (stop it, or give this command its own --cache-dir)"
            }
            return error.description
        case let error as UsageError: return error.description
        case let error as CommandFailure: return error.description
        case let error as FetchError: return error.description
        case let error as CocoaError: return fileError(error)
        case let error as CustomStringConvertible: return error.description
        default: return String(describing: error)
        }
    }

    /// Foundation's file errors name a code ("NSCocoaErrorDomain error 512"), not the file or the
    /// reason: both are in the error's user info.
    static func fileError(_ error: CocoaError) -> String {
        let path = error.filePath ?? error.url?.path
        var reason = ""
        if let underlying = error.underlying as NSError?, underlying.domain == NSPOSIXErrorDomain {
            reason = String(cString: strerror(Int32(underlying.code)))
        }
        guard let path else { return reason.isEmpty ? "\(error.localizedDescription)" : reason }
        let verb = error.code == .fileWriteUnknown || error.code == .fileWriteNoPermission || error.code == .fileWriteOutOfSpace
            ? "cannot write" : "cannot use"
        return "\(verb) \(path): \(reason.isEmpty ? error.localizedDescription : reason)"
    }

    /// Prints the one-line message for `error` and returns the exit code to throw.
    static func report(_ error: Error) -> ExitCode {
        printError(message(for: error))
        return exitCode(for: error)
    }

    static func printError(_ message: String) {
        write("httpcachefs: error: " + oneLine(DisplayURL.redactingPasswords(in: message)))
    }

    static func printWarning(_ message: String) {
        write("httpcachefs: warning: " + oneLine(DisplayURL.redactingPasswords(in: message)))
    }

    /// Lines held back while a command line that asks for help is parsed: ArgumentParser runs a
    /// command's `validate()` (which reports its own errors, e.g. "2 httpcachefs daemons of yours
    /// are running") before it looks for `--help`. `HTTPCacheFS.main` drops them when the help is
    /// printed and prints them when it is not. Nil: lines go straight to stderr. Only the
    /// parse, on the main thread, holds lines; nothing else runs then.
    static let heldLines = LockedValue<[String]?>(nil)

    private static func write(_ line: String) {
        let held: Bool = heldLines.withLock { lines in
            guard lines != nil else { return false }
            lines!.append(line)
            return true
        }
        if !held { LogSink.standardError.write(line: line) }
    }

    /// Starts holding lines back (`heldLines`).
    static func holdLines() { heldLines.withLock { $0 = [] } }

    /// Stops holding lines back and prints the held ones (`discarding`: drops them).
    static func releaseLines(discarding: Bool) {
        let lines = heldLines.withLock { lines -> [String] in
            let held = lines ?? []
            lines = nil
            return held
        }
        if !discarding { for line in lines { LogSink.standardError.write(line: line) } }
    }

    /// An error is one line, whatever it quotes: a URL or name (an argument, a listing's link, a
    /// server's answer) holding a line break or a terminal escape is shown escaped (`\u{A}`,
    /// `\u{1B}`), so it neither splits the line nor acts on the terminal.
    static func oneLine(_ message: String) -> String {
        var text = Substring(message)
        while text.last?.isNewline == true { text = text.dropLast() }
        return Format.terminalSafe(String(text)).replacingOccurrences(of: "\n", with: "\\u{A}")
    }
}

/// Runs a command body, presenting any error as one line and exiting non-zero.
/// ArgumentParser's own exits (`ExitCode`, `CleanExit`) pass through untouched.
func runReportingErrors<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as ExitCode {
        throw error
    } catch let error as CleanExit {
        throw error
    } catch {
        throw ErrorReporting.report(error)
    }
}

/// Runs blocking work (file and pipe I/O, opening or waiting for the cache) on `BlockingPool`,
/// so Swift's cooperative pool is never blocked on I/O and no thread is made per call.
func onBlockingPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        BlockingPool.shared.submit { continuation.resume(with: Result { try body() }) }
    }
}
