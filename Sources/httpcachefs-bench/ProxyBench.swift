import ArgumentParser
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench proxy`: the embedded proxy against references measured in the same run.
///
/// A loopback `OriginServer` serves generated files; the built `httpcachefs proxy` runs as a
/// child process on its own temporary cache (found through its `proxy.json`), and proxy URLs
/// come from `httpcachefs url`, as a user would get them. Three numbers:
/// - warm throughput: `--clients` concurrent `curl` downloads of one fully cached file, as a
///   ratio to nginx (Debian's, started on loopback with a temporary config) serving the same
///   bytes from a local file (page cache): higher is better, 1.0 is nginx's speed;
/// - cold time to first byte: a fresh file through the proxy (open + first fetch) over the same
///   request straight to the origin, median of `--cold-trials`: lower is better;
/// - origin bytes over unique bytes with `--shared-clients` players starting together on one
///   cold file: 1.0 means one download for all of them (the engine's single flight).
/// Counts and sizes are bounded; everything stays on 127.0.0.1.
struct ProxyBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Proxy throughput against nginx, cold time to first byte against the origin, origin bytes with concurrent players."
    )

    @Option(help: "Size of the warm-throughput file, e.g. 128M.")
    var size: String = "128M"

    @Option(help: "Concurrent clients for warm throughput.")
    var clients: Int = 8

    @Option(help: "Concurrent clients on one cold file.")
    var sharedClients: Int = 16

    @Option(help: "Size of the shared cold file.")
    var sharedSize: String = "64M"

    @Option(help: "Cold time-to-first-byte trials (each on a fresh file).")
    var coldTrials: Int = 5

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark; build with 'swift build -c release').")
    var binary: String?

    @Option(help: "nginx binary for the throughput reference.")
    var nginx: String = "/usr/sbin/nginx"

    @Option(help: "curl binary used as the client.")
    var curl: String = "/usr/bin/curl"

    func validate() throws {
        guard (1...64).contains(clients), (1...64).contains(sharedClients), (1...50).contains(coldTrials) else {
            throw ValidationError("--clients and --shared-clients must be 1...64, --cold-trials 1...50")
        }
    }

    func run() throws {
        let length = try CoreBench.parseSize(size)
        let sharedLength = try CoreBench.parseSize(sharedSize)
        let binary = binary ?? CoreBench.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no httpcachefs binary at \(binary); build it (swift build -c release) or pass --binary")
        }
        let origin = try OriginServer()
        defer { origin.stop() }
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-proxy")
        defer { temp.remove() }

        print("proxy benchmark: \(clients) clients on a \(CoreBench.human(length)) file, \(sharedClients) on a cold \(CoreBench.human(sharedLength)) file, binary \(binary)")
        let proxy = try ProxyProcess(binary: binary, cacheDirectory: temp.appending("cache"),
                                     cacheSize: 2 * (length + sharedLength) + Int64(coldTrials) * (16 << 20) + (1 << 30))
        defer { proxy.stop() }

        // 1. Warm throughput against nginx.
        origin.setGeneratedFile("/warm/movie.mp4", length: length, seed: 0x5EED)
        let warmURL = try proxy.url(for: origin.url("/warm/movie.mp4"))
        let coldSingle = try Clients.download(curl: curl, urls: [warmURL], expected: length)
        let proxyWarm = try CoreBench.best(of: 2) {
            try Clients.download(curl: curl, urls: Array(repeating: warmURL, count: clients), expected: length)
        }
        let www = temp.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try Self.writeGenerated(path: www + "/movie.mp4", length: length, seed: 0x5EED)
        let web = try NginxProcess(binary: nginx, root: www, workDirectory: temp.appending("nginx"))
        defer { web.stop() }
        let nginxURL = "http://127.0.0.1:\(web.port)/movie.mp4"
        _ = try Clients.download(curl: curl, urls: [nginxURL], expected: length)  // into the page cache
        let nginxWarm = try CoreBench.best(of: 2) {
            try Clients.download(curl: curl, urls: Array(repeating: nginxURL, count: clients), expected: length)
        }
        web.stop()

        // 2. Cold time to first byte against the origin itself.
        var direct: [Double] = [], proxied: [Double] = []
        for i in 0..<coldTrials {
            origin.setGeneratedFile("/direct/\(i).mp4", length: 16 << 20, seed: UInt64(100 + i))
            origin.setGeneratedFile("/cold/\(i).mp4", length: 16 << 20, seed: UInt64(200 + i))
            direct.append(try Clients.timeToFirstByte(url: origin.url("/direct/\(i).mp4")))
            proxied.append(try Clients.timeToFirstByte(url: try proxy.url(for: origin.url("/cold/\(i).mp4"))))
        }
        let directTTFB = Self.median(direct), proxyTTFB = Self.median(proxied)

        // 3. Many players on one cold file.
        origin.setGeneratedFile("/shared/movie.mp4", length: sharedLength, seed: 0xC01D)
        let sharedURL = try proxy.url(for: origin.url("/shared/movie.mp4"))
        origin.resetLog()
        let sharedTime = try Clients.download(curl: curl, urls: Array(repeating: sharedURL, count: sharedClients), expected: sharedLength)
        let originBytes = origin.bytesServed(path: "/shared/movie.mp4")

        func mbps(_ bytes: Int64, _ seconds: Double) -> String { String(format: "%.0f", Double(bytes) / seconds / 1e6) }
        let total = length * Int64(clients)
        let rows: [[String]] = [
            ["", "seconds", "MB/s", "ratio"],
            ["nginx, \(clients) clients, warm", String(format: "%.3f", nginxWarm), mbps(total, nginxWarm), "1.00 (reference)"],
            ["proxy, \(clients) clients, warm", String(format: "%.3f", proxyWarm), mbps(total, proxyWarm),
             String(format: "%.2f x nginx throughput (higher is better)", nginxWarm / proxyWarm)],
            ["proxy, 1 client, cold", String(format: "%.3f", coldSingle), mbps(length, coldSingle), "(first download, for scale)"],
            ["origin direct, first byte (median)", String(format: "%.4f", directTTFB), "", "1.00 (reference)"],
            ["proxy cold, first byte (median)", String(format: "%.4f", proxyTTFB), "",
             String(format: "%.2f x origin (lower is better)", proxyTTFB / directTTFB)],
            ["proxy, \(sharedClients) clients, one cold file", String(format: "%.3f", sharedTime), mbps(sharedLength * Int64(sharedClients), sharedTime),
             String(format: "%.3f origin bytes / unique bytes (1.0 = one download)", Double(originBytes) / Double(sharedLength))],
        ]
        print(CoreBench.table(rows))
    }

    static func median(_ xs: [Double]) -> Double {
        let s = xs.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    /// The bytes `OriginServer.setGeneratedFile(seed:)` serves, written to a file for nginx.
    static func writeGenerated(path: String, length: Int64, seed: UInt64) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let h = FileHandle(forWritingAtPath: path) else {
            throw ValidationError("cannot create \(path)")
        }
        defer { try? h.close() }
        var offset: Int64 = 0
        while offset < length {
            let n = Int(min(Int64(4 << 20), length - offset))
            try h.write(contentsOf: OriginServer.generatedBytes(seed: seed, offset: offset, count: n))
            offset += Int64(n)
        }
    }
}

/// `httpcachefs proxy` as a child process on a temporary cache, on a port of its choosing.
final class ProxyProcess {
    let binary: String
    let cacheDirectory: String
    private let process = Process()

    init(binary: String, cacheDirectory: String, cacheSize: Int64) throws {
        self.binary = binary
        self.cacheDirectory = cacheDirectory
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["proxy", "--port", "0", "--cache-dir", cacheDirectory, "--cache-size", String(cacheSize),
                             "--log-level", "error"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // Up: its runtime file names the port and /ping answers (bounded wait).
        for _ in 0..<200 {
            if let port = runtimePort(), (try? Clients.status(port: port, path: "/ping")) == 200 { return }
            guard process.isRunning else { throw ValidationError("httpcachefs proxy exited with status \(process.terminationStatus)") }
            usleep(50_000)
        }
        stop()
        throw ValidationError("httpcachefs proxy did not come up within 10 s")
    }

    private func runtimePort() -> Int? {
        guard let data = FileManager.default.contents(atPath: cacheDirectory + "/proxy.json"),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return json["port"] as? Int
    }

    /// The proxy URL for `original`, from `httpcachefs url`.
    func url(for original: String) throws -> String {
        try Self.url(for: original, binary: binary, cacheDirectory: cacheDirectory)
    }

    /// The proxy URL for `original` from the proxy running on `cacheDirectory` (a `proxy` or a
    /// `mount`), as `httpcachefs url` prints it for a user.
    static func url(for original: String, binary: String, cacheDirectory: String) throws -> String {
        let p = Process()
        let out = Pipe()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["url", original, "--cache-dir", cacheDirectory]
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0, text.hasPrefix("http://") else {
            throw ValidationError("httpcachefs url failed (status \(p.terminationStatus)): \(text)")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()  // SIGTERM: a graceful stop
        process.waitUntilExit()
    }
}

/// Debian's nginx on loopback with a temporary configuration serving `root`.
final class NginxProcess {
    let port: Int
    private let process = Process()

    init(binary: String, root: String, workDirectory: String) throws {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no nginx at \(binary) (apt-get install nginx-light, or pass --nginx)")
        }
        try FileManager.default.createDirectory(atPath: workDirectory + "/logs", withIntermediateDirectories: true)
        port = try LoopbackPort.free()
        let conf = """
        worker_processes 2;
        daemon off;
        user root;
        pid \(workDirectory)/nginx.pid;
        error_log \(workDirectory)/logs/error.log error;
        events { worker_connections 256; }
        http {
            access_log off;
            sendfile on;
            tcp_nopush on;
            client_body_temp_path \(workDirectory)/cb;
            proxy_temp_path \(workDirectory)/pt;
            fastcgi_temp_path \(workDirectory)/ft;
            uwsgi_temp_path \(workDirectory)/ut;
            scgi_temp_path \(workDirectory)/st;
            types { video/mp4 mp4; }
            server { listen 127.0.0.1:\(port); root \(root); }
        }
        """
        try conf.write(toFile: workDirectory + "/nginx.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-p", workDirectory, "-e", workDirectory + "/logs/error.log", "-c", workDirectory + "/nginx.conf"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 {
            if (try? Clients.status(port: port, path: "/")) != nil { return }
            guard process.isRunning else {
                let log = (try? String(contentsOfFile: workDirectory + "/logs/error.log", encoding: .utf8)) ?? ""
                throw ValidationError("nginx exited with status \(process.terminationStatus): \(log)")
            }
            usleep(50_000)
        }
        stop()
        throw ValidationError("nginx did not come up within 10 s")
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGQUIT)  // graceful: the master waits for its workers
        process.waitUntilExit()
    }
}

/// The benchmark's clients: curl processes for downloads, a raw socket for first-byte times.
enum Clients {
    /// Starts one `curl` per URL at once and returns the wall time until the last finishes;
    /// fails if any download is short.
    static func download(curl: String, urls: [String], expected: Int64) throws -> Double {
        try run(curl: curl, jobs: urls.map { ([$0], expected) })
    }

    /// Runs `body` and returns its result with the CPU time (user + system) its child processes
    /// used meanwhile: those that ended and were waited for, as `getrusage(RUSAGE_CHILDREN)` counts.
    static func measuringChildCPU<T>(_ body: () throws -> T) throws -> (result: T, cpu: Double) {
        func used() -> Double {
            var usage = rusage()
            getrusage(RUSAGE_CHILDREN.rawValue, &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }
        let before = used()
        let result = try body()
        return (result, used() - before)
    }

    /// Downloads `url` (of `length` bytes) as `streams` contiguous ranges, all started at once by
    /// one curl process (`--parallel`): the fastest a client that knows the file's length fetches
    /// it. Returns the time until the last range was in, as curl measured it (from the start of
    /// the transfers: no process start-up in it); fails if any range is short.
    static func downloadRanges(curl: String, url: String, length: Int64, streams: Int, output: String = "/dev/null") throws -> Double {
        let bounds = (0...streams).map { length * Int64($0) / Int64(streams) }
        var arguments = ["-Z", "--parallel-immediate", "--parallel-max", String(streams)]
        for i in 0..<streams {
            if i > 0 { arguments.append("--next") }
            arguments += ["-s", "-f", "-o", output, "-w", "%{size_download} %{time_total}\\n",
                          "-r", "\(bounds[i])-\(bounds[i + 1] - 1)", url]
        }
        let p = Process()
        let out = Pipe()
        p.executableURL = URL(fileURLWithPath: curl)
        p.arguments = arguments
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        // One line per transfer, in the order they finished.
        let done = text.split(separator: "\n").map { $0.split(separator: " ") }
        let sizes = done.compactMap { $0.first.flatMap { Int64($0) } }.sorted()
        let expected = (0..<streams).map { bounds[$0 + 1] - bounds[$0] }.sorted()
        guard p.terminationStatus == 0, sizes == expected else {
            throw ValidationError("curl of \(streams) ranges of \(url) failed (status \(p.terminationStatus)): \(text)")
        }
        return done.compactMap { $0.last.flatMap { Double($0) } }.max() ?? 0
    }

    /// One `curl -o /dev/null` per job (extra arguments, bytes it must receive), all at once.
    private static func run(curl: String, jobs: [(arguments: [String], expected: Int64)]) throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        var running: [(Process, Pipe, Int64)] = []
        for job in jobs {
            let p = Process()
            let out = Pipe()
            p.executableURL = URL(fileURLWithPath: curl)
            p.arguments = ["-s", "-f", "-o", "/dev/null", "-w", "%{size_download}"] + job.arguments
            p.standardOutput = out
            try p.run()
            running.append((p, out, job.expected))
        }
        for (p, out, expected) in running {
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            guard p.terminationStatus == 0, Int64(text) == expected else {
                throw ValidationError("curl \(p.arguments!.dropFirst(6).joined(separator: " ")) failed (status \(p.terminationStatus), \(text) of \(expected) bytes)")
            }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// Seconds from connecting to the first body byte of a GET, then the connection is dropped
    /// (a player that got what it needed to start).
    static func timeToFirstByte(url: String) throws -> Double {
        guard let c = URLComponents(string: url), let port = c.port else { throw ValidationError("bad URL \(url)") }
        let target = c.percentEncodedPath + (c.percentEncodedQuery.map { "?" + $0 } ?? "")
        let start = DispatchTime.now().uptimeNanoseconds
        let fd = try connectLoopback(port: port)
        defer { close(fd) }
        try sendAll(fd, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw ValidationError("connection closed before the first body byte of \(url)") }
            received += buffer[0..<n]
            if let end = received.firstRange(of: [13, 10, 13, 10]), received.count > end.upperBound {
                guard String(decoding: received.prefix(12), as: UTF8.self).hasSuffix("200") else {
                    throw ValidationError("\(url) answered \(String(decoding: received.prefix(12), as: UTF8.self))")
                }
                return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            }
        }
    }

    /// The status code of a GET to 127.0.0.1:port (for readiness checks).
    static func status(port: Int, path: String) throws -> Int {
        let fd = try connectLoopback(port: port)
        defer { close(fd) }
        try sendAll(fd, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 12, let code = Int(String(decoding: buffer[9..<12], as: UTF8.self)) else {
            throw ValidationError("no HTTP answer on port \(port)")
        }
        return code
    }

    static func connectLoopback(port: Int) throws -> Int32 {
        do { return try LoopbackPort.connect(port: port, timeout: 30) } catch { throw ValidationError("\(error)") }
    }

    static func sendAll(_ fd: Int32, _ text: String) throws {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw ValidationError("send: errno \(errno)") }
            sent += n
        }
    }

}
