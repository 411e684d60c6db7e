import ArgumentParser
import Foundation
import Glibc
import Settings

/// The `httpcachefs` command: remote media as local files and proxy URLs, from one cache.
@main
struct HTTPCacheFS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "httpcachefs",
        abstract: "Mount HTTP(S) URLs as read-only files and serve them through a local proxy, from one persistent cache.",
        version: Version.string,
        subcommands: [
            CatCommand.self, PreloadCommand.self, CacheCommand.self,
            MountCommand.self, UnmountCommand.self, ProxyCommand.self, URLCommand.self, StatusCommand.self, RefreshCommand.self,
        ]
    )

    /// `mount -o` words that are settings (`cache_size=20G`, the fstab spelling) become their
    /// options before ArgumentParser sees them (`FstabWords`); a typo there is one error line.
    /// A command line ArgumentParser cannot parse is one `httpcachefs: error:` line too (with
    /// its "did you mean"), not a usage dump; help and `--version` are printed as usual.
    static func main() async {
        let arguments: [String]
        do {
            arguments = try FstabWords.expandingMountArguments(Array(CommandLine.arguments.dropFirst()))
        } catch {
            Glibc.exit(ErrorReporting.report(error).rawValue)
        }
        // `--help` prints the help and exits 0 whatever runs: what a `validate()` reports while
        // parsing is held back and dropped when the help is printed.
        if asksForHelp(arguments) { ErrorReporting.holdLines() }
        let command: ParsableCommand
        do {
            command = try parseAsRoot(arguments)
            // A help request comes back as ArgumentParser's own help command, ready to print.
            ErrorReporting.releaseLines(discarding: String(reflecting: type(of: command)).hasPrefix("ArgumentParser."))
        } catch {
            let code = exitCode(for: error)
            ErrorReporting.releaseLines(discarding: code == .success)
            if code == .success || error is ExitCode { exit(withError: error) }
            let message = message(for: error).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }.joined(separator: " ")
            // A `validate()` that printed its own line throws a bare exit code: nothing to add.
            if message.isEmpty { Glibc.exit(code.rawValue) }
            let help = arguments.first.map { ["mount", "unmount", "cat", "preload", "cache", "proxy", "url", "status", "refresh"].contains($0) ? "httpcachefs \($0) --help" : "httpcachefs --help" } ?? "httpcachefs --help"
            ErrorReporting.printError("\(message) (see '\(help)')")
            Glibc.exit(code.rawValue)
        }
        do {
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var plain = command
                try plain.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    /// ArgumentParser's help words (`-h`, `--help`, `-help`) before a `--`.
    static func asksForHelp(_ arguments: [String]) -> Bool {
        arguments.prefix { $0 != "--" }.contains { ["-h", "--help", "-help"].contains($0) }
    }
}

enum Version {
    static let string = "0.1.0"
    static let userAgent = "httpcachefs/\(string)"
}
