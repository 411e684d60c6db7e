import ArgumentParser
import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport

/// `httpcachefs-bench flaky`: what an origin that answers one range request in ten with 200 (the
/// whole file: a flaky CDN node) costs in origin bytes, against the same reads of an origin
/// without the fault, measured in the same run.
///
/// An in-process engine (default read-ahead, 1 MiB slices) over libcurl reads N random 64 KiB
/// stretches (the same seeded offsets in both runs, each with a fresh reader, one after the
/// other) of a generated file on a loopback origin. The figure is the ratio of the bytes the
/// origin sent (counted by the origin as it hands them to its sockets); the target is ≤ 1.5.
///
/// Twice: over plain loopback, and behind an emulated link (10 ms one way, 200 Mbit/s per
/// connection). They differ in what cutting a 200 costs. On loopback the origin's kernel takes
/// about 2 MiB of the body into its send buffer before the client has read the head (Linux sizes
/// it for ten 64 KiB segments), and all of it counts as sent; behind the link, what the origin
/// paces out in the round trip before the client's reset arrives.
struct FlakyBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flaky",
        abstract: "Origin bytes of random reads when one range request in ten is answered 200, against the same reads without the fault."
    )

    @Option(help: "Size of the generated file, e.g. 256M, 1G.")
    var size: String = "1G"

    @Option(help: "Number of random 64 KiB reads.")
    var reads: Int = 300

    @Option(help: "One range request in this many is answered 200 with the whole file.")
    var every: Int = 10

    static let readLength = 64 << 10
    static let target = 1.5

    mutating func run() async throws {
        let length = try CoreBench.parseSize(size)
        guard (1...100_000).contains(reads), every >= 2 else { throw ValidationError("--reads must be 1...100000 and --every at least 2") }
        var rng = SplitMix64(state: 0xF1A7)
        let offsets = (0..<reads).map { _ in Int64.random(in: 0...(length - Int64(Self.readLength)), using: &rng) }
        print("flaky benchmark: \(reads) random 64 KiB reads of a \(CoreBench.human(length)) file, one range request in \(every) answered 200")
        let asked = Int64(reads * Self.readLength)
        var rows = [["", "origin bytes", "requests", "x asked", "ratio"]]
        for (name, link) in [("loopback", nil), ("10 ms, 200 Mbit/s link", LinkEmulation.milliseconds(10, perConnectionMbit: 200, sharedMbit: 0))] as [(String, LinkEmulation?)] {
            let clean = try await Self.originBytes(length: length, offsets: offsets, faults: nil, link: link)
            let flaky = try await Self.originBytes(length: length, offsets: offsets, faults: Faults(ignoreRangeEvery: every), link: link)
            let ratio = Double(flaky.bytes) / Double(max(1, clean.bytes))
            rows.append(["\(name), without the fault", CoreBench.human(clean.bytes), "\(clean.requests)",
                         String(format: "%.2f", Double(clean.bytes) / Double(asked)), "1.00 (reference)"])
            rows.append(["\(name), 1 in \(every) answered 200", CoreBench.human(flaky.bytes), "\(flaky.requests)",
                         String(format: "%.2f", Double(flaky.bytes) / Double(asked)), String(format: "%.2f x (target <= %.1f)", ratio, Self.target)])
        }
        print(CoreBench.table(rows))
    }

    /// Reads `offsets` through a fresh engine over a fresh origin; returns what the origin sent.
    static func originBytes(length: Int64, offsets: [Int64], faults: Faults?, link: LinkEmulation?) async throws -> (bytes: Int64, requests: Int) {
        let origin = try OriginServer()
        defer { origin.stop() }
        origin.emulateLink(link)
        origin.setGeneratedFile("/flaky.bin", length: length, seed: 0xF1A7)
        if let faults { origin.setFaults("/flaky.bin", faults) }
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-flaky")
        defer { temp.remove() }
        let source = CurlRangeSource(configuration: FetcherConfiguration(userAgent: "httpcachefs-bench", maxRetries: 5, retryBaseDelay: 0.01),
                                     logger: Logger(label: "bench"))
        defer { source.shutdown() }
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: temp.appending("cache"), capacity: length + (1 << 30),
                                                                       freeSpaceFloor: 0), source: source)
        defer { engine.shutdown() }
        let info = try await engine.open(url: origin.url("/flaky.bin"))
        for offset in offsets {
            let reader = engine.makeReader(for: info)
            let got = try await reader.read(offset: offset, length: readLength)
            reader.close()
            guard got == OriginServer.generatedBytes(seed: 0xF1A7, offset: offset, count: got.count), got.count == readLength else {
                throw ValidationError("wrong bytes at \(offset)")
            }
        }
        return (origin.bytesServed(path: "/flaky.bin"), origin.requestCount(path: "/flaky.bin"))
    }
}
