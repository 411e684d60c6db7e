import ArgumentParser
import CacheCore
import Foundation

/// `httpcachefs cat URL [--range A-B]`: the bytes of a remote file on stdout, through the cache
/// (what is cached comes from disk, the rest is fetched and kept).
struct CatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cat",
        abstract: "Write a remote file (or a byte range of it) to stdout, through the cache.",
        discussion: """
            --range takes inclusive byte offsets as HTTP does: 0-1023 is the first KiB, 1000- is \
            everything from offset 1000, -500 is the last 500 bytes. A position may be a size: \
            10M-30M is the 20 MiB from 10 MiB to 30 MiB (a size ends the range before that offset), \
            -5M the last 5 MiB, 1G- everything from 1 GiB on.
            """
    )

    @Argument(help: "The http(s) URL to read.")
    var url: String

    /// `.unconditional`, so that a suffix range like `-500` is taken as the value, not a flag.
    @Option(parsing: .unconditional, help: ArgumentHelp("Byte range: A-B (inclusive), A- or -N; positions may be sizes (10M-30M, -5M).", valueName: "range"))
    var range: String?

    @OptionGroup var cache: CacheOptions

    func run() async throws {
        try await runReportingErrors {
            let range = try self.range.map(ByteRangeSpec.parse(option:))
            _ = try KeyRules.validate(url)
            let options = cache
            let url = url
            try await onDedicatedThread(name: "httpcachefs-cat") {
                try Self.cat(url: url, range: range, options: options)
            }
        }
    }

    static func cat(url: String, range: ByteRangeSpec?, options: CacheOptions) throws {
        FileDescriptorOutput.ignoreSIGPIPE()
        let engine: CacheEngine
        do {
            engine = try options.openEngine()
        } catch let CacheError.locked(path, holder) {
            guard let daemon = try DaemonClient.find(cacheDirectory: path, options: options) else {
                throw CacheError.locked(path: path, holder: holder)
            }
            defer { daemon.shutdown() }
            return try cat(url: url, range: range, through: daemon)
        }
        defer { engine.shutdown() }
        let entry = try engine.openBlocking(url: url)
        let (start, end) = try (range ?? .from(0)).resolve(length: entry.length, url: url)
        let reader = engine.makeReader(for: entry)
        defer { reader.close() }
        var failure: Int32?
        try RangeStreamer.stream(reader: reader, start: start, end: end) { bytes in
            switch FileDescriptorOutput.writeAll(fd: 1, bytes[...]) {
            case .written: return true
            case .readerGone: return false
            case let .failed(code): failure = code; return false
            }
        }
        if let failure {
            throw CommandFailure("cannot write to stdout: \(String(cString: strerror(failure)))")
        }
    }

    /// The same, through the proxy of the daemon that holds the cache.
    static func cat(url: String, range: ByteRangeSpec?, through daemon: DaemonClient) throws {
        let (start, end) = try (range ?? .from(0)).resolve(length: try daemon.head(url: url).length, url: url)
        var failure: Int32?
        try daemon.stream(url: url, start: start, end: end) { bytes in
            switch FileDescriptorOutput.writeAll(fd: 1, bytes) {
            case .written: return true
            case .readerGone: return false
            case let .failed(code): failure = code; return false
            }
        }
        if let failure {
            throw CommandFailure("cannot write to stdout: \(String(cString: strerror(failure)))")
        }
    }
}
