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
/// Two in-process engines (default read-ahead, 1 MiB slices) over libcurl, each over its own
/// loopback origin (one with the fault), read the same N random 64 KiB stretches (seeded
/// offsets, a fresh reader each) of a generated file, interleaved read by read so both see the
/// same machine load. Two counts of each origin's bytes:
/// - wire: what the clients' TCP acknowledged (Linux `tcpi_bytes_acked`, heads included), what
///   crossed as an origin's bill counts it. The target (≤ 1.5) is judged on this ratio.
/// - handed: body bytes the origin handed to its sockets. An answer the client cut counts all the
///   origin had queued: 2 to 5 MiB on loopback (its channel's 1 MiB watermark and the kernel's
///   send buffer), most of which never left the machine.
/// Then, per cut 200, what crossed on its connection after the answers before it: the fault's own
/// cost, without the noise of read-ahead that a closing reader cancels at a varying point.
///
/// Over plain loopback and behind an emulated link (by default 10 ms one way, 200 Mbit/s per
/// connection). The emulation delays heads and paces bodies in the origin, but a client's reset
/// still crosses loopback at once: it understates what a cut costs on a real link (what the
/// origin sends in the round trip before the reset arrives).
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

    @Option(help: "Only this network: loopback or link (default both).")
    var only: Network?

    @OptionGroup var link: LinkOptions

    enum Network: String, ExpressibleByArgument, CaseIterable { case loopback, link }

    static let readLength = 64 << 10
    static let target = 1.5

    mutating func run() async throws {
        let length = try CoreBench.parseSize(size)
        guard (1...100_000).contains(reads), every >= 2 else { throw ValidationError("--reads must be 1...100000 and --every at least 2") }
        var rng = SplitMix64(state: 0xF1A7)
        let offsets = (0..<reads).map { _ in Int64.random(in: 0...(length - Int64(Self.readLength)), using: &rng) }
        print("flaky benchmark: \(reads) random 64 KiB reads of a \(CoreBench.human(length)) file, one range request in \(every) answered 200")
        print("wire: bytes the client's TCP acknowledged (heads included; what an origin is billed for); handed: body bytes the origin gave its sockets")
        let asked = Int64(reads * Self.readLength)
        var networks: [(String, LinkEmulation?)] = []
        if only != .link { networks.append(("loopback", nil)) }
        if only != .loopback, let e = link.emulation { networks.append((LinkOptions.describe(e), e)) }
        var costs: [String] = []
        var rows = [["", "wire", "x asked", "wire ratio", "handed", "handed ratio", "requests", "200s"]]
        for (name, emulation) in networks {
            let (clean, flaky) = try await Self.measure(length: length, offsets: offsets, faults: Faults(ignoreRangeEvery: every), link: emulation)
            func row(_ label: String, _ m: Measured) -> [String] {
                let wire = Double(m.wire) / Double(max(1, clean.wire)), handed = Double(m.handed) / Double(max(1, clean.handed))
                return [label, CoreBench.human(m.wire), String(format: "%.2f", Double(m.wire) / Double(asked)),
                        m.faults == nil ? "1.00 (reference)" : String(format: "%.2f x (target <= %.1f)", wire, Self.target),
                        CoreBench.human(m.handed), String(format: "%.2f x", handed), "\(m.requests)", "\(m.wholeAnswers)"]
            }
            rows.append(row("\(name), without the fault", clean))
            rows.append(row("\(name), 1 in \(every) answered 200", flaky))
            let cutWire = flaky.cuts.reduce(Int64(0)) { $0 + $1.wire }
            costs.append("\(name): \(flaky.cutSummary); all cuts \(CoreBench.human(cutWire)) on the wire, "
                         + String(format: "%.2f x the reads without the fault", Double(clean.wire + cutWire) / Double(max(1, clean.wire))))
        }
        print(CoreBench.table(rows))
        print("what one cut 200 cost (its connection's bytes past the answers before it):")
        for line in costs { print("  " + line) }
    }

    struct Measured {
        var faults: Faults?
        /// Bytes the clients' TCP acknowledged, heads included.
        var wire: Int64
        /// Body bytes handed to the origin's sockets.
        var handed: Int64
        var requests: Int
        /// Range requests answered 200.
        var wholeAnswers: Int
        /// Each 200 the client cut (the last answer on its connection): bytes acknowledged on its
        /// connection past the answers before it, and body bytes handed to the socket.
        var cuts: [(wire: Int64, handed: Int64, reused: Bool)]

        var cutSummary: String {
            guard !cuts.isEmpty else { return "no cut 200s" }
            func kib(_ v: [Int64]) -> String {
                String(format: "mean %.0f KiB (%.0f to %.0f)", Double(v.reduce(0, +)) / Double(v.count) / 1024,
                       Double(v.min()!) / 1024, Double(v.max()!) / 1024)
            }
            let reused = cuts.filter(\.reused).map(\.wire), fresh = cuts.filter { !$0.reused }.map(\.wire)
            return "\(cuts.count) cut; wire \(kib(cuts.map(\.wire))), handed \(kib(cuts.map(\.handed)))"
                + "; wire on a fresh connection \(fresh.isEmpty ? "-" : kib(fresh)), on a reused one \(reused.isEmpty ? "-" : kib(reused))"
        }
    }

    /// Reads `offsets` through two engines, each over its own origin (one with `faults`),
    /// interleaved read by read (which goes first alternates), so both see the same machine load;
    /// what each origin sent, counted once every connection has closed.
    static func measure(length: Int64, offsets: [Int64], faults: Faults, link: LinkEmulation?) async throws -> (clean: Measured, flaky: Measured) {
        let clean = try Side(length: length, faults: nil, link: link)
        defer { clean.stop() }
        let flaky = try Side(length: length, faults: faults, link: link)
        defer { flaky.stop() }
        let infos = (try await clean.engine.open(url: clean.url), try await flaky.engine.open(url: flaky.url))
        for (i, offset) in offsets.enumerated() {
            for side in i % 2 == 0 ? [clean, flaky] : [flaky, clean] {
                try await side.read(offset, info: side === clean ? infos.0 : infos.1)
            }
        }
        return (try clean.count(), try flaky.count())
    }

    /// One engine over one origin.
    final class Side {
        let origin: OriginServer
        let faults: Faults?
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-flaky")
        let source: CurlRangeSource
        let engine: CacheEngine
        var url: String { origin.url("/flaky.bin") }
        private var stopped = false

        init(length: Int64, faults: Faults?, link: LinkEmulation?) throws {
            origin = try OriginServer()
            origin.emulateLink(link)
            origin.setGeneratedFile("/flaky.bin", length: length, seed: 0xF1A7)
            if let faults { origin.setFaults("/flaky.bin", faults) }
            self.faults = faults
            source = CurlRangeSource(configuration: FetcherConfiguration(clock: .system, userAgent: "httpcachefs-bench", maxRetries: 5, retryBaseDelay: 0.01),
                                     logger: Logger(label: "bench"))
            do {
                engine = try CacheEngine(configuration: CacheConfiguration(directory: temp.appending("cache"), capacity: length + (1 << 30),
                                                                           freeSpaceFloor: 0, engineClock: .system), source: source,
                                         layers: FetchLayers.standard())   // as the daemon's: offline mode, transfers counted
            } catch {
                source.shutdown()
                origin.stop()
                temp.remove()
                throw error
            }
        }

        /// One read with a fresh reader, checked byte for byte.
        func read(_ offset: Int64, info: EntryInfo) async throws {
            let reader = engine.makeReader(for: info)
            let got = try await reader.read(offset: offset, length: readLength)
            reader.close()
            guard got == OriginServer.generatedBytes(seed: 0xF1A7, offset: offset, count: got.count), got.count == readLength else {
                throw ValidationError("wrong bytes at \(offset)")
            }
        }

        /// Stops the engine, then the origin (so every connection has closed). Idempotent.
        func stop() {
            guard !stopped else { return }
            stopped = true
            engine.shutdown()
            source.shutdown()
            origin.stop()
            temp.remove()
        }

        /// What the origin sent, once stopped.
        func count() throws -> Measured {
            stop()
            guard let wire = origin.bytesAcked else { throw ValidationError("the kernel does not count acknowledged bytes (Linux 4.19 or later)") }
            let requests = origin.requests.filter { $0.pathWithoutQuery == "/flaky.bin" }
            var cuts: [(wire: Int64, handed: Int64, reused: Bool)] = []
            for (i, r) in requests.enumerated() where r.range != nil && r.status == 200 {
                // A cut answer is the last on its connection; what crossed past the answers before it is its cost.
                guard requests.lastIndex(where: { $0.connection == r.connection }) == i,
                      let acked = origin.wireBytes(connection: r.connection) else { continue }
                let before = requests[..<i].filter { $0.connection == r.connection }.reduce(Int64(0)) { $0 + $1.bodyBytes }
                cuts.append((acked - before, r.bodyBytes, requests.firstIndex(where: { $0.connection == r.connection }) != i))
            }
            return Measured(faults: faults, wire: wire, handed: origin.bytesServed(path: "/flaky.bin"), requests: requests.count,
                            wholeAnswers: requests.filter { $0.range != nil && $0.status == 200 }.count, cuts: cuts)
        }
    }
}
