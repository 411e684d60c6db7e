import ArgumentParser
import CacheCore
import Foundation

extension CacheCommand {
    /// `cache export URL FILE [--fetch]`: a cached file as a plain local file.
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Write a cached file to a local file; fails unless it is fully cached, or with --fetch downloads the missing parts.",
            discussion: """
                The file is written under a temporary name and renamed when complete, so an \
                interrupted export never leaves a truncated FILE behind.
                """
        )

        @Argument(help: "The cached URL.")
        var url: String

        @Argument(help: "Where to write the file.")
        var file: String

        @Flag(help: "Fetch the parts that are not cached yet (through the cache, so they stay cached).")
        var fetch = false

        @OptionGroup var cache: CacheOptions

        mutating func validate() throws { try cache.useTheRunningDaemonsCache(command: "cache export") }

        func run() async throws {
            let (url, file, fetch) = (url, file, fetch)
            try await CacheCommand.withEngine(cache, name: "export") { engine in
                let entry: EntryInfo
                if fetch {
                    _ = try engine.key(for: url)
                    entry = try waitFor { engine.open(url: url, completion: $0) }
                } else {
                    let status = try CacheCommand.status(of: url, in: engine)
                    guard let length = status.info.length else {
                        throw CommandFailure("not fully cached: the length of \(url) is not known yet (use --fetch to download it)")
                    }
                    let have = Self.coveredBytes(status.cachedRanges, within: 0 ..< length)
                    guard have == length else {
                        throw CommandFailure("not fully cached: \(Format.bytes(have)) of \(Format.bytes(length)) (\(Format.percent(have, of: length))) of \(url) is cached; use --fetch to download the rest")
                    }
                    entry = status.info
                }
                let reader = engine.makeReader(for: entry)
                defer { reader.close() }
                let out = try AtomicFileWriter(path: file)
                do {
                    let result = try ChunkedRead.runWaiting(reader, to: entry.length) { bytes in
                        try out.write(bytes)
                        return true
                    }
                    try out.commit()
                    CacheCommand.printLine("exported \(url) to \(file): \(result.bytes) bytes (\(Format.bytes(result.bytes)))")
                } catch {
                    out.abandon()
                    throw error
                }
            }
        }

        /// Bytes of `range` covered by `ranges` (which may overlap or be unsorted).
        static func coveredBytes(_ ranges: [Range<Int64>], within range: Range<Int64>) -> Int64 {
            var total: Int64 = 0
            var reached = range.lowerBound
            for r in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
                let lo = max(r.lowerBound, reached), hi = min(r.upperBound, range.upperBound)
                if hi > lo { total += hi - lo; reached = hi }
            }
            return total
        }
    }
}
