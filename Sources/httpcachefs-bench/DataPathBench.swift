import ArgumentParser
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench datapath` (alias `all`): the data path against the limits of the machine,
/// every figure as a ratio to a reference measured in the same run, in one table with its target.
///
/// One `httpcachefs mount` daemon (with its proxy) serves every file; the loopback origin serves
/// them generated on the fly. Two phases:
/// - behind an emulated link (`LinkEmulation`: 10 ms one way, 200 Mbit/s per connection,
///   800 Mbit/s shared, by default): the link's calibration (one curl stream, N parallel range
///   streams), a cold sequential read through the mount against the N streams, cold random
///   64 KiB reads against one round trip plus the transfer of what the kernel asked for, and the
///   origin bytes that N concurrent cold readers of one file cost;
/// - on plain loopback: a cold sequential read against curl, a warm one (page cache dropped)
///   against a plain file on the same disk, the proxy's warm throughput against nginx with
///   sendfile, and the daemon's peak memory while 16 mount readers and 16 proxy clients stream.
/// Side by side (`RcloneMount`): rclone's mount of the same origin reads the same bytes cold,
/// sequentially over the link and over loopback, and at the same random offsets over the link.
/// A figure that cannot run (no root, no nginx, no rclone) or fails says so in its row; the
/// others still run.
struct DataPathBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "datapath",
        abstract: "Every data-path figure (emulated link and loopback, mount and proxy) against its reference and target, in one table.",
        discussion: "Quick run: --size 16M --big-size 64M --rss-size 4M --random-reads 20; one figure: --only link (or readers, random, ...). Root is needed to drop the page cache.",
        aliases: ["all"]
    )

    @Option(help: "Size of the files read over the emulated link (calibration, cold sequential, concurrent readers).")
    var size: String = "100M"

    @Option(help: "Size of the file read over plain loopback (cold and warm sequential, proxy against nginx).")
    var bigSize: String = "1G"

    @Option(help: "Size of each of the 32 files streamed while the daemon's peak memory is measured.")
    var rssSize: String = "64M"

    @Option(help: "Number of cold random 64 KiB reads (each in its own 2 MiB of the file).")
    var randomReads: Int = 200

    @Option(help: "Parallel curl range streams in the link reference, and concurrent cold readers of one file.")
    var streams: Int = 8

    @OptionGroup var link: LinkOptions

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark; build with 'swift build -c release').")
    var binary: String?

    @Option(help: "curl binary for the references and the proxy clients.")
    var curl: String = "/usr/bin/curl"

    @Option(help: "nginx binary for the proxy reference (apt-get install nginx-light).")
    var nginx: String = "/usr/sbin/nginx"

    @Option(help: "rclone binary for the side-by-side figures (default: rclone on PATH; mount-helpers/setup-debian.sh --bench installs 1.75).")
    var rclone: String?

    @Option(help: ArgumentHelp("Measure only these figures, comma-separated (default: all).",
                               valueName: DataPathFigure.allCases.map(\.rawValue).joined(separator: ",")))
    var only: String?

    static let randomReadLength = 64 << 10
    /// Each random read gets its own stretch of the file, far enough from the next that the
    /// daemon neither counts it as sequential nor has read ahead into it: cold means cold.
    static let randomSlot: Int64 = 2 << 20
    static let proxyClients = 8
    /// rclone starts 16 x 4 MiB streams at every seek: 30 random reads are enough for a p50 and
    /// keep its figure under a minute.
    static let rcloneRandomReads = 30
    /// Slots of the side-by-side random reads: wider than the 64 MiB rclone fetches at a seek, so
    /// each read is cold for both.
    static let sparseSlot: Int64 = 128 << 20
    static let memoryReaders = 16
    /// Warm readers at once in the players figure, each on its own file.
    static let players = 8

    func validate() throws {
        guard (1...64).contains(streams), (1...2000).contains(randomReads) else {
            throw ValidationError("--streams must be 1...64 and --random-reads 1...2000")
        }
        _ = try selected()
    }

    /// The figures `--only` names (all without it).
    func selected() throws -> Set<DataPathFigure> {
        guard let only else { return Set(DataPathFigure.allCases) }
        return try Set(only.split(separator: ",").map { name in
            let name = name.trimmingCharacters(in: .whitespaces)
            guard let figure = DataPathFigure(rawValue: name) else {
                throw ValidationError("--only: no figure '\(name)'; the figures: "
                                      + DataPathFigure.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return figure
        })
    }

    func run() throws {
        let only = try selected()
        let sizes = (link: try CoreBench.parseSize(size), big: try CoreBench.parseSize(bigSize), rss: try CoreBench.parseSize(rssSize))
        let randomLength = Int64(randomReads) * Self.randomSlot
        let binary = binary ?? CoreBench.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no httpcachefs binary at \(binary); build it (swift build -c release) or pass --binary")
        }
        guard FileManager.default.fileExists(atPath: "/dev/fuse") else { throw ValidationError("no /dev/fuse: cannot mount") }
        let emulation = link.emulation

        let origin = try OriginServer()
        defer { origin.stop() }
        origin.setGeneratedFile("/seq.bin", length: sizes.link, seed: 0x5E0)
        origin.setGeneratedFile("/shared.bin", length: sizes.link, seed: 0x5A4)
        origin.setGeneratedFile("/rand.bin", length: randomLength, seed: 0x4A4D)
        origin.setGeneratedFile("/big.bin", length: sizes.big, seed: 0xB16)
        // rclone's copies: the same bytes under other URLs, so both caches start cold.
        origin.setGeneratedFile("/rclone/seq.bin", length: sizes.link, seed: 0x5E0)
        origin.setGeneratedFile("/rclone/big.bin", length: sizes.big, seed: 0xB16)
        origin.setResponse("/rclone/", status: 200, headers: [("Content-Type", "text/html")],
                           body: RcloneMount.listing(["seq.bin", "sparse.bin", "big.bin"]))
        // Read by both at the same offsets, a slot apart (the files are generated, not stored).
        let sparseLength = Int64(Self.rcloneRandomReads) * Self.sparseSlot
        origin.setGeneratedFile("/sparse.bin", length: sparseLength, seed: 0x5BA)
        origin.setGeneratedFile("/rclone/sparse.bin", length: sparseLength, seed: 0x5BA)
        for i in 0..<Self.memoryReaders {
            origin.setGeneratedFile("/rss/m\(i).bin", length: sizes.rss, seed: 0x1000 + UInt64(i))
            origin.setGeneratedFile("/rss/p\(i).bin", length: sizes.rss, seed: 0x2000 + UInt64(i))
        }
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-datapath")
        defer { temp.remove() }
        let www = temp.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        if !only.isDisjoint(with: [.warm, .proxy]) {
            FigureTable.progress("writing the \(CoreBench.human(sizes.big)) plain file (disk and nginx reference)")
            try ProxyBench.writeGenerated(path: www + "/big.bin", length: sizes.big, seed: 0xB16)
            sync()   // its write-back would otherwise run during the figures that follow
        }

        let entries = ["seq.bin", "shared.bin", "rand.bin", "big.bin", "sparse.bin"].map { "\($0)=\(origin.url("/" + $0))" }
            + (0..<Self.memoryReaders).map { "m\($0).bin=\(origin.url("/rss/m\($0).bin"))" }
        let cacheSize = 2 * sizes.link + randomLength + 2 * sizes.big + 2 * Int64(Self.memoryReaders) * sizes.rss + (1 << 30)
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt"), cacheDirectory: temp.appending("cache"),
                                     cacheSize: cacheSize, entries: entries, logFile: temp.appending("mount.log"))
        defer { daemon.unmount() }
        let mnt = daemon.mountpoint

        print("datapath benchmark: binary \(binary)")
        print("link: \(LinkOptions.describe(emulation)); files: \(CoreBench.human(sizes.link)) over the link, \(CoreBench.human(sizes.big)) over loopback, \(2 * Self.memoryReaders) x \(CoreBench.human(sizes.rss)) for memory")
        var table = FigureTable(only: only)
        let overLink = Self.over(emulation)
        let side = SideBySide(binary: rclone ?? RcloneMount.onPath(), origin: origin.url("/rclone/"), temp: temp)

        // Phase 1: behind the emulated link.
        origin.emulateLink(emulation)
        var nStreams: Double?
        table.measure([.calibration], "link calibration, 1 curl stream") {
            let t = try Clients.downloadRanges(curl: curl, url: origin.url("/seq.bin"), length: sizes.link, streams: 1)
            let rate = emulation?.bytesPerSecondPerConnection ?? emulation?.bytesPerSecondShared
            return [Self.calibration("link calibration, 1 curl stream", bytes: sizes.link, seconds: t, rate: rate,
                                     roundTrip: emulation?.roundTrip ?? 0)]
        }
        table.measure([.calibration, .link, .rclone], "link reference, \(streams) curl range streams") {
            let t = try Clients.downloadRanges(curl: curl, url: origin.url("/seq.bin"), length: sizes.link, streams: streams)
            nStreams = t
            let perConnection = emulation?.bytesPerSecondPerConnection.map { $0 * Double(streams) }
            let rate = [perConnection, emulation?.bytesPerSecondShared].compactMap { $0 }.min()
            return [Self.calibration("link calibration, \(streams) curl range streams", bytes: sizes.link, seconds: t, rate: rate,
                                     roundTrip: emulation?.roundTrip ?? 0)]
        }
        var ours: (link: Double?, loopback: Double?) = (nil, nil)
        table.measure([.link, .rclone], "mount, cold sequential \(overLink)") {
            let t = try MountBench.readWhole(mnt + "/seq.bin", expected: sizes.link)
            ours.link = t
            guard let reference = nStreams else { throw ValidationError("no \(streams)-stream reference") }
            return [Figure(name: "mount, cold sequential \(CoreBench.human(sizes.link)) \(overLink)",
                           measured: Self.seconds(t) + ", " + Self.mbit(sizes.link, t),
                           reference: "\(streams) curl range streams: " + Self.seconds(reference),
                           ratio: t / reference, unit: "x time", target: .atMost(1.1))]
        }
        table.measure([.random], "mount, cold random 64 KiB reads \(overLink)") {
            [try measureRandomReads(path: mnt + "/rand.bin", length: randomLength, emulation: emulation)]
        }
        table.measure([.readers], "mount, \(streams) concurrent cold readers of one file") {
            origin.resetLog()
            let t = try Readers.concurrently(streams) { _ in _ = try MountBench.readWhole(mnt + "/shared.bin", expected: sizes.link) }
            let served = origin.bytesServed(path: "/shared.bin")
            let requests = origin.requests.filter { $0.pathWithoutQuery == "/shared.bin" }
            // Bytes are counted as the origin hands them to the connection, so a fetch stopped
            // with bytes in flight counts too: it cost the network as much.
            let note = served > sizes.link
                ? "origin requests (Range -> body bytes sent): " + requests.map { "\($0.range ?? "none") -> \($0.bodyBytes)" }.joined(separator: ", ")
                : nil
            return [Figure(name: "mount, \(streams) concurrent cold readers of one file \(overLink)",
                           measured: "\(served) origin bytes (\(requests.count) requests) in " + Self.seconds(t),
                           reference: "\(sizes.link) unique bytes", ratio: Double(served) / Double(sizes.link),
                           unit: "origin/unique", target: .atMost(1.0), digits: 5, note: note)]
        }

        table.measure([.rclone], "rclone mount, cold sequential \(overLink)") {
            [try side.sequential("seq.bin", expected: sizes.link, ours: ours.link, "cold sequential \(CoreBench.human(sizes.link)) \(overLink)")]
        }
        table.measure([.rclone], "rclone mount, cold random 64 KiB reads \(overLink)") {
            let offsets = Self.sparseOffsets()
            let theirs = try side.randomReads("sparse.bin", offsets: offsets, length: Self.randomReadLength)
            let mine = try MountBench.randomReadLatencies(mnt + "/sparse.bin", offsets: offsets, length: Self.randomReadLength)
            let p50 = (mine: MountBench.percentile(mine, 0.5), theirs: MountBench.percentile(theirs, 0.5))
            // Sent by the origin while each read: what a seek costs the network.
            let pulled = (mine: origin.bytesServed(path: "/sparse.bin"), theirs: origin.bytesServed(path: "/rclone/sparse.bin"))
            var figure = side.figure("cold random 64 KiB reads \(overLink), p50 of the same \(offsets.count)",
                                     measured: String(format: "%.1f ms", p50.mine * 1000), reference: String(format: "%.1f ms", p50.theirs * 1000),
                                     ratio: p50.mine / p50.theirs, unit: "x (p50)")
            figure.note = "origin bytes per read: httpcachefs " + CoreBench.human(pulled.mine / Int64(offsets.count))
                + ", rclone " + CoreBench.human(pulled.theirs / Int64(offsets.count))
            return [figure]
        }

        // Phase 2: plain loopback.
        origin.emulateLink(nil)
        table.measure([.loopback, .cpu, .rclone], "mount, cold sequential over loopback") {
            // The reference is curl saving the bytes to a file on the cache's disk: on this kind
            // of VM most of a cold read's cost is filling fresh page-cache pages, which any cache
            // that keeps the bytes pays and a download to /dev/null does not.
            let saved = temp.appending("curl-saved.bin")
            var saving = (time: Double.infinity, cpu: Double.infinity)
            for _ in 0..<2 {
                unlink(saved)
                sync()
                let run = try Clients.measuringChildCPU {
                    try Clients.downloadRanges(curl: curl, url: origin.url("/big.bin"), length: sizes.big, streams: 1, output: saved)
                }
                saving = (min(saving.time, run.result), min(saving.cpu, run.cpu))
            }
            unlink(saved)
            let nullTime = try Clients.downloadRanges(curl: curl, url: origin.url("/big.bin"), length: sizes.big, streams: 1)
            sync()   // the mount starts without curl's write-back
            let cpuBefore = try daemon.cpuSeconds()
            let t = try MountBench.readWhole(mnt + "/big.bin", expected: sizes.big)
            ours.loopback = t
            let cpu = try daemon.cpuSeconds() - cpuBefore
            sync()
            let size = CoreBench.human(sizes.big)
            return [Figure(name: "mount, cold sequential \(size) over loopback",
                           measured: Self.seconds(t) + ", " + Self.megabytes(sizes.big, t),
                           reference: "curl -o FILE on the cache's disk: " + Self.seconds(saving.time) + ", " + Self.megabytes(sizes.big, saving.time),
                           ratio: saving.time / t, unit: "x throughput", target: .atLeast(0.85),
                           note: "for scale: curl to /dev/null took " + Self.seconds(nullTime) + ", " + Self.megabytes(sizes.big, nullTime)),
                    Figure(name: "daemon CPU for that cold \(size)",
                           measured: String(format: "%.2f CPU-s", cpu),
                           reference: String(format: "curl -o FILE: %.2f CPU-s", saving.cpu),
                           ratio: cpu / saving.cpu, unit: "x CPU", target: .atMost(1.5))]
        }
        table.measure([.rclone], "rclone mount, cold sequential over loopback") {
            [try side.sequential("big.bin", expected: sizes.big, ours: ours.loopback, "cold sequential \(CoreBench.human(sizes.big)) over loopback")]
        }
        table.measure([.warm], "mount, warm sequential, page cache dropped") {
            guard Readers.canDropPageCache else { throw ValidationError("skipped: dropping the page cache needs root") }
            // `--only warm`: the cold figure did not fill the cache, so this read does.
            if ours.loopback == nil { _ = try MountBench.readWhole(mnt + "/big.bin", expected: sizes.big) }
            try daemon.waitUntilCached(url: origin.url("/big.bin"), length: sizes.big)
            // Best of two each, alternating: one disk read stalled by the host moves a single
            // run by a factor of two here.
            var plain = Double.infinity, t = Double.infinity
            for _ in 0..<2 {
                try Readers.dropPageCache()
                plain = min(plain, try MountBench.readWhole(www + "/big.bin", expected: sizes.big))
                try Readers.dropPageCache()
                t = min(t, try MountBench.readWhole(mnt + "/big.bin", expected: sizes.big))
            }
            return [Figure(name: "mount, warm sequential \(CoreBench.human(sizes.big)), page cache dropped",
                           measured: Self.seconds(t) + ", " + Self.megabytes(sizes.big, t),
                           reference: "plain file, same disk: " + Self.seconds(plain) + ", " + Self.megabytes(sizes.big, plain),
                           ratio: plain / t, unit: "x throughput", target: .atLeast(0.9))]
        }
        table.measure([.proxy], "proxy, warm, \(Self.proxyClients) clients against nginx") {
            let proxyURL = try daemon.proxyURL(for: origin.url("/big.bin"))
            let urls = { (url: String) in Array(repeating: url, count: Self.proxyClients) }
            _ = try Clients.download(curl: curl, urls: [proxyURL], expected: sizes.big)  // fully cached, in the page cache
            let proxy = try CoreBench.best(of: 2) { try Clients.download(curl: curl, urls: urls(proxyURL), expected: sizes.big) }
            let web = try NginxProcess(binary: nginx, root: www, workDirectory: temp.appending("nginx"))
            defer { web.stop() }
            let nginxURL = "http://127.0.0.1:\(web.port)/big.bin"
            _ = try Clients.download(curl: curl, urls: [nginxURL], expected: sizes.big)  // into the page cache
            let reference = try CoreBench.best(of: 2) { try Clients.download(curl: curl, urls: urls(nginxURL), expected: sizes.big) }
            let total = sizes.big * Int64(Self.proxyClients)
            return [Figure(name: "proxy, warm, \(Self.proxyClients) connections on one \(CoreBench.human(sizes.big)) file",
                           measured: Self.megabytes(total, proxy), reference: "nginx, sendfile: " + Self.megabytes(total, reference),
                           ratio: reference / proxy, unit: "x throughput", target: .atLeast(0.9))]
        }
        table.measure([.memory], "daemon peak memory") {
            let proxyURLs = try (0..<Self.memoryReaders).map { try daemon.proxyURL(for: origin.url("/rss/p\($0).bin")) }
            let reset = daemon.resetPeakMemory()
            _ = try Readers.concurrently(2) { side in
                if side == 0 {
                    _ = try Readers.concurrently(Self.memoryReaders) { _ = try MountBench.readWhole(mnt + "/m\($0).bin", expected: sizes.rss) }
                } else {
                    _ = try Clients.download(curl: curl, urls: proxyURLs, expected: sizes.rss)
                }
            }
            let peak = try daemon.peakMemory()
            return [Figure(name: "daemon peak RSS, \(Self.memoryReaders) mount readers + \(Self.memoryReaders) proxy clients, cold",
                           measured: String(format: "%.1f MiB", Double(peak) / 1048576) + (reset ? "" : " (peak since start: clear_refs refused)"),
                           reference: "VmHWM of the daemon", ratio: Double(peak) / 1048576, unit: "MiB", target: .atMost(100))]
        }
        // Phase 3: without FUSE passthrough, as a mount run by a user (not root) reads a warm
        // file, and as every partly cached file is read: through the daemon.
        if !only.isDisjoint(with: [.nopass, .players, .restart]) {
            daemon.unmount()
            do {
                try measureWithoutPassthrough(into: &table, binary: binary, origin: origin, temp: temp, www: www,
                                              cacheSize: cacheSize, big: sizes.big)
            } catch {
                table.measure([.nopass, .players, .restart], "mount without passthrough") { throw error }
            }
        }
        daemon.unmount()
        print(table.render())
    }

    /// Reads of each kind behind a warm figure without passthrough; the best of each counts. A
    /// read with the page cache dropped varies by half from one to the next on this VM's disk
    /// (0.33–0.6 s for the same plain GiB): two were too few for the best to be the disk's.
    static let warmRounds = 4

    /// The warm figures of a mount with `--no-passthrough` on the same cache: one 1 GiB file, and
    /// eight players on eight files of an eighth of it at once, each against plain files of the
    /// same bytes on the same disk, the page cache dropped before each read.
    private func measureWithoutPassthrough(into table: inout FigureTable, binary: String, origin: OriginServer, temp: TemporaryDirectory,
                                           www: String, cacheSize: Int64, big: Int64) throws {
        guard Readers.canDropPageCache else { throw ValidationError("skipped: dropping the page cache needs root") }
        let players = Self.players, each = big / Int64(players)
        for i in 0..<players {
            origin.setGeneratedFile("/players/p\(i).bin", length: each, seed: 0x9000 + UInt64(i))
            try ProxyBench.writeGenerated(path: www + "/p\(i).bin", length: each, seed: 0x9000 + UInt64(i))
        }
        if !FileManager.default.fileExists(atPath: www + "/big.bin") {
            try ProxyBench.writeGenerated(path: www + "/big.bin", length: big, seed: 0xB16)
        }
        let entries = ["big.bin=\(origin.url("/big.bin"))"] + (0..<players).map { "p\($0).bin=\(origin.url("/players/p\($0).bin"))" }
        let start = {
            try MountDaemon(binary: binary, mountpoint: temp.appending("mnt-nopass"), cacheDirectory: temp.appending("cache"),
                            cacheSize: cacheSize, entries: entries, logFile: temp.appending("mount-nopass.log"),
                            extraArguments: ["--no-passthrough"])
        }
        var daemon = try start()
        defer { daemon.unmount() }
        let mnt = daemon.mountpoint
        // Fill the cache (big.bin may be there from the loopback figure already).
        _ = try MountBench.readWhole(mnt + "/big.bin", expected: big)
        _ = try Readers.concurrently(players) { _ = try MountBench.readWhole(mnt + "/p\($0).bin", expected: each) }
        try daemon.waitUntilCached(url: origin.url("/big.bin"), length: big)
        for i in 0..<players { try daemon.waitUntilCached(url: origin.url("/players/p\(i).bin"), length: each) }

        // A restart: bytes from before it are served once their checksums were checked.
        table.measure([.restart], "mount, first read of a cached file after a restart") {
            daemon.unmount()
            try Readers.dropPageCache()
            let plain = try MountBench.readWhole(www + "/big.bin", expected: big)
            daemon = try start()
            try Readers.dropPageCache()
            let t = try MountBench.readWhole(mnt + "/big.bin", expected: big)
            return [Figure(name: "mount, first read of a cached \(CoreBench.human(big)) after a restart (every slice checked), page cache dropped",
                           measured: Self.seconds(t) + ", " + Self.megabytes(big, t),
                           reference: "plain file, same disk: " + Self.seconds(plain) + ", " + Self.megabytes(big, plain),
                           ratio: plain / t, unit: "x throughput", target: .atLeast(0.33))]
        }

        table.measure([.nopass], "mount --no-passthrough, warm sequential") {
            var plain = Double.infinity, t = Double.infinity
            for _ in 0..<Self.warmRounds {
                try Readers.dropPageCache()
                plain = min(plain, try MountBench.readWhole(www + "/big.bin", expected: big))
                try Readers.dropPageCache()
                t = min(t, try MountBench.readWhole(mnt + "/big.bin", expected: big))
            }
            return [Figure(name: "mount --no-passthrough, warm sequential \(CoreBench.human(big)), page cache dropped",
                           measured: Self.seconds(t) + ", " + Self.megabytes(big, t),
                           reference: "plain file, same disk: " + Self.seconds(plain) + ", " + Self.megabytes(big, plain),
                           ratio: plain / t, unit: "x throughput", target: .atLeast(0.9))]
        }
        table.measure([.players], "mount --no-passthrough, \(players) warm readers at once") {
            var plain = Double.infinity, t = Double.infinity
            for _ in 0..<Self.warmRounds {
                try Readers.dropPageCache()
                plain = min(plain, try Readers.concurrently(players) { _ = try MountBench.readWhole(www + "/p\($0).bin", expected: each) })
                try Readers.dropPageCache()
                t = min(t, try Readers.concurrently(players) { _ = try MountBench.readWhole(mnt + "/p\($0).bin", expected: each) })
            }
            return [Figure(name: "mount --no-passthrough, \(players) readers of \(players) warm \(CoreBench.human(each)) files at once, page cache dropped",
                           measured: Self.seconds(t) + ", " + Self.megabytes(big, t),
                           reference: "\(players) plain files at once: " + Self.seconds(plain) + ", " + Self.megabytes(big, plain),
                           ratio: plain / t, unit: "x throughput", target: .atLeast(0.9))]
        }
    }

    /// Cold random reads through the mount, timed one by one, against one round trip plus the
    /// transfer, at the link's rate, of what the kernel asked the daemon for (the bytes the
    /// kernel holds afterwards, per read: readahead included).
    private func measureRandomReads(path: String, length: Int64, emulation: LinkEmulation?) throws -> Figure {
        var rng = SplitMix64(state: 0xC0FFEE)
        var slots = Array(0..<Int64(randomReads))
        slots.shuffle(using: &rng)
        // Within the first 512 KiB of a slot: the gap to any neighbour's read stays over 1 MiB.
        let offsets = slots.map { $0 * Self.randomSlot + Int64.random(in: 0..<128, using: &rng) * 4096 }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ValidationError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let latencies = try MountBench.randomReadLatencies(fd: fd, path: path, offsets: offsets, length: Self.randomReadLength)
        let resident = Readers.residentBytes(fd: fd, length: length)
        let asked = resident.map { Double($0) / Double(offsets.count) } ?? Double(Self.randomReadLength)
        let rate = [emulation?.bytesPerSecondPerConnection, emulation?.bytesPerSecondShared].compactMap { $0 }.min()
        let reference = (emulation?.roundTrip ?? 0) + (rate.map { asked / $0 } ?? 0)
        let p50 = MountBench.percentile(latencies, 0.5), p99 = MountBench.percentile(latencies, 0.99)
        let askedText = String(format: "%.0f KiB", asked / 1024) + (resident == nil ? " (assumed: mincore failed)" : " asked per read")
        let overLink = Self.over(emulation)
        return Figure(name: "mount, cold random 64 KiB reads \(overLink) (\(randomReads))",
                      measured: String(format: "p50 %.1f ms, p99 %.1f ms", p50 * 1000, p99 * 1000),
                      reference: reference > 0 ? "RTT + \(askedText): " + String(format: "%.1f ms", reference * 1000) : "none without a link",
                      ratio: reference > 0 ? p50 / reference : nil, unit: "x (p50)", target: .atMost(1.3))
    }

    /// The side-by-side random reads: one per slot of `sparseSlot`, in the first 512 KiB of
    /// it, slots in shuffled order.
    static func sparseOffsets() -> [Int64] {
        var rng = SplitMix64(state: 0x5BA)
        return Array(0..<Int64(rcloneRandomReads)).shuffled(using: &rng)
            .map { $0 * sparseSlot + Int64.random(in: 0..<128, using: &rng) * 4096 }
    }

    /// A curl measurement of the link against what the link allows: one round trip, then the
    /// bytes at `rate` (nil: no rate limit, nothing to compare).
    private static func calibration(_ name: String, bytes: Int64, seconds t: Double, rate: Double?, roundTrip: Double) -> Figure {
        let ideal = rate.map { roundTrip + Double(bytes) / $0 }
        return Figure(name: name, measured: Self.seconds(t) + ", " + Self.mbit(bytes, t),
                      reference: ideal.map { String(format: "link: %.0f Mbit/s after %.0f ms: ", rate! * 8 / 1e6, roundTrip * 1000) + Self.seconds($0) }
                          ?? "no rate limit",
                      ratio: ideal.map { $0 / t }, unit: "x link speed", target: ideal == nil ? nil : Figure.Target.within(0.9, 1.1))
    }

    /// Where the first phase's bytes travel, for the figures' names.
    static func over(_ emulation: LinkEmulation?) -> String {
        emulation == nil ? "over loopback (no link)" : "over the link"
    }

    static func seconds(_ t: Double) -> String { String(format: "%.3f s", t) }
    static func mbit(_ bytes: Int64, _ t: Double) -> String { String(format: "%.0f Mbit/s", Double(bytes) * 8 / t / 1e6) }
    static func megabytes(_ bytes: Int64, _ t: Double) -> String { String(format: "%.0f MB/s", Double(bytes) / t / 1e6) }
}

/// The figures of `datapath`, as `--only` names them.
enum DataPathFigure: String, CaseIterable {
    case calibration, link, random, readers, loopback, cpu, warm, proxy, memory, nopass, players, restart, rclone
}

/// The emulated link's knobs, as command-line options.
struct LinkOptions: ParsableArguments {
    @Option(help: "Emulated one-way delay in milliseconds; the response head waits twice this (0: none).")
    var oneWayDelay: Double = 10

    @Option(help: "Emulated rate per connection in Mbit/s (0: unlimited).")
    var linkRate: Double = 200

    @Option(help: "Emulated rate shared by all connections in Mbit/s (0: unlimited).")
    var sharedRate: Double = 800

    @Flag(help: "No link emulation at all: every figure over plain loopback.")
    var noLink = false

    func validate() throws {
        guard oneWayDelay >= 0, oneWayDelay <= 10_000, linkRate >= 0, sharedRate >= 0 else {
            throw ValidationError("--one-way-delay must be 0...10000 ms and the rates 0 or more")
        }
    }

    var emulation: LinkEmulation? {
        noLink || (oneWayDelay == 0 && linkRate == 0 && sharedRate == 0)
            ? nil : .milliseconds(oneWayDelay, perConnectionMbit: linkRate, sharedMbit: sharedRate)
    }

    static func describe(_ e: LinkEmulation?) -> String {
        guard let e else { return "none (plain loopback)" }
        func rate(_ r: Double?) -> String { r.map { String(format: "%.0f Mbit/s", $0 * 8 / 1e6) } ?? "unlimited" }
        return String(format: "%.1f ms one way, ", e.oneWayDelay * 1000)
            + "\(rate(e.bytesPerSecondPerConnection)) per connection, \(rate(e.bytesPerSecondShared)) shared"
    }
}
