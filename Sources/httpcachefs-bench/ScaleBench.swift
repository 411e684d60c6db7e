import ArgumentParser
import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench scale`: how time and memory grow with the number of files, at 1k, 10k and
/// 100k (`--sizes`), for the three places where a cache meets many files:
/// - a listing tree (`--index` over nginx JSON listings of 1000 files per folder, from a loopback
///   origin): `ls -lR` of the mount, timed, with the daemon's peak memory over it;
/// - a cache holding that many files (4 KiB each, filled by an in-process engine): `cache ls`
///   timed, and a daemon's start (`mount` until usable) timed, with its memory after;
/// - eviction at the cap: 1000 new files opened into a cache full of that many (written back to
///   disk first), timed (each new file evicts an old one);
/// - the status page over that cache (a daemon with its proxy): `status.json?view=summary` (what
///   the page polls) and one page of 100 files of a folder, each timed over loopback (best of
///   three), and the page drawn by headless Chromium (if installed; `ChromiumPage`): the page's
///   own mark of its first full drawing, from the navigation's start (best of three). These
///   should stay flat (goal: under 1 s at 100k files); their per-item figure is simply time /
///   files. `--status-only` measures this step alone (the cache is still filled).
///
/// Per-item cost is the figure that must not grow from the smallest size to the largest (target
/// ≤ 1.5): the time above the same step with no files (an empty tree, an empty cache, measured
/// in the same run), divided by the number of files, so a fixed cost (a process start) neither
/// hides a quadratic term nor makes one up; for eviction, the time per new file. `--svg FILE`
/// draws the per-item curves.
struct ScaleBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Time and memory against the number of files: listing trees, cache ls, daemon start, eviction at the cap.",
        discussion: "Quick run: --sizes 1000,3000,10000. Needs /dev/fuse (root or fuse group) for the mount figures."
    )

    @Option(help: "Numbers of files, comma-separated, smallest first.")
    var sizes: String = "1000,10000,100000"

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark; build with 'swift build -c release').")
    var binary: String?

    @Option(help: "Write the per-item curves as an SVG picture to this file.")
    var svg: String?

    @Flag(help: "Only the status page step: fill the cache, time status.json and the page's drawing.")
    var statusOnly = false

    @Flag(help: "Caches built fast (a seed of 1000 files, the rest written into the index with hard-linked data files) and only their figures: RSS after mount, mount start, cache ls to its first line and end, the status summary. Sizes up to 1000000.")
    var directFill = false

    @Flag(help: "With --direct-fill: only the restart step (a stop right after a start, the daemon's first seconds; after a clean stop and after kill -9).")
    var restartOnly = false

    @Option(help: "With --direct-fill: the small-file mount's --entry-memory (default: the daemon's own), e.g. 4M for a folder larger than the entry budget, where every open loads its entry from the index.")
    var entryMemory: String?

    static let filesPerFolder = 1000
    static let cachedFileLength = 4096
    static let newFilesAtCap = 1000
    static let target = 1.5

    /// One measured point of a curve.
    struct Point {
        var items: Int
        var seconds: Double
        var memory: Int64?
        /// Seconds per file, fixed costs taken out.
        var perItem: Double
        /// False when the time above the step with no files is within that step's own noise
        /// (a quarter of it, or 10 ms): its per-item figure would be noise divided by the files.
        var measurable = true

        mutating func above(_ base: Double) {
            perItem = max(0, seconds - base) / Double(items)
            measurable = seconds - base >= max(0.010, 0.25 * base)
        }
    }

    mutating func run() async throws {
        let counts = try sizes.split(separator: ",").map { part -> Int in
            guard let n = Int(part.trimmingCharacters(in: .whitespaces)), n >= Self.filesPerFolder else {
                throw ValidationError("--sizes: '\(part)' is not a number of at least \(Self.filesPerFolder)")
            }
            return n
        }
        guard counts.count >= 2, counts == counts.sorted() else { throw ValidationError("--sizes: at least two, smallest first") }
        let binary = binary ?? CoreBench.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no httpcachefs binary at \(binary); build it (swift build -c release) or pass --binary")
        }
        if directFill { return try await Self.directFillRun(counts: counts, binary: binary, restartOnly: restartOnly, entryMemory: entryMemory) }
        print("scale benchmark: \(counts.map(String.init).joined(separator: ", ")) files, binary \(binary)")
        var curves: [(String, [Point])] = [("ls -lR of an --index tree", []), ("cache ls", []), ("daemon start", []), ("new file at the cap (evicts one)", []),
                                           ("status.json?view=summary", []), ("status.json, a page of 100", []),
                                           ("summary, daemon CPU", []), ("a page of 100, daemon CPU", []), ("status page drawn (Chromium)", [])]
        let base = statusOnly ? (tree: 0, ls: 0, start: 0) : try Self.baselines(binary: binary)
        if !statusOnly {
            print(String(format: "  with no files: ls -lR %.3f s, cache ls %.3f s, daemon start %.3f s", base.tree, base.ls, base.start))
        }
        for n in counts {
            let temp = TemporaryDirectory(prefix: "httpcachefs-bench-scale")
            defer { temp.remove() }
            let origin = try OriginServer()
            defer { origin.stop() }
            if statusOnly {
                _ = try await Self.fill(files: n, origin: origin, directory: temp.appending("cache"))
                let status = try Self.statusPage(files: n, directory: temp.appending("cache"), origin: origin, binary: binary, temp: temp)
                for (i, point) in status.enumerated() { curves[4 + i].1.append(point) }
                print("  \(n) files measured")
                continue
            }
            var tree = try Self.listingTree(files: n, origin: origin, binary: binary, temp: temp)
            tree.above(base.tree)
            curves[0].1.append(tree)
            var (ls, start, evict, status) = try await Self.cachedFiles(files: n, origin: origin, binary: binary, temp: temp)
            ls.above(base.ls)
            start.above(base.start)
            curves[1].1.append(ls)
            curves[2].1.append(start)
            curves[3].1.append(evict)
            for (i, point) in status.enumerated() { curves[4 + i].1.append(point) }
            print("  \(n) files measured")
        }
        var rows = [["", "files", "seconds", "per item", "memory", "per-item growth"]]
        for (name, points) in curves where !points.isEmpty {
            for (i, p) in points.enumerated() {
                rows.append([i == 0 ? name : "", "\(p.items)", String(format: "%.3f", p.seconds), Self.perItem(p),
                             p.memory.map(CoreBench.human) ?? "", i == points.count - 1 ? Self.growth(points) : ""])
            }
        }
        print(CoreBench.table(rows))
        if let svg {
            try Self.svg(curves).write(toFile: svg, atomically: true, encoding: .utf8)
            print("curves: \(svg)")
        }
    }

    static func perItem(_ p: Point) -> String {
        String(format: "%.1f µs", p.perItem * 1e6) + (p.measurable ? "" : " (noise)")
    }

    /// From the smallest point whose time stands above the no-file step's noise: a 1k point within
    /// it would make any growth look enormous (a few microseconds of noise over 1000 files).
    static func growth(_ points: [Point]) -> String {
        guard let first = points.first(where: \.measurable), first.items < points.last!.items else {
            return "not measurable (within the noise of the step with no files)"
        }
        let from = first.items == points.first!.items ? "" : " from \(first.items)"
        return String(format: "%.2f x%@ (target <= %.1f)", points.last!.perItem / max(first.perItem, 1e-12), from, target)
    }

    /// The steps with no files: `ls -lR` of an empty tree, `cache ls` of an empty cache, a daemon's
    /// start over it (best of three each).
    static func baselines(binary: String) throws -> (tree: Double, ls: Double, start: Double) {
        var tree = Double.infinity, ls = Double.infinity, start = Double.infinity
        for _ in 0..<3 {
            let temp = TemporaryDirectory(prefix: "httpcachefs-bench-scale")
            defer { temp.remove() }
            let origin = try OriginServer()
            defer { origin.stop() }
            tree = min(tree, try listingTree(files: 0, origin: origin, binary: binary, temp: temp).seconds)
            let dir = temp.appending("cache")
            origin.setGeneratedFile("/one.bin", length: Int64(cachedFileLength), seed: 1)
            _ = try Spawned.run(binary, ["cache", "ls", "--cache-dir", dir])   // makes the cache
            ls = min(ls, try Spawned.time(binary, ["cache", "ls", "--cache-dir", dir]))
            let began = DispatchTime.now().uptimeNanoseconds
            let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt2"), cacheDirectory: dir, cacheSize: 64 << 30,
                                         entries: ["one.bin=" + origin.url("/one.bin")], logFile: temp.appending("start.log"), proxy: false)
            start = min(start, Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9)
            daemon.unmount()
        }
        return (tree, ls, start)
    }

    // MARK: listing tree

    /// `files` files in folders of 1000 under one root, as nginx JSON listings; `ls -lR` of the
    /// mount, timed, and the daemon's peak memory over it (and at rest before it).
    static func listingTree(files: Int, origin: OriginServer, binary: String, temp: TemporaryDirectory) throws -> Point {
        let folders = (files + filesPerFolder - 1) / filesPerFolder   // none for an empty tree
        let date = "Mon, 23 Nov 2026 10:00:00 GMT"
        var root: [String] = []
        for d in 0..<folders {
            let name = String(format: "season%04d", d)
            root.append(#"{"name":"\#(name)","type":"directory","mtime":"\#(date)"}"#)
            let count = min(filesPerFolder, files - d * filesPerFolder)
            let items = (0..<count).map { f in
                #"{"name":"episode\#(String(format: "%05d", f)).mkv","type":"file","mtime":"\#(date)","size":\#(1_000_000 + f)}"#
            }
            origin.setFile("/tree/\(name)/", data: Array(("[" + items.joined(separator: ",\n") + "]").utf8), contentType: "application/json")
        }
        origin.setFile("/tree/", data: Array(("[" + root.joined(separator: ",\n") + "]").utf8), contentType: "application/json")
        let mnt = temp.appending("mnt")
        let daemon = try MountDaemon(binary: binary, mountpoint: mnt, cacheDirectory: temp.appending("tree-cache"), cacheSize: 1 << 30,
                                     entries: [], logFile: temp.appending("tree.log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/tree/")])
        defer { daemon.unmount() }
        _ = daemon.resetPeakMemory()
        let seconds = try Spawned.time("/bin/ls", ["-lR", mnt])
        let memory = try daemon.peakMemory()
        var seen = 0
        var problems: [String] = []
        for folder in (try? FileManager.default.contentsOfDirectory(atPath: mnt)) ?? [] {
            do { seen += try FileManager.default.contentsOfDirectory(atPath: mnt + "/" + folder).filter { $0.hasSuffix(".mkv") }.count } catch {
                problems.append("\(folder): \(error)")
            }
        }
        guard seen == files else {
            let top = (try? FileManager.default.contentsOfDirectory(atPath: mnt)) ?? []
            let log = (try? String(contentsOfFile: temp.appending("tree.log"), encoding: .utf8)) ?? ""
            throw ValidationError("the mount shows \(seen) files, not \(files); at its top: \(top.prefix(5)) \(problems.prefix(3)); log: \(log.suffix(2000))")
        }
        return Point(items: files, seconds: seconds, memory: memory, perItem: 0)
    }

    // MARK: a cache of many files

    /// Fills a cache with `files` files of 4 KiB (an in-process engine), then times `cache ls`, a
    /// daemon's start over it, and 1000 new files opened at the cap.
    static func cachedFiles(files: Int, origin: OriginServer, binary: String, temp: TemporaryDirectory) async throws -> (Point, Point, Point, [Point]) {
        let dir = temp.appending("cache")
        let used = try await fill(files: files, origin: origin, directory: dir)
        let source = CurlRangeSource(configuration: FetcherConfiguration(clock: .system, userAgent: "httpcachefs-bench"), logger: Logger(label: "bench"))
        defer { source.shutdown() }
        let ls = try Spawned.time(binary, ["cache", "ls", "--cache-dir", dir])
        let started = DispatchTime.now().uptimeNanoseconds
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt2"), cacheDirectory: dir, cacheSize: 64 << 30,
                                     entries: ["one.bin=" + origin.url("/c/0000000.bin")], logFile: temp.appending("start.log"), proxy: false)
        let start = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let memory = try daemon.peakMemory()
        daemon.unmount()
        let status = try statusPage(files: files, directory: dir, origin: origin, binary: binary, temp: temp)

        // At the cap: every new file's bytes need an old file's room. Written back first, as in a
        // cache that has been there a while: evicting bytes still only in the page cache frees no
        // blocks, so without this the small sizes (filled seconds ago) would evict for nothing
        // what the large ones (filled minutes ago) pay the file system for.
        sync()
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: dir, capacity: used, freeSpaceFloor: 0, engineClock: .system), source: source,
                                     layers: FetchLayers.standard())
        let before = DispatchTime.now().uptimeNanoseconds
        try await open(engine, origin: origin, range: files..<(files + newFilesAtCap))
        let opened = DispatchTime.now().uptimeNanoseconds
        engine.shutdown()   // the writes (and the evictions they need) done
        let evictSeconds = Double(DispatchTime.now().uptimeNanoseconds - before) / 1e9
        print(String(format: "  %d files: at the cap, %d opens took %.3f s, the engine's stop after them (writes, evictions) %.3f s; %d slices evicted",
                     files, newFilesAtCap, Double(opened - before) / 1e9, Double(DispatchTime.now().uptimeNanoseconds - opened) / 1e9,
                     engine.metrics.totals.evictions))
        // The engine's index is closed by its stop: what is left, read from the index as `cache ls` does.
        guard let pages = try CacheSnapshotPages(configuration: CacheConfiguration(directory: dir, engineClock: .system)) else {
            throw ValidationError("no index in \(dir) after the stop")
        }
        var left: Int64 = 0
        var cursor: CacheSnapshotPages.Cursor?
        repeat {
            let page = try pages.page(after: cursor)
            left += page.entries.reduce(0) { $0 + $1.cachedBytes }
            cursor = page.next
        } while cursor != nil
        guard left <= used else { throw ValidationError("the cache is over its cap after eviction") }
        return (Point(items: files, seconds: ls, memory: nil, perItem: 0), Point(items: files, seconds: start, memory: memory, perItem: 0),
                Point(items: files, seconds: evictSeconds, memory: nil, perItem: evictSeconds / Double(newFilesAtCap)), status)
    }

    /// Serves `files` files of 4 KiB (and the 1000 the cap step opens next) under `/c/` and
    /// caches the first `files` in `directory` with an in-process engine; returns the bytes cached.
    static func fill(files: Int, origin: OriginServer, directory: String) async throws -> Int64 {
        for i in 0..<(files + newFilesAtCap) {
            origin.setGeneratedFile(String(format: "/c/%07d.bin", i), length: Int64(cachedFileLength), seed: UInt64(i))
        }
        let source = CurlRangeSource(configuration: FetcherConfiguration(clock: .system, userAgent: "httpcachefs-bench"), logger: Logger(label: "bench"))
        defer { source.shutdown() }
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: directory, capacity: 64 << 30, freeSpaceFloor: 0, engineClock: .system), source: source,
                                     layers: FetchLayers.standard())
        try await open(engine, origin: origin, range: 0..<files)
        // Listed before the stop: the list reads the index, closed by it.
        let listed = engine.list()
        engine.shutdown()
        guard listed.count == files else { throw ValidationError("the cache holds \(listed.count) files, not \(files)") }
        return listed.reduce(0) { $0 + $1.cachedBytes }
    }

    // MARK: the status page

    /// A daemon with its proxy over the cache of `files` files (all in one folder, `/c/`: the
    /// largest page a folder can be asked for): the summary and a page of 100 timed over loopback
    /// (best of three), and the page's first drawing in headless Chromium (skipped without it).
    static func statusPage(files: Int, directory: String, origin: OriginServer, binary: String, temp: TemporaryDirectory) throws -> [Point] {
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt3"), cacheDirectory: directory, cacheSize: 64 << 30,
                                     entries: ["one.bin=" + origin.url("/c/0000000.bin")], logFile: temp.appending("status.log"))
        defer { daemon.unmount() }
        guard let runtime = FileManager.default.contents(atPath: directory + "/proxy.json"),
              let object = try? JSONSerialization.jsonObject(with: runtime) as? [String: Any], let port = object["port"] as? Int else {
            throw ValidationError("the daemon over \(directory) left no proxy.json with its port")
        }
        // status.json and the page are owner-only: the key from the same file.
        let owner = (object["controlKey"] as? String).map { [("X-Httpcachefs-Control", $0)] } ?? []
        // Wall time (best of three) and the daemon's CPU time per request (the mean of the three,
        // from /proc: 10 ms ticks): on a machine shared with other work the wall time is mostly
        // waiting for a core, the CPU time is the work.
        var cpu: [Double] = []
        func best(_ path: String) throws -> (Double, Int) {
            var seconds = Double.infinity, size = 0
            let cpuBefore = try daemon.cpuSeconds()
            defer { cpu.append(((try? daemon.cpuSeconds()) ?? cpuBefore) - cpuBefore) }
            for _ in 0..<3 {
                let began = DispatchTime.now().uptimeNanoseconds
                let r = try RawHTTP.request(port: port, path: path, headers: owner, timeout: 120)
                seconds = min(seconds, Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9)
                guard r.status == 200 else { throw ValidationError("GET \(path): HTTP \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))") }
                size = r.body.count
            }
            return (seconds, size)
        }
        let (summary, summaryBytes) = try best("/.httpcachefs/status.json?view=summary")
        guard let body = try? RawHTTP.request(port: port, path: "/.httpcachefs/status.json?view=summary", headers: owner, timeout: 120).body,
              let doc = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let folder = (doc["folders"] as? [[String: Any]])?.first?["id"] as? String else {
            throw ValidationError("the summary names no folder")
        }
        let (page, pageBytes) = try best("/.httpcachefs/status.json?folder=\(folder)&page=\(files / 200)")
        let (summaryCPU, pageCPU) = (cpu[0] / 3, cpu[1] / 3)
        var points = [Point(items: files, seconds: summary, memory: nil, perItem: summary / Double(files)),
                      Point(items: files, seconds: page, memory: nil, perItem: page / Double(files)),
                      Point(items: files, seconds: summaryCPU, memory: nil, perItem: summaryCPU / Double(files)),
                      Point(items: files, seconds: pageCPU, memory: nil, perItem: pageCPU / Double(files))]
        var drawn = "not measured (no chromium)"
        if let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") {
            // One browser for the size, driven over the DevTools protocol (`ChromiumPage`), the
            // status page loaded three times (the first also warms the browser up); the figure is the page's own mark (`data-first-draw-ms`: navigation start to its
            // first full drawing, the summary and the open folder's page fetched), best of three.
            let browser = try ChromiumPage(executable: chromium, profile: temp.appending("chromium"), width: 1280, height: 800)
            defer { browser.quit() }
            var best: ChromiumPage.Drawn?
            for _ in 0..<3 {
                let d = try browser.draw("http://127.0.0.1:\(port)/.httpcachefs/?key=" + (owner.first?.1 ?? ""))
                if best == nil || d.pageMilliseconds < best!.pageMilliseconds { best = d }
            }
            let d = best!
            // One folder, opened at once (a cache of one folder): its first page of 100 drawn.
            guard d.folderRows == 1, d.fileRows == min(files, StatusView.defaultPageSize) else {
                throw ValidationError("the status page drew \(d.folderRows) folder rows and \(d.fileRows) file rows, not 1 and \(min(files, 100)): \(d.dataset)")
            }
            let seconds = d.pageMilliseconds / 1000
            points.append(Point(items: files, seconds: seconds, memory: nil, perItem: seconds / Double(files)))
            drawn = String(format: "%.0f ms by the page's clock (%.0f ms from navigation to its mark seen)", d.pageMilliseconds, d.wallSeconds * 1000)
        }
        print(String(format: "  %d files: status.json summary %.1f ms (%d bytes; daemon CPU %.0f ms), a page of 100 %.1f ms (%d bytes; daemon CPU %.0f ms), page drawn ",
                     files, summary * 1000, summaryBytes, summaryCPU * 1000, page * 1000, pageBytes, pageCPU * 1000) + drawn)
        return points
    }

    /// Opens (and so caches: each file fits the first fetch) the files numbered `range`, 32 at a time.
    static func open(_ engine: CacheEngine, origin: OriginServer, range: Range<Int>) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = range.lowerBound
            func add() {
                let url = origin.url(String(format: "/c/%07d.bin", next))
                group.addTask { _ = try await engine.open(url: url) }
                next += 1
            }
            while next < range.upperBound && next < range.lowerBound + 32 { add() }
            while try await group.next() != nil { if next < range.upperBound { add() } }
        }
    }

    // MARK: picture

    /// Per-item cost (µs) against files, both on log scales (the curves lie orders of magnitude
    /// apart), one line per curve.
    static func svg(_ curves: [(String, [Point])]) -> String {
        let w = 640.0, h = 360.0, left = 60.0, right = 220.0, top = 20.0, bottom = 40.0
        let all = curves.flatMap(\.1)
        let xs = all.map { log10(Double($0.items)) }
        let ys = all.map { log10(max($0.perItem * 1e6, 0.1)) }
        let (x0, x1) = (xs.min() ?? 3, max((xs.max() ?? 5), (xs.min() ?? 3) + 0.1))
        let (y0, y1) = (floor(ys.min() ?? 0), max(ceil(ys.max() ?? 1), floor(ys.min() ?? 0) + 1))
        func px(_ items: Int) -> Double { left + (log10(Double(items)) - x0) / (x1 - x0) * (w - left - right) }
        func py(_ us: Double) -> Double { h - bottom - (log10(max(us, 0.1)) - y0) / (y1 - y0) * (h - top - bottom) }
        var out = #"<svg xmlns="http://www.w3.org/2000/svg" width="\#(Int(w))" height="\#(Int(h))" font-family="sans-serif" font-size="11">"#
        out += #"<rect width="100%" height="100%" fill="white"/>"#
        out += #"<line x1="\#(left)" y1="\#(h - bottom)" x2="\#(w - right)" y2="\#(h - bottom)" stroke="black"/><line x1="\#(left)" y1="\#(top)" x2="\#(left)" y2="\#(h - bottom)" stroke="black"/>"#
        for p in curves.first?.1 ?? [] {
            out += #"<text x="\#(px(p.items))" y="\#(h - bottom + 16)" text-anchor="middle">\#(p.items)</text>"#
        }
        for e in Int(y0)...Int(y1) {
            let v = pow(10, Double(e))
            out += #"<text x="\#(left - 6)" y="\#(py(v) + 4)" text-anchor="end">\#(v < 1 ? String(v) : String(Int(v)))</text>"#
            out += ##"<line x1="\##(left)" y1="\##(py(v))" x2="\##(w - right)" y2="\##(py(v))" stroke="#e3e6ec"/>"##
        }
        out += #"<text x="\#((left + w - right) / 2)" y="\#(h - 6)" text-anchor="middle">files (log scale)</text>"#
        out += #"<text x="14" y="\#((top + h - bottom) / 2)" transform="rotate(-90 14 \#((top + h - bottom) / 2))" text-anchor="middle">µs per file (log scale)</text>"#
        let colors = ["#2f7d4f", "#1f5fa8", "#e69500", "#b42318"]
        for (i, (name, points)) in curves.enumerated() {
            let color = colors[i % colors.count]
            let path = points.map { "\(px($0.items)),\(py($0.perItem * 1e6))" }.joined(separator: " ")
            out += #"<polyline fill="none" stroke="\#(color)" stroke-width="2" points="\#(path)"/>"#
            for p in points { out += #"<circle cx="\#(px(p.items))" cy="\#(py(p.perItem * 1e6))" r="3" fill="\#(color)"/>"# }
            out += #"<rect x="\#(w - right + 12)" y="\#(top + Double(i) * 18)" width="10" height="10" fill="\#(color)"/><text x="\#(w - right + 28)" y="\#(top + Double(i) * 18 + 9)">\#(name)</text>"#
        }
        return out + "</svg>\n"
    }
}
