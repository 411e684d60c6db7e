import ArgumentParser
import CacheCore
import Foundation
import FuseMount
import Settings

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
            -5M the last 5 MiB, 1G- everything from 1 GiB on. Only the bytes of the range are \
            fetched.
            """
    )

    @Argument(help: "The http(s) URL to read, or s3://BUCKET/KEY (see the --s3-* options).")
    var url: String

    /// `.unconditional`, so that a suffix range like `-500` is taken as the value, not a flag.
    @Option(parsing: .unconditional, help: ArgumentHelp("Byte range: A-B (inclusive), A- or -N; positions may be sizes (10M-30M, -5M).", valueName: "range"))
    var range: String?

    @OptionGroup var cache: CacheOptions

    mutating func validate() throws {
        if S3Options.mentionsS3([url]) {
            do {
                url = try S3Options.map(url, endpoint: try cache.resolve().s3Endpoint())
            } catch { throw ErrorReporting.report(error) }
        }
        url = try URLArgument.normalize(url)
        try cache.useTheRunningDaemonsCache(command: "cat")
    }

    func run() async throws {
        try await runReportingErrors {
            let range = try self.range.map(ByteRangeSpec.parse(option:))
            _ = try KeyRules.validate(url)
            FileDescriptorOutput.ignoreSIGPIPE()
            let options = cache
            let url = url
            let engine: CacheEngine
            switch try await CacheAccess.open(options, credentialURLs: [url]) {
            case let .engine(opened):
                engine = opened
            case let .daemon(held):
                // A bucket's object goes through only with the keys of the mount that named it.
                try await onBlockingPool { try DaemonBucketCheck.check([url], held: held, command: "cat") }
                let daemon = try held.client()
                defer { daemon.shutdown() }
                try await onBlockingPool { try Self.cat(url: url, range: range, through: daemon) }
                return
            }
            var failure: Error?
            do { try await Self.cat(url: url, range: range, engine: engine) } catch { failure = error }
            try await onBlockingPool { engine.shutdown() }
            if let failure { throw failure }
        }
    }

    /// Writes the range through this process's cache. A range is fetched exactly: the open asks
    /// one byte (not the usual first 256 KiB) and the reader's read-ahead stops at its end.
    static func cat(url: String, range: ByteRangeSpec?, engine: CacheEngine) async throws {
        let entry = try await engine.open(url: url, takeFirstBytes: range == nil)
        let (start, end) = try (range ?? .from(0)).resolve(length: entry.length, url: url)
        let reader = engine.makeReader(for: entry, end: end)
        defer { reader.close() }
        let failure = LockedValue<Int32?>(nil)   // set by the consumer, on the chunked read's queue
        try await ChunkedRead.run(reader, from: start, to: end) { bytes in
            switch FileDescriptorOutput.writeAll(fd: 1, bytes[...]) {
            case .written: return true
            case .readerGone: return false
            case let .failed(code): failure.withLock { $0 = code }; return false
            }
        }
        if let code = failure.withLock({ $0 }) {
            throw CommandFailure("cannot write to stdout: \(String(cString: strerror(code)))")
        }
    }

    /// The same, through the proxy of the daemon that holds the cache.
    static func cat(url: String, range: ByteRangeSpec?, through daemon: DaemonClient) throws {
        let (start, end) = try (range ?? .from(0)).resolve(length: try daemon.head(url: url).length, url: url)
        let failed = LockedValue<Int32?>(nil)   // set on the fetch thread, read after the stream
        try daemon.stream(url: url, start: start, end: end) { bytes in
            switch FileDescriptorOutput.writeAll(fd: 1, bytes) {
            case .written: return true
            case .readerGone: return false
            case let .failed(code): failed.withLock { $0 = code }; return false
            }
        }
        if let failure = failed.withLock({ $0 }) {
            throw CommandFailure("cannot write to stdout: \(String(cString: strerror(failure)))")
        }
    }
}
