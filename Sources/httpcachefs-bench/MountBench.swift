import ArgumentParser
import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport

/// `httpcachefs-bench mount`: reading through the FUSE mount, against references measured in the
/// same run on the same machine.
///
/// A loopback origin serves generated files (1 GiB by default) and, if ffmpeg is installed, an
/// MP4 with its moov atom at the end. The real `httpcachefs mount` daemon mounts them. We time:
/// - cold sequential read of the mounted file (1 MiB reads) against `curl -o /dev/null` of its URL;
/// - warm sequential read with the kernel's page cache dropped (`drop_caches`; without root,
///   a remount), against `cat` of the data file, also with the page cache dropped;
/// - 64 KiB reads at random offsets, cold (fetched on demand) and warm (from disk, page cache
///   dropped): p50 and p99, against direct 64 KiB range requests to the origin (libcurl);
/// - the time until `ffprobe` prints the duration of the cold MP4, against `ffprobe` on its URL.
struct MountBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Cold and warm reads through the FUSE mount against curl, the disk, direct range requests and ffprobe on the URL."
    )

    @Option(help: "Size of each generated file, e.g. 256M, 1G.")
    var size: String = "1G"

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark; build with 'swift build -c release').")
    var binary: String?

    @Option(help: "curl binary for the network reference.")
    var curl: String = "/usr/bin/curl"

    @Option(help: "Number of random 64 KiB reads per measurement.")
    var randomReads: Int = 300

    @Option(help: "Length of the ffprobe test video, in seconds (0: no ffprobe measurement).")
    var videoSeconds: Int = 120

    func run() throws {
        let length = try CoreBench.parseSize(size)
        let binary = binary ?? CoreBench.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no httpcachefs binary at \(binary); build it (swift build -c release) or pass --binary")
        }
        guard FileManager.default.fileExists(atPath: "/dev/fuse") else { throw ValidationError("no /dev/fuse: cannot mount") }
        let canDropCaches = Readers.canDropPageCache

        let origin = try OriginServer()
        defer { origin.stop() }
        origin.setGeneratedFile("/seq.bin", length: length, seed: 0x5E0)
        origin.setGeneratedFile("/rand.bin", length: length, seed: 0x4A4D)
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-mount")
        defer { temp.remove() }
        let video = videoSeconds > 0 ? Self.makeVideo(seconds: videoSeconds, in: temp) : nil
        if let video { origin.setFile("/video.mp4", data: video, contentType: "video/mp4") }

        let cacheDir = temp.appending("cache")
        var entries = ["seq.bin=\(origin.url("/seq.bin"))", "rand.bin=\(origin.url("/rand.bin"))"]
        if video != nil { entries.append("video.mp4=\(origin.url("/video.mp4"))") }

        print("mount benchmark: \(CoreBench.human(length)) generated files over loopback, binary \(binary)")
        if !canDropCaches { print("note: not root, so warm runs remount instead of dropping the page cache (data files may stay in memory)") }
        let curlTime = try CoreBench.best(of: 2) { try Spawned.time(self.curl, ["-s", "-f", "-o", "/dev/null", origin.url("/seq.bin")]) }

        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt"), cacheDirectory: cacheDir,
                                     cacheSize: 3 * length + (1 << 30), entries: entries, logFile: temp.appending("mount.log"),
                                     proxy: false)
        defer { daemon.unmount() }
        let mountpoint = daemon.mountpoint
        /// The kernel's page cache, so "warm" means the cache's data files on disk.
        func dropPageCache() throws {
            if canDropCaches {
                try Readers.dropPageCache()
            } else {
                daemon.unmount()
                try daemon.mount()
            }
        }
        let seq = mountpoint + "/seq.bin"
        let cold = try Self.readWhole(seq, expected: length)
        let files = try CoreBench.dataFiles(under: cacheDir + "/data")  // only seq.bin is cached so far
        try dropPageCache()
        let disk = try Spawned.time("/bin/cat", files)
        try dropPageCache()
        let warm = try Self.readWhole(seq, expected: length)

        var rng = SplitMix64(state: 0xC0FFEE)
        let chunk = 64 << 10
        let offsets = (0 ..< randomReads).map { _ in Int64.random(in: 0 ..< (length - Int64(chunk)) / 4096, using: &rng) * 4096 }
        let direct = try Self.directRangeLatencies(url: origin.url("/rand.bin"), offsets: offsets, length: chunk)
        let rand = mountpoint + "/rand.bin"
        let coldRandom = try Self.randomReadLatencies(rand, offsets: offsets, length: chunk)
        try dropPageCache()
        let warmRandom = try Self.randomReadLatencies(rand, offsets: offsets, length: chunk)

        var probe: (mount: Double, url: Double)?
        if video != nil, let ffprobe = ["/usr/bin/ffprobe", "/usr/local/bin/ffprobe"].first(where: FileManager.default.isExecutableFile) {
            let args = ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0"]
            let viaURL = try CoreBench.best(of: 2) { try Spawned.time(ffprobe, args + [origin.url("/video.mp4")]) }
            let viaMount = try Spawned.time(ffprobe, args + [mountpoint + "/video.mp4"])
            probe = (viaMount, viaURL)
        }
        daemon.unmount()

        func mbps(_ seconds: Double) -> String { String(format: "%.1f", Double(length) / seconds / 1e6) }
        var rows: [[String]] = [
            ["", "seconds", "MB/s", "ratio (lower is better)"],
            ["curl -o /dev/null (network reference)", String(format: "%.3f", curlTime), mbps(curlTime), "1.00"],
            ["mount, cold sequential read", String(format: "%.3f", cold), mbps(cold), String(format: "%.2f x curl", cold / curlTime)],
            ["cat the data file, page cache dropped (disk reference)", String(format: "%.3f", disk), mbps(disk), "1.00"],
            ["mount, warm sequential read, page cache dropped", String(format: "%.3f", warm), mbps(warm), String(format: "%.2f x disk", warm / disk)],
        ]
        print(CoreBench.table(rows))
        print("")
        func ms(_ s: Double) -> String { String(format: "%.2f ms", s * 1000) }
        rows = [
            ["random 64 KiB reads (\(randomReads))", "p50", "p99", "p50 ratio"],
            ["direct range request to the origin (reference)", ms(Self.percentile(direct, 0.5)), ms(Self.percentile(direct, 0.99)), "1.00"],
            ["mount, cold", ms(Self.percentile(coldRandom, 0.5)), ms(Self.percentile(coldRandom, 0.99)),
             String(format: "%.2f x direct", Self.percentile(coldRandom, 0.5) / Self.percentile(direct, 0.5))],
            ["mount, warm, page cache dropped", ms(Self.percentile(warmRandom, 0.5)), ms(Self.percentile(warmRandom, 0.99)),
             String(format: "%.2f x direct", Self.percentile(warmRandom, 0.5) / Self.percentile(direct, 0.5))],
        ]
        print(CoreBench.table(rows))
        if let probe, let video {
            print("")
            print(CoreBench.table([
                ["ffprobe duration, \(CoreBench.human(Int64(video.count))) MP4, moov at the end", "seconds", "ratio"],
                ["ffprobe on the URL (reference)", String(format: "%.3f", probe.url), "1.00"],
                ["ffprobe on the mounted file, cold", String(format: "%.3f", probe.mount), String(format: "%.2f x URL", probe.mount / probe.url)],
            ]))
        } else if videoSeconds > 0 {
            print("\nffprobe: skipped (ffmpeg/ffprobe not installed)")
        }
    }

    // MARK: measurements

    /// Reads a whole file with 1 MiB reads; fails if it is short (a benchmark of a read that
    /// stopped early would be a meaningless number).
    static func readWhole(_ path: String, expected: Int64) throws -> Double {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ValidationError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let buf = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buf.deallocate() }
        var total: Int64 = 0
        let start = DispatchTime.now().uptimeNanoseconds
        while true {
            let n = read(fd, buf, 1 << 20)
            if n < 0 { throw ValidationError("read \(path) at \(total): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            total += Int64(n)
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        guard total == expected else { throw ValidationError("\(path): read \(total) bytes, expected \(expected)") }
        return elapsed
    }

    static func randomReadLatencies(_ path: String, offsets: [Int64], length: Int) throws -> [Double] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ValidationError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        return try randomReadLatencies(fd: fd, path: path, offsets: offsets, length: length)
    }

    /// One `pread` of `length` bytes per offset, in order, each timed.
    static func randomReadLatencies(fd: Int32, path: String, offsets: [Int64], length: Int) throws -> [Double] {
        let buf = UnsafeMutableRawPointer.allocate(byteCount: length, alignment: 4096)
        defer { buf.deallocate() }
        return try offsets.map { offset in
            let start = DispatchTime.now().uptimeNanoseconds
            let n = pread(fd, buf, length, off_t(offset))
            guard n == length else { throw ValidationError("pread \(path) at \(offset): \(n < 0 ? String(cString: strerror(errno)) : "short")") }
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
    }

    /// One libcurl range request per offset, one at a time, on a warm connection.
    static func directRangeLatencies(url: String, offsets: [Int64], length: Int) throws -> [Double] {
        let source = CurlRangeSource(configuration: FetcherConfiguration(clock: .system), logger: Logger(label: "bench.direct"))
        defer { source.shutdown() }
        var result: [Double] = []
        for offset in offsets {
            let sink = WaitingSink()
            let start = DispatchTime.now().uptimeNanoseconds
            _ = source.start(FetchRequest(url: url, start: offset, end: offset + Int64(length)), sink: sink)
            let (bytes, error) = sink.wait()
            if let error { throw ValidationError("direct range request failed: \(error)") }
            guard bytes == length else { throw ValidationError("direct range request: \(bytes) bytes, expected \(length)") }
            result.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        return result
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }

    /// An H.264 MP4 without +faststart (moov at the end), or nil without ffmpeg.
    static func makeVideo(seconds: Int, in temp: TemporaryDirectory) -> [UInt8]? {
        guard let ffmpeg = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"].first(where: FileManager.default.isExecutableFile) else { return nil }
        let out = temp.appending("video.mp4")
        let status = try? Spawned.run(ffmpeg, ["-nostdin", "-v", "error", "-y", "-f", "lavfi",
                                               "-i", "testsrc2=duration=\(seconds):size=1280x720:rate=30",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", out])
        guard status == 0 else { return nil }
        return FileManager.default.contents(atPath: out).map { [UInt8]($0) }
    }
}

/// Collects one transfer's byte count for a synchronous caller.
private final class WaitingSink: FetchSink, @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var bytes = 0       // written on the source's thread, read after `done`
    private var error: FetchError?

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool { true }
    func fetchDidReceive(_ b: UnsafeRawBufferPointer) -> Bool {
        bytes += b.count
        return true
    }
    func fetchDidFinish(_ error: FetchError?) {
        self.error = error
        done.signal()
    }
    func wait() -> (Int, FetchError?) {
        done.wait()
        return (bytes, error)
    }
}

