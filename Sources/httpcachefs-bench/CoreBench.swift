import ArgumentParser
import Foundation
import TestSupport

/// `httpcachefs-bench core`: what the cache costs and what it saves, against references measured
/// in the same run on the same machine.
///
/// A loopback origin serves a generated file (1 GiB by default). We time:
/// - `curl -s -o /dev/null URL`: the network reference (best of two);
/// - `httpcachefs cat URL > /dev/null` on an empty cache (cold: fetch + write the data file + output);
/// - the same again (warm: everything from the data file, best of two);
/// - `cat` of the data file itself to /dev/null: the disk (page cache) reference.
/// Ratios are of elapsed times, so lower is better; cold/curl shows the price of caching while
/// downloading, warm/disk the price of the engine over raw file reads.
struct CoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "core",
        abstract: "Cold and warm 'httpcachefs cat' against curl and against reading the cached bytes from disk."
    )

    @Option(help: "Size of the generated file, e.g. 256M, 1G.")
    var size: String = "1G"

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark; build with 'swift build -c release').")
    var binary: String?

    @Option(help: "curl binary for the network reference.")
    var curl: String = "/usr/bin/curl"

    func run() throws {
        let length = try Self.parseSize(size)
        let binary = binary ?? Self.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no httpcachefs binary at \(binary); build it (swift build -c release) or pass --binary")
        }
        let origin = try OriginServer()
        defer { origin.stop() }
        origin.setGeneratedFile("/bench.bin", length: length, seed: 0xBE7C)
        let url = origin.url("/bench.bin")
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-core")
        defer { temp.remove() }
        let cacheDir = temp.appending("cache")
        let catArgs = ["cat", url, "--cache-dir", cacheDir, "--cache-size", "\(length + (1 << 30))"]

        print("core benchmark: \(Self.human(length)) generated file over loopback, binary \(binary)")
        let curlTime = try Self.best(of: 2) { try Spawned.time(self.curl, ["-s", "-f", "-o", "/dev/null", url]) }
        let cold = try Spawned.time(binary, catArgs)
        try Self.checkFullyCached(binary: binary, url: url, cacheDir: cacheDir, length: length)
        let warm = try Self.best(of: 2) { try Spawned.time(binary, catArgs) }
        let files = try Self.dataFiles(under: cacheDir + "/data")
        let disk = try Self.best(of: 2) { try Spawned.time("/bin/cat", files) }

        func row(_ name: String, _ seconds: Double, _ ratio: String) -> [String] {
            [name, String(format: "%.3f", seconds), String(format: "%.1f", Double(length) / seconds / 1e6), ratio]
        }
        let rows: [[String]] = [
            ["", "seconds", "MB/s", "time ratio (lower is better)"],
            row("curl -o /dev/null", curlTime, "1.00 (network reference)"),
            row("httpcachefs cat, cold", cold, String(format: "%.2f x curl", cold / curlTime)),
            row("httpcachefs cat, warm", warm, String(format: "%.2f x curl, %.2f x disk", warm / curlTime, warm / disk)),
            row("cat the data file (disk)", disk, "1.00 (disk reference)"),
        ]
        print(Self.table(rows))
    }

    // MARK: helpers

    /// The release `httpcachefs` next to this benchmark's own executable.
    static func siblingBinary() -> String {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("httpcachefs").path
    }

    /// A benchmark of a cat that silently stopped early would be meaningless: after the cold run,
    /// `cache info` must report every byte cached.
    static func checkFullyCached(binary: String, url: String, cacheDir: String, length: Int64) throws {
        let p = Process()
        let pipe = Pipe()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["cache", "info", url, "--cache-dir", cacheDir]
        p.standardOutput = pipe
        try p.run()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard text.contains("Cached:") && text.contains("\(length) bytes (") && text.contains("100%)") else {
            throw ValidationError("after the cold run the file is not fully cached:\n\(text)")
        }
    }

    static func best(of n: Int, _ body: () throws -> Double) throws -> Double {
        var best = Double.infinity
        for _ in 0 ..< n { best = min(best, try body()) }
        return best
    }

    /// Every data file of the cache, in name order.
    static func dataFiles(under dir: String) throws -> [String] {
        guard let e = FileManager.default.enumerator(atPath: dir) else {
            throw ValidationError("no cache data directory at \(dir)")
        }
        var files: [String] = []
        while let name = e.nextObject() as? String {
            if name.hasSuffix(".data") { files.append(dir + "/" + name) }
        }
        guard !files.isEmpty else { throw ValidationError("no data files under \(dir)") }
        return files.sorted()
    }

    static func parseSize(_ s: String) throws -> Int64 {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        let t = s.uppercased().replacingOccurrences(of: "IB", with: "").replacingOccurrences(of: "B", with: "")
        if let last = t.last, let unit = units[last], let n = Double(t.dropLast()), n > 0 { return Int64(n * Double(unit)) }
        if let n = Int64(t), n > 0 { return n }
        throw ValidationError("invalid --size '\(s)': expected e.g. 256M or 1G")
    }

    static func human(_ n: Int64) -> String {
        n >= 1 << 30 ? String(format: "%.2f GiB", Double(n) / Double(1 << 30))
            : n >= 1 << 20 ? String(format: "%.1f MiB", Double(n) / Double(1 << 20)) : String(format: "%.0f KiB", Double(n) / 1024)
    }

    static func table(_ rows: [[String]]) -> String {
        var widths = [Int](repeating: 0, count: rows[0].count)
        for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
        return rows.map { r in
            r.enumerated().map { i, c in
                let pad = String(repeating: " ", count: widths[i] - c.count)
                return i == 0 ? c + pad : (i == r.count - 1 ? c : pad + c)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
