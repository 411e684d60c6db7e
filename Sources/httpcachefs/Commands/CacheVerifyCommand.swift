import ArgumentParser
import CacheCore
import Foundation
import Logging
import Settings

extension CacheCommand {
    /// `cache verify [--remote]`: local checksums, and optionally a spot check against origins.
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check cached bytes against their checksums (bad ones are dropped); --remote also compares samples with the origin.",
            discussion: """
                With --remote, a few cached ranges of every file are fetched again straight from the \
                origin (not through the cache) and compared byte for byte. A file whose ETag, \
                Last-Modified or length changed on the origin is reported as stale, not as a mismatch: \
                the cache notices that by itself on next use. Exits non-zero if any problem was found.
                """
        )

        @Flag(help: "Also compare samples of every cached file with the origin.")
        var remote = false

        @Option(help: ArgumentHelp("Bytes per sample for --remote.", valueName: "size"))
        var sampleSize: String = "64K"

        @OptionGroup var cache: CacheOptions

        mutating func validate() throws { try cache.useTheRunningDaemonsCache(command: "cache verify") }

        func run() async throws {
            let remote = remote
            let options = cache
            let sampleText = sampleSize
            try await CacheCommand.withEngine(cache, name: "verify") { engine in
                let sampleBytes = try ByteSize.parse(sampleText, option: "--sample-size")
                guard sampleBytes > 0 && sampleBytes <= 16 << 20 else {
                    throw UsageError("--sample-size must be between 1 byte and 16M")
                }
                let report = engine.verify()
                for p in report.problems { CacheCommand.printLine("problem: \(p)") }
                CacheCommand.printLine("checked \(report.extentsChecked) extent\(report.extentsChecked == 1 ? "" : "s") (\(Format.bytes(report.bytesChecked))) against their checksums: \(report.problems.isEmpty ? "all good" : "\(report.problems.count) bad, dropped")")
                var problems = report.problems.count
                if remote {
                    let source = try options.makeSource(logger: options.makeLogger(label: "httpcachefs.fetch", defaultLevel: .error))
                    let checker = RemoteCheck(engine: engine, source: source, sampleSize: Int(sampleBytes),
                                              timeout: engine.configuration.readTimeout)
                    problems += checker.run()
                }
                if problems > 0 {
                    throw CommandFailure("verify found \(problems) problem\(problems == 1 ? "" : "s")")
                }
            }
        }
    }
}

/// Compares samples of cached bytes with a fresh direct fetch from the origin.
struct RemoteCheck {
    let engine: CacheEngine
    let source: RangeSource
    let sampleSize: Int
    let timeout: TimeInterval

    /// Checks every entry; prints one line per entry; returns the number of problems.
    func run() -> Int {
        var problems = 0
        for status in engine.list().sorted(by: { $0.info.url < $1.info.url }) {
            let url = status.info.url
            do {
                let outcome = try check(status)
                CacheCommand.printLine("\(outcome.isProblem ? "problem" : "ok"): \(url): \(outcome.message)")
                if outcome.isProblem { problems += 1 }
            } catch {
                CacheCommand.printLine("problem: \(url): could not compare: \(ErrorReporting.message(for: error))")
                problems += 1
            }
        }
        return problems
    }

    struct Outcome {
        var isProblem: Bool
        var message: String
    }

    func check(_ status: EntryStatus) throws -> Outcome {
        let samples = Self.samples(of: status.cachedRanges, size: Int64(sampleSize))
        if samples.isEmpty { return Outcome(isProblem: false, message: "nothing cached to compare") }
        let reader = engine.makeReader(for: status.info)
        defer { reader.close() }
        var compared: Int64 = 0
        for sample in samples {
            let count = Int(sample.count)
            let remote = try DirectFetch.fetch(url: status.info.url, start: sample.lowerBound, count: count,
                                               source: source, timeout: timeout)
            if let stale = Self.staleness(cached: status.info, origin: remote.head) {
                return Outcome(isProblem: false, message: "stale: \(stale); it will be fetched again on next use")
            }
            let local = try ChunkedRead.readWaiting(reader, offset: sample.lowerBound, count: count)
            if local != remote.bytes {
                let at = zip(local, remote.bytes).enumerated().first { $0.element.0 != $0.element.1 }.map { sample.lowerBound + Int64($0.offset) }
                let detail = at.map { "first difference at offset \($0)" }
                    ?? "the cache has \(local.count) bytes there, the origin sent \(remote.bytes.count)"
                return Outcome(isProblem: true, message: "MISMATCH in bytes \(sample.lowerBound)-\(sample.upperBound - 1): \(detail) (run 'httpcachefs cache rm \(status.info.url)')")
            }
            compared += Int64(count)
        }
        return Outcome(isProblem: false, message: "\(samples.count) sample\(samples.count == 1 ? " matches" : "s match") the origin (\(Format.bytes(compared)))")
    }

    /// Up to three samples: the start of the first cached range, the middle of the largest one,
    /// and the end of the last one, so both ends of the file and its bulk are covered.
    static func samples(of ranges: [Range<Int64>], size: Int64) -> [Range<Int64>] {
        guard let first = ranges.first, let last = ranges.last,
              let largest = ranges.max(by: { $0.count < $1.count }) else { return [] }
        func clipped(_ start: Int64, in r: Range<Int64>) -> Range<Int64> {
            let s = max(r.lowerBound, min(start, r.upperBound - size))
            return s ..< min(r.upperBound, s + size)
        }
        let candidates = [
            clipped(first.lowerBound, in: first),
            clipped(largest.lowerBound + Int64(largest.count) / 2 - size / 2, in: largest),
            clipped(last.upperBound - size, in: last),
        ]
        var result: [Range<Int64>] = []
        for c in candidates where !result.contains(where: { $0.overlaps(c) }) { result.append(c) }
        return result.sorted { $0.lowerBound < $1.lowerBound }
    }

    /// Why the origin's file is not the cached one any more, or nil if the validators agree.
    static func staleness(cached: EntryInfo, origin: ResponseHead) -> String? {
        RemoteVersion.changeReason(etag: cached.etag, lastModified: cached.lastModified, length: cached.length,
                                   to: origin.etag, origin.lastModified, origin.totalLength)
            .map { "changed on the origin: \($0)" }
    }
}
