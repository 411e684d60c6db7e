import ArgumentParser
import Foundation
import Fetcher
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench fleet`: several hosts behind one nginx cache tier (issue 21).
///
/// An in-process origin behind an emulated link (20 ms RTT, per-stream and shared caps), two
/// tier nodes started with `mount-helpers/tier.sh`, and `httpcachefs proxy` daemons on loopback,
/// each with its own cache (one per "host"). Every figure is a ratio against a reference measured
/// in the same run:
/// - three hosts reading one cold file at once, against one host alone without a tier (time), and
///   the origin's bytes against the file's length;
/// - a fourth host reading the file the others read, against the same read from a plain nginx
///   on loopback serving the file from disk (the tier is the limit, not the origin);
/// - random 64 KiB reads through the warm tier (p50), each a miss at a fresh daemon, against one
///   loopback round trip plus the transfer straight from a tier node (the issue's ratio), and
///   against that plus the front door (what the same daemon's proxy adds to a plain nginx's answer
///   for a hit); the same through the daemon's FUSE mount (O_DIRECT), whose front door is the
///   kernel;
/// - a node stopped in the middle of three hosts' reads: every read must complete byte-exact.
struct FleetBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Three hosts and two nginx tier nodes (tier.sh) in front of an origin behind an emulated link.")

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark).")
    var binary: String?

    @Option(help: "mount-helpers/tier.sh (default: the one in this source tree).")
    var tierScript: String?

    @Option(help: "File size in MiB.")
    var mib: Int = 256

    @Option(help: "Emulated link: round trip in milliseconds.")
    var linkRttMs: Double = 20

    @Option(help: "Emulated link: Mbit/s per connection.")
    var linkStreamMbit: Double = 200

    @Option(help: "Emulated link: Mbit/s shared by all connections.")
    var linkMbit: Double = 800

    @Option(help: "The tier's slice size (tier.sh --slice and --tier ...,slice=).")
    var slice: String = "4M"

    @Option(help: "Random 64 KiB reads measured.")
    var randomReads: Int = 60

    @Option(name: .customLong("daemon-option"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("An option for every host's daemon, e.g. --daemon-option=--read-ahead-max=128M (repeatable).", valueName: "option"))
    var daemonOptions: [String] = []

    func run() throws {
        let httpcachefs = binary ?? CoreBench.siblingBinary()
        let script = tierScript ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("mount-helpers/tier.sh").path
        let work = TemporaryDirectory(prefix: "httpcachefs-fleet")
        // Reachable by nginx workers running as nobody when run as root.
        chmod(work.path, 0o755)
        defer { work.remove() }
        let length = mib << 20
        let file = work.appending("film.mkv")
        try ProxyBench.writeGenerated(path: file, length: Int64(length), seed: 2121)

        let origin = try OriginServer()
        try origin.setDiskFile("/film.mkv", file: file)
        origin.emulateLink(.milliseconds(linkRttMs / 2, perConnectionMbit: linkStreamMbit, sharedMbit: linkMbit))
        let url = origin.url("/film.mkv")
        print("fleet: \(mib) MiB behind \(linkRttMs) ms RTT, \(linkStreamMbit) Mbit/s per stream, \(linkMbit) Mbit/s shared")

        // Reference 1: one host alone, no tier.
        let alone = try Spawned.time(httpcachefs, ["cat", url, "--cache-dir", work.appending("alone")])
        origin.resetLog()

        var nodes: [(dir: String, url: String)] = []
        defer { for n in nodes { _ = try? Spawned.run(script, ["--stop", "--cache-dir", n.dir]) } }
        for name in ["a", "b"] {
            let dir = work.appending("tier-\(name)"), port = try LoopbackPort.free()
            guard try Spawned.run(script, ["--origin", origin.url(""), "--port", String(port), "--cache-dir", dir,
                                           "--bind", "127.0.0.1", "--size", "4G", "--slice", slice]) == 0 else {
                throw ValidationError("tier.sh could not start a node (is nginx installed?)")
            }
            nodes.append((dir, "http://127.0.0.1:\(port)"))
        }
        let tier = "\(origin.url(""))=\(nodes.map(\.url).joined(separator: ",")),slice=\(slice)"
        var daemons: [pid_t] = []
        defer { for pid in daemons { kill(pid, SIGTERM); var s: Int32 = 0; waitpid(pid, &s, 0) } }
        func host(_ name: String, tiered: Bool = true) throws -> String {
            let cache = work.appending("host-\(name)")
            daemons.append(try Spawned.start(httpcachefs, ["proxy", "--proxy-port", "0", "--cache-dir", cache]
                                                              + (tiered ? ["--tier", tier] : []) + daemonOptions))
            let deadline = Date().addingTimeInterval(30)
            while !FileManager.default.fileExists(atPath: cache + "/proxy.json") {
                guard Date() < deadline else { throw ValidationError("the proxy of \(name) did not start") }
                usleep(20_000)
            }
            return cache
        }

        // 1. Three hosts, cold, at once.
        let three = try (1...3).map { try host("cold-\($0)") }
        let times = Locked([Double](repeating: 0, count: 3))
        DispatchQueue.concurrentPerform(iterations: 3) { i in
            let t = (try? Spawned.time(httpcachefs, ["cat", url, "--cache-dir", three[i]])) ?? .infinity
            times.mutate { $0[i] = t }
        }
        let coldThree = times.value.max() ?? .infinity
        let originBytes = origin.bytesServed(path: "/film.mkv")
        let coldTier = three.map { Self.tierCounters(cacheDirectory: $0) }
        let coldRequests = origin.requests.filter { $0.pathWithoutQuery == "/film.mkv" }

        // 2. A fourth host after them, against a warm plain nginx on loopback.
        // Each side three times, interleaved, each time a host with an empty cache of its own; the
        // best of each counts (one read is about 0.3 s here, and single reads varied by a third).
        let plain = try Self.plainNginx(work: work, root: work.path)
        defer { _ = kill(plain.pid, SIGTERM) }
        let plainURL = "http://127.0.0.1:\(plain.port)/film.mkv"
        _ = try Spawned.time("/usr/bin/cat", [file])   // the page cache holds it, as the tier's does
        var warm = Double.infinity, nginxWarm = Double.infinity
        for round in 1...3 {
            warm = min(warm, try Spawned.time(httpcachefs, ["cat", url, "--cache-dir", try host("after-\(round)")]))
            // Through a daemon of its own, as the tiered host reads: the same proxy hop on both sides.
            nginxWarm = min(nginxWarm, try Spawned.time(httpcachefs, ["cat", plainURL, "--cache-dir", try host("plain-\(round)", tiered: false)]))
        }
        // What the tiered host pays that the loopback reference cannot: the open-time check goes
        // to the origin, over the link (by design: the version comes from the origin). Measured as
        // a fresh daemon's first byte, each side from its own origin; the difference is its cost.
        let check = try Spawned.time(httpcachefs, ["cat", url, "--range", "0-0", "--cache-dir", try host("check")])
        let plainCheck = try Spawned.time(httpcachefs, ["cat", plainURL, "--range", "0-0", "--cache-dir", try host("plain-check", tiered: false)])
        let checkCost = max(0, check - plainCheck)

        // 3. Random 64 KiB reads through the warm tier, against a round trip to a node. One daemon
        // (a mount with its proxy) on a fresh cache: every read is a miss there and a hit at the
        // node. Interleaved per read: a miss through its proxy, the same request straight to the
        // home node (the issue's reference), the same read again through the proxy (a hit: the
        // front door alone) and from the plain nginx (what any HTTP server costs for it); then a
        // miss and a hit through the FUSE mount (O_DIRECT, so the page cache answers nothing).
        let random = try randomReads(httpcachefs: httpcachefs, work: work, url: url, length: length, tier: tier,
                                     nodes: nodes.map(\.url), originPort: origin.port, plainPort: plain.port)

        // 4. A node stopped in the middle of three hosts' reads.
        let last = try (1...3).map { try host("kill-\($0)") }
        let statuses = Locked([Int32](repeating: -1, count: 3))
        let group = DispatchGroup()
        for i in 0..<3 {
            DispatchQueue.global().async(group: group) {
                let cmd = "\"$0\" cat \"$1\" --cache-dir \"$2\" | cmp -s - \"$3\""
                let status = (try? Spawned.run("/bin/sh", ["-c", cmd, httpcachefs, url, last[i], file])) ?? -1
                statuses.mutate { $0[i] = status }
            }
        }
        usleep(300_000)
        _ = try Spawned.run(script, ["--stop", "--cache-dir", nodes[0].dir])
        group.wait()
        let exact = statuses.value.filter { $0 == 0 }.count
        // Read now, not after the cold reads: a request a node still serves is logged when it ends
        // (the stopped node has ended all of its own by now).
        let twice = Self.rangesFetchedTwice(coldRequests, nodeLogs: nodes.map { $0.dir + "/access.log" })

        print(String(format: "origin bytes, 3 cold hosts at once: %d (%.3fx the file)", originBytes, Double(originBytes) / Double(length)))
        print(String(format: "  the 3 cold hosts' daemons: %d tier errors, %.1f MiB they took from the origin themselves (open-time checks, fall-backs)",
                     coldTier.map(\.errors).reduce(0, +), Double(coldTier.map(\.originBytes).reduce(0, +)) / 1_048_576))
        for line in twice { print("  " + line) }
        print(String(format: "3 cold hosts at once %.2f s vs 1 host alone without a tier %.2f s: %.2fx", coldThree, alone, coldThree / alone))
        print(String(format: "host after host %.2f s vs warm plain nginx on loopback %.2f s (best of 3 each): %.2fx", warm, nginxWarm, warm / nginxWarm))
        print(String(format: "  of which the open-time check over the link: %.3f s (a first byte %.3f s vs %.3f s on loopback); the rest %.2fx",
                     checkCost, check, plainCheck, (warm - checkCost) / nginxWarm))
        random.print()
        print("node stopped mid-read: \(exact) of 3 reads complete and byte-exact")
        if exact != 3 { throw ExitCode(1) }
    }

    /// Latencies (seconds) of the random 64 KiB reads, each list in the order measured.
    struct RandomReads {
        var proxyMiss: [Double] = [], node: [Double] = [], proxyHit: [Double] = [], plain: [Double] = []
        var fuseMiss: [Double] = [], fuseHit: [Double] = []
        var fuseNote = ""
        /// Times a miss waited for the daemon's fetches before it (the previous read's read-ahead).
        var waitedForQuiet = 0

        static func p50(_ t: [Double]) -> Double { t.isEmpty ? .nan : t.sorted()[t.count / 2] }

        func print() {
            let miss = Self.p50(proxyMiss), node = Self.p50(node), hit = Self.p50(proxyHit), plain = Self.p50(plain)
            // The front door: what the daemon's proxy adds to a plain HTTP server's answer.
            let door = max(0, hit - plain)
            Swift.print(String(format: "random 64 KiB through a warm tier p50 %.2f ms vs a node round trip + transfer %.2f ms: %.2fx",
                               miss * 1000, node * 1000, miss / node))
            Swift.print("  (each miss started with no fetch in flight at the daemon; \(waitedForQuiet) of \(proxyMiss.count + fuseMiss.count) waited for one)")
            Swift.print(String(format: "  front door: a hit through the same proxy p50 %.2f ms, a plain nginx %.2f ms (the proxy adds %.2f ms)",
                               hit * 1000, plain * 1000, door * 1000))
            Swift.print(String(format: "  miss through the proxy %.2f ms vs node round trip + front door %.2f ms: %.2fx",
                               miss * 1000, (node + door) * 1000, miss / (node + door)))
            // A proxied miss is two HTTP exchanges on loopback (the player's with the proxy, the
            // proxy's with the node); the line above counts one of them. Against its two parts,
            // as the mount's line below: a node round trip and a hit through the same proxy.
            Swift.print(String(format: "  miss through the proxy %.2f ms vs node round trip + proxy hit %.2f ms: %.2fx (what a miss adds to a hit: %.2f ms, %.2fx the node round trip)",
                               miss * 1000, (node + hit) * 1000, miss / (node + hit), (miss - hit) * 1000, (miss - hit) / node))
            if fuseMiss.isEmpty {
                Swift.print("  through the FUSE mount: not measured (\(fuseNote))")
            } else {
                let fm = Self.p50(fuseMiss), fh = Self.p50(fuseHit)
                Swift.print(String(format: "  through the FUSE mount (O_DIRECT): miss p50 %.2f ms, hit %.2f ms; miss vs node %.2fx, vs node + hit %.2fx (a miss adds %.2fx the node round trip)",
                                   fm * 1000, fh * 1000, fm / node, fm / (node + fh), (fm - fh) / node))
            }
        }
    }

    func randomReads(httpcachefs: String, work: TemporaryDirectory, url: String, length: Int, tier: String,
                     nodes: [String], originPort: Int, plainPort: Int) throws -> RandomReads {
        let mount = try MountDaemon(binary: httpcachefs, mountpoint: work.appending("random-mnt"),
                                    cacheDirectory: work.appending("host-random"), cacheSize: 4 << 30,
                                    entries: ["film.mkv=\(url)"], logFile: work.appending("random.log"),
                                    extraArguments: ["--tier", tier] + daemonOptions)
        defer { mount.unmount() }
        let proxyURL = try mount.proxyURL(for: url)
        guard let proxy = URLComponents(string: proxyURL), let proxyPort = proxy.port else { throw ValidationError("no proxy URL: \(proxyURL)") }
        // The reference asks a node exactly as the daemon does (same version, same key): a hit.
        let head = try RawHTTP.request(port: originPort, method: "HEAD", path: "/film.mkv", timeout: 30)
        let etag = head.headers.first { $0.0.lowercased() == "etag" }?.1 ?? ""
        let tierHeaders = [("X-Httpcachefs-Version", "\(etag) \(length)"), ("X-Httpcachefs-Key", url)]
        let sliceSize = Int64(TierSpec.parseSizeForBench(slice))
        let router = TierRouter(nodes: nodes, sliceSize: sliceSize)
        // Distinct 64 KiB slots: no read finds bytes an earlier one brought.
        var slots = Array(0..<(length / 65_536 - 1)).shuffled()
        var out = RandomReads()
        let fd = open(work.appending("random-mnt/film.mkv"), O_RDONLY | Self.oDirect)
        if fd < 0 { out.fuseNote = "O_DIRECT open: \(String(cString: strerror(errno)))" }
        defer { if fd >= 0 { close(fd) } }
        var buffer: UnsafeMutableRawPointer?
        guard posix_memalign(&buffer, 4096, 65_536) == 0, let buffer else { throw ValidationError("no aligned buffer") }
        defer { free(buffer) }
        func timed(_ body: () throws -> Void) rethrows -> Double {
            let t0 = DispatchTime.now().uptimeNanoseconds
            try body()
            return Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        }
        for _ in 0..<randomReads {
            let start = slots.removeLast() * 65_536
            let range = [("Range", "bytes=\(start)-\(start + 65_535)")]
            func viaProxy() throws {
                let r = try RawHTTP.request(port: proxyPort, path: proxy.percentEncodedPath, headers: range, timeout: 30)
                guard r.status == 206, r.body.count == 65_536 else { throw ValidationError("random read: status \(r.status)") }
            }
            // Each miss starts on a quiet daemon, as a random read on an idle host does: the FUSE
            // hit before it re-reads a block, which the engine takes as reading on and follows with
            // up to 1 MiB of read-ahead; its arrival and writes took the CPU from the next miss
            // (0.3-0.8 ms of its p50 on two shared cores).
            out.waitedForQuiet += try Self.waitUntilNoFetch(proxyPort: proxyPort, cacheDirectory: work.appending("host-random"))
            out.proxyMiss.append(try timed(viaProxy))
            let home = URLComponents(string: nodes[router.order(key: url, slice: Int64(start) / sliceSize)[0]])!.port!
            out.node.append(try timed { _ = try RawHTTP.request(port: home, path: "/film.mkv", headers: range + tierHeaders, timeout: 30) })
            out.proxyHit.append(try timed(viaProxy))
            out.plain.append(try timed { _ = try RawHTTP.request(port: plainPort, path: "/film.mkv", headers: range, timeout: 30) })
            guard fd >= 0 else { continue }
            let at = off_t(slots.removeLast() * 65_536)
            out.waitedForQuiet += try Self.waitUntilNoFetch(proxyPort: proxyPort, cacheDirectory: work.appending("host-random"))
            for hit in [false, true] {
                var n = 0
                let t = timed { n = pread(fd, buffer, 65_536, at) }
                guard n == 65_536 else { throw ValidationError("FUSE read at \(at): \(n < 0 ? String(cString: strerror(errno)) : "\(n) bytes")") }
                if hit { out.fuseHit.append(t) } else { out.fuseMiss.append(t) }
            }
        }
        return out
    }

    /// The ranges the origin sent more than once (a slice a node fetched twice), each with what
    /// the nodes' access logs say about requests inside it: which node, cache status, connection.
    static func rangesFetchedTwice(_ requests: [RequestRecord], nodeLogs: [String]) -> [String] {
        let t0 = requests.map(\.receivedAt).min() ?? 0
        // A node's requests carry no Accept-Encoding (the template clears it); a daemon's do.
        let fromNodes = requests.filter { r in r.range != nil && !r.headers.contains { $0.0.lowercased() == "accept-encoding" } }
        let byRange = Dictionary(grouping: fromNodes, by: { $0.range! })
        var out: [String] = []
        for (range, asked) in byRange.sorted(by: { $0.key < $1.key }) where asked.count > 1 {
            let when = asked.map { String(format: "%.3f s (connection %d, %d bytes)", $0.receivedAt - t0, $0.connection, $0.bodyBytes) }
            out.append("the origin sent \(range) \(asked.count) times: at \(when.joined(separator: ", "))")
            for a in asked { out.append("  asked with " + a.headers.map { "\($0.0): \($0.1)" }.joined(separator: "; ")) }
            guard let bounds = Self.bounds(of: range) else { continue }
            for (i, path) in nodeLogs.enumerated() {
                let lines = (try? String(contentsOfFile: path, encoding: .utf8))?.split(separator: "\n") ?? []
                let inside = lines.filter { line in
                    if !line.contains("if_range=\"-\"") { return true }   // the slice module starts at byte 0
                    guard let r = line.range(of: "range=\"") else { return false }
                    let value = line[r.upperBound...].prefix { $0 != "\"" }
                    guard let b = Self.bounds(of: String(value)) else { return true }   // no range: from byte 0
                    return b.lowerBound >= bounds.lowerBound && b.lowerBound <= bounds.upperBound
                }
                for line in inside { out.append("  node \(i == 0 ? "a" : "b"): \(line)") }
            }
        }
        return out
    }

    /// `bytes=A-B` as A...B.
    static func bounds(of range: String) -> ClosedRange<Int64>? {
        guard range.hasPrefix("bytes=") else { return nil }
        let parts = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let a = Int64(parts[0]), let b = Int64(parts[1]), a <= b else { return nil }
        return a...b
    }

    /// Waits (bounded) until the daemon behind `proxyPort` has no fetch in flight; 1 if it had
    /// one, else 0.
    static func waitUntilNoFetch(proxyPort: Int, cacheDirectory: String) throws -> Int {
        struct Status: Decodable { struct Fetch: Decodable {}; var fetches: [Fetch] }
        let deadline = Date().addingTimeInterval(10)
        var waited = 0
        while true {
            let r = try RawHTTP.request(port: proxyPort, path: "/.httpcachefs/status.json",
                                        headers: ownerKeyHeader(cacheDirectory: cacheDirectory), timeout: 10)
            let status = try JSONDecoder().decode(Status.self, from: Data(r.body))
            if status.fetches.isEmpty { return waited }
            guard Date() < deadline else { throw ValidationError("the daemon kept \(status.fetches.count) fetches in flight for 10 s") }
            waited = 1
            usleep(1_000)
        }
    }

    /// The control key of the daemon on `cacheDirectory` (its owner-only `proxy.json`), as the
    /// header its owner-only pages (status.json) need.
    static func ownerKeyHeader(cacheDirectory: String) -> [(String, String)] {
        struct Runtime: Decodable { var controlKey: String? }
        guard let data = FileManager.default.contents(atPath: cacheDirectory + "/proxy.json"),
              let key = try? JSONDecoder().decode(Runtime.self, from: data).controlKey else { return [] }
        return [("X-Httpcachefs-Control", key)]
    }

    /// O_DIRECT (Glibc does not export it to Swift): reads that bypass the page cache.
    #if arch(arm64)
    static let oDirect: Int32 = 0o200000
    #else
    static let oDirect: Int32 = 0o40000
    #endif

    /// Tier errors and origin bytes a daemon counted (its status document), zeros if unreadable.
    static func tierCounters(cacheDirectory: String) -> (errors: Int, originBytes: Int) {
        struct Proxy: Decodable { var port: Int }
        struct Status: Decodable {
            struct Tier: Decodable {
                struct Node: Decodable { var errors: Int }
                var nodes: [Node]
                var originBytes: Int
            }
            var tier: Tier?
        }
        guard let data = FileManager.default.contents(atPath: cacheDirectory + "/proxy.json"),
              let port = try? JSONDecoder().decode(Proxy.self, from: data).port,
              let r = try? RawHTTP.request(port: port, path: "/.httpcachefs/status.json",
                                           headers: ownerKeyHeader(cacheDirectory: cacheDirectory), timeout: 10),
              let tier = try? JSONDecoder().decode(Status.self, from: Data(r.body)).tier else { return (0, 0) }
        return (tier.nodes.map(\.errors).reduce(0, +), tier.originBytes)
    }

    static func output(_ path: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// A plain nginx serving `root` on loopback (foreground master, killed by pid).
    static func plainNginx(work: TemporaryDirectory, root: String) throws -> (pid: pid_t, port: Int) {
        let dir = work.appending("plain-nginx")
        try FileManager.default.createDirectory(atPath: dir + "/tmp", withIntermediateDirectories: true)
        let port = try LoopbackPort.free()
        let user = geteuid() == 0 ? "user root;\n" : ""
        let conf = """
        \(user)daemon off; worker_processes 2; pid \(dir)/nginx.pid; error_log \(dir)/error.log;
        events {} http { access_log off; sendfile on; client_body_temp_path \(dir)/tmp/b; proxy_temp_path \(dir)/tmp/p;
        fastcgi_temp_path \(dir)/tmp/f; uwsgi_temp_path \(dir)/tmp/u; scgi_temp_path \(dir)/tmp/s;
        server { listen 127.0.0.1:\(port); root \(root); } }
        """
        try conf.write(toFile: dir + "/nginx.conf", atomically: true, encoding: .utf8)
        let pid = try Spawned.start("/usr/sbin/nginx", ["-p", dir, "-c", dir + "/nginx.conf", "-e", dir + "/error.log"])
        let deadline = Date().addingTimeInterval(10)
        while (try? RawHTTP.request(port: port, method: "HEAD", path: "/film.mkv", timeout: 1)) == nil {
            guard Date() < deadline else { throw ValidationError("the plain nginx did not start") }
            usleep(20_000)
        }
        return (pid, port)
    }
}
