import ArgumentParser
import CacheCore
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench library`: a media server's scan of a generated library through the mount,
/// against the same scan of a local copy, in one run.
///
/// The library: `--films` films (MKV, MP4 with its index first and last, WebM, made once each
/// with ffmpeg and served under every film's name), each with a poster and subtitles, and a show
/// with seasons; served by the in-process origin as JSON listings behind an emulated home link
/// (20 ms RTT, 50 Mbit/s shared). The MKV and MP4 films are `--film-mb` MB each (default 300: a
/// film's size, where a tool that reads more than it is asked pays for it), made as a media
/// server finds them: H.264 at a film's bitrate (constant, 4 Mbit/s for 10 minutes), the MP4s
/// remuxed from the MKV. The origin serves them from disk and the local copy hard-links them, so
/// the bench holds none of their bytes. Steps, cold (nothing cached) then warm: `find`, `ls -lR`, then
/// Jellyfin's probe of every film (`ffprobe -i FILE -threads 0 -v warning -print_format json
/// -show_streams -show_chapters -show_format`), one after another, then `ffmpegthumbnailer -t 10`
/// on every film where it is installed. Figures: times against the local copy's, and the origin
/// bytes and requests for film bytes against the bytes the probes read of the local copy (strace
/// counts them; goal at most 1.5x), for the probes, the thumbnails alone and the whole scan.
/// Where rclone is installed, the same cold scan through `rclone mount` (`RcloneMount`) of the
/// same library, beside ours (goal: ours at most 0.2x). Then `head -c 1` of every file through a
/// fresh mount (a program on no list: goal at most 64 KiB of origin bytes per file). The figures
/// end in one table.
struct LibraryBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "library",
        abstract: "A media server's scan (find, ls -lR, ffprobe of every film) through the mount against a local copy: times, origin bytes against bytes read.",
        discussion: "Needs ffmpeg, ffprobe, strace and /dev/fuse. Quick run: --films 20."
    )

    @Option(help: "Films in the library (besides the show's episodes).")
    var films = 100

    @Option(help: "Size of each MKV and MP4 film in MB, at a constant bitrate over --seconds (0: small films, ffmpeg's own bitrate).")
    var filmMb = 300

    @Option(help: "Seconds of each MKV and MP4 film (default: 600 with --film-mb, else 20); WebM films are 20 s.")
    var seconds: Int?

    @Option(help: "Seconds of the film played with ffmpeg -re over a 10 Mbit/s link while the scan runs (0: not played).")
    var playSeconds = 30

    @Option(help: "Entries of the one-folder listings timed with ls -l, comma-separated (0: none).")
    var folderSizes = "20000,200000"

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark; build with 'swift build -c release').")
    var binary: String?

    @Option(help: "rclone binary for the cold scan through rclone mount beside ours (default: rclone on PATH; none: that line is left out).")
    var rclone: String?

    static let link = LinkEmulation.milliseconds(10, perConnectionMbit: 0, sharedMbit: 50)
    static let goal = 1.5
    /// Our cold scan's time against rclone mount's.
    static let rcloneGoal = 0.2

    func run() async throws {
        let seconds = self.seconds ?? (filmMb > 0 ? 600 : 20)
        guard films >= 1, seconds >= 2, filmMb >= 0 else { throw ValidationError("--films at least 1, --seconds at least 2, --film-mb at least 0") }
        guard filmMb == 0 || Double(filmMb) * 8 / Double(seconds) >= 0.5 else {
            throw ValidationError("--film-mb \(filmMb) over \(seconds) s is below 0.5 Mbit/s: give more MB or fewer --seconds")
        }
        let binary = binary ?? CoreBench.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no httpcachefs binary at \(binary); build it (swift build -c release) or pass --binary")
        }
        guard let ffmpeg = ExternalTool.find("ffmpeg"), let ffprobe = ExternalTool.find("ffprobe"), let strace = ExternalTool.find("strace") else {
            throw ValidationError("needs ffmpeg, ffprobe and strace (apt-get install ffmpeg strace)")
        }
        let thumbnailer = ExternalTool.find("ffmpegthumbnailer")
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-library")
        defer { temp.remove() }

        print("library benchmark: \(films) films of \(seconds) s\(filmMb > 0 ? " and \(filmMb) MB" : "") and a show, link \(LinkOptions.describe(Self.link)), binary \(binary)")
        let kinds = try Self.makeFilms(ffmpeg: ffmpeg, seconds: seconds, megabytes: filmMb, in: temp.appending("src"))
        let library = Self.layout(films: films, kinds: kinds)
        let local = temp.appending("local")
        for (path, content) in library { try Self.write(content, to: local + "/" + path) }
        let total = library.reduce(Int64(0)) { $0 + $1.content.size }
        print(String(format: "  %d files, %.1f MiB (%@)", library.count, Double(total) / 1048576,
                     kinds.map { String(format: "%@ %.1f MiB", $0.name, Double($0.size) / 1048576) }.joined(separator: ", ")))

        let origin = try OriginServer()
        defer { origin.stop() }
        try Self.serve(library, origin: origin)
        origin.emulateLink(Self.link)
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt"), cacheDirectory: temp.appending("cache"),
                                     cacheSize: 8 << 30, entries: [], logFile: temp.appending("mount.log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/lib/")])
        defer { daemon.unmount() }
        let filmPaths = library.map(\.path).filter { $0.hasSuffix(".mkv") || $0.hasSuffix(".mp4") || $0.hasSuffix(".webm") }.sorted()

        // What the probes read of the local copy, as strace counts it.
        var readLocally: Int64 = 0
        for path in filmPaths { readLocally += try Self.probeReads(strace: strace, ffprobe: ffprobe, file: local + "/" + path) }

        var rows: [[String]] = []
        var steps: [(name: String, run: (String) throws -> Void)] = []   // every step, for the scan through rclone
        var coldSteps: [Double] = []
        var coldScan: Double { coldSteps.reduce(0, +) }
        @discardableResult
        func step(_ name: String, _ run: @escaping (String) throws -> Void) throws -> Int64 {
            steps.append((name, run))
            let l = try Self.timed { try run(local) }
            origin.resetLog()
            let cold = try Self.timed { try run(daemon.mountpoint) }
            coldSteps.append(cold)
            let coldBytes = Self.filmBytes(origin), coldRequests = Self.filmRequests(origin)
            let warm = try Self.timed { try run(daemon.mountpoint) }
            rows.append([name, String(format: "%.2f s", l), String(format: "%.2f s (%.1fx)", cold, cold / max(l, 1e-6)),
                         String(format: "%.2f s (%.1fx)", warm, warm / max(l, 1e-6)),
                         String(format: "%.2f MiB, %d requests", Double(coldBytes) / 1048576, coldRequests)])
            return coldBytes
        }
        try step("find") { root in _ = try Spawned.time("/usr/bin/find", [root]) }
        try step("ls -lR") { root in _ = try Spawned.time("/bin/ls", ["-lR", root]) }
        var probeOrigin: Int64 = 0
        try step("ffprobe every film") { root in
            if root == daemon.mountpoint && probeOrigin == 0 { origin.resetLog() }
            for path in filmPaths {
                _ = try Spawned.time(ffprobe, ["-i", root + "/" + path, "-threads", "0", "-v", "warning", "-print_format", "json",
                                               "-show_streams", "-show_chapters", "-show_format"])
            }
            if root == daemon.mountpoint && probeOrigin == 0 { probeOrigin = max(1, Self.filmBytes(origin)) }
        }
        var thumbnails: (local: Int64, origin: Int64)?
        if let thumbnailer {
            let arguments = { (file: String) in ["-i", file, "-o", temp.appending("thumb.png"), "-t", "10"] }
            var readByThumbnailer: Int64 = 0
            for path in filmPaths {
                readByThumbnailer += try Self.reads(strace: strace, of: thumbnailer, arguments(local + "/" + path), file: local + "/" + path)
            }
            let fetched = try step("ffmpegthumbnailer -t 10") { root in
                for path in filmPaths { _ = try Spawned.time(thumbnailer, arguments(root + "/" + path)) }
            }
            thumbnails = (readByThumbnailer, fetched)
        } else {
            print("  (ffmpegthumbnailer not installed: its step is left out)")
        }
        print(Self.table(header: ["step", "local copy", "mount, cold", "mount, warm", "origin, cold (film bytes)"], rows: rows))
        var figures: [[String]] = []
        func ratioRow(_ name: String, fetched: Int64, read: Int64) {
            let ratio = Double(fetched) / Double(max(read, 1))
            figures.append([name, String(format: "%.2f MiB / %.2f MiB = %.2fx", Double(fetched) / 1048576, Double(read) / 1048576, ratio),
                            String(format: "<= %.1fx", Self.goal), ratio <= Self.goal ? "ok" : "MISSED"])
        }
        ratioRow("probes: origin film bytes / what ffprobe reads of the local copy", fetched: probeOrigin, read: readLocally)
        if let thumbnails {
            ratioRow("thumbnails after the probes: origin film bytes / what ffmpegthumbnailer reads of the local copy",
                     fetched: thumbnails.origin, read: thumbnails.local)
        }
        let scanFetched = probeOrigin + (thumbnails?.origin ?? 0), scanRead = readLocally + (thumbnails?.local ?? 0)
        ratioRow("whole cold scan: origin film bytes / what the scanners read of the local copy", fetched: scanFetched, read: scanRead)
        daemon.unmount()
        if let thumbnailer, let thumbnails {
            let alone = try Self.alone(binary: binary, origin: origin, temp: temp, name: "thumbnails") { root in
                for path in filmPaths { _ = try Spawned.time(thumbnailer, ["-i", root + "/" + path, "-o", temp.appending("thumb.png"), "-t", "10"]) }
            }
            ratioRow("thumbnails alone, cold: origin film bytes / what ffmpegthumbnailer reads of the local copy",
                     fetched: alone, read: thumbnails.local)
        }
        let oneByte = try Self.oneByteOpens(binary: binary, library: library, origin: origin, temp: temp)
        let perFile = Double(oneByte.bytes) / Double(max(oneByte.files, 1))
        figures.append(["a program on no list (head -c 1) opening every file for one byte, cold: origin bytes per file",
                        String(format: "%.1f KiB (%d files, %d requests)", perFile / 1024, oneByte.files, oneByte.requests),
                        "<= 64 KiB", perFile <= 64 * 1024 ? "ok" : "MISSED"])
        if let rclone = rclone ?? RcloneMount.onPath() {
            do {
                let (times, bytes, requests) = try Self.rcloneScan(binary: rclone, steps: steps.map(\.run), library: library,
                                                                   origin: origin, temp: temp)
                let t = times.reduce(0, +)
                let version = RcloneMount.version(binary: rclone) ?? "rclone"
                print("  cold, per step: " + zip(steps.map(\.name), zip(coldSteps, times)).map {
                    String(format: "%@ ours %.2f s, rclone %.2f s", $0.0, $0.1.0, $0.1.1)
                }.joined(separator: "; "))
                print(String(format: "  cold scan (every step above): ours %.2f s, %@ mount (%@) %.2f s; rclone fetched %.2f MiB of film bytes in %d requests",
                             coldScan, version, RcloneMount.describedFlags, t, Double(bytes) / 1048576, requests))
                figures.append(["whole cold scan: time / \(version) mount's", String(format: "%.2f s / %.2f s = %.2fx", coldScan, t, coldScan / max(t, 1e-6)),
                                String(format: "<= %.1fx", Self.rcloneGoal), coldScan <= Self.rcloneGoal * t ? "ok" : "MISSED"])
            } catch {
                print("  (the cold scan through rclone mount failed: \(error))")
            }
        } else {
            print("  (no rclone on PATH: the cold scan through rclone mount is left out; pass --rclone)")
        }
        print(try Self.rescanAfterTurnover(ffprobe: ffprobe, library: library, binary: binary, origin: origin, temp: temp))
        print(Self.table(header: ["figure", "measured", "goal", ""], rows: figures))
        if playSeconds > 0 {
            let film = try Self.playedFilm(seconds: playSeconds, ffmpeg: ffmpeg, temp: temp)
            try Self.serve(library + [("play.mkv", .bytes(film))], origin: origin)   // listed at the root
            try Self.playDuringScan(seconds: playSeconds, film: film, ffmpeg: ffmpeg, ffprobe: ffprobe, library: library,
                                    binary: binary, origin: origin, temp: temp)
            print(try Self.budgetRun(seconds: playSeconds, film: film, ffmpeg: ffmpeg, ffprobe: ffprobe, thumbnailer: thumbnailer,
                                     library: library, binary: binary, origin: origin, temp: temp))
        }
        origin.emulateLink(nil)
        let sizes = try folderSizes.split(separator: ",").compactMap { part -> Int? in
            guard let n = Int(part.trimmingCharacters(in: .whitespaces)), n >= 0 else {
                throw ValidationError("--folder-sizes: '\(part)' is not a number of entries")
            }
            return n > 0 ? n : nil
        }
        var folderRows: [[String]] = []
        for n in sizes { folderRows.append(try Self.bigFolder(entries: n, origin: origin, binary: binary, temp: temp)) }
        if !folderRows.isEmpty {
            print(Self.table(header: ["ls -l of one folder", "local", "warm (goal 2x)", "listing fetched, kernel cold (goal 3x)", "per entry, warm"],
                             rows: folderRows))
        }
    }

    /// `run` (given the mount's root) through a fresh mount on an empty cache: the origin's film bytes.
    static func alone(binary: String, origin: OriginServer, temp: TemporaryDirectory, name: String,
                      _ run: (String) throws -> Void) throws -> Int64 {
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("\(name)-mnt"), cacheDirectory: temp.appending("\(name)-cache"),
                                     cacheSize: 8 << 30, entries: [], logFile: temp.appending("\(name).log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/lib/")])
        defer { daemon.unmount() }
        origin.resetLog()
        try run(daemon.mountpoint)
        return filmBytes(origin)
    }

    /// `head -c 1` of every file of the library (`head` is on no list: an unknown reader) through
    /// a fresh mount on an empty cache: the origin's bytes for files (not listings), per file.
    static func oneByteOpens(binary: String, library: [LibraryFile], origin: OriginServer,
                             temp: TemporaryDirectory) throws -> (files: Int, bytes: Int64, requests: Int) {
        guard let head = ExternalTool.find("head") else { throw ValidationError("needs head (coreutils)") }
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("one-byte-mnt"), cacheDirectory: temp.appending("one-byte-cache"),
                                     cacheSize: 8 << 30, entries: [], logFile: temp.appending("one-byte.log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/lib/")])
        defer { daemon.unmount() }
        origin.resetLog()
        for (path, _) in library { _ = try Spawned.time(head, ["-c", "1", daemon.mountpoint + "/" + path]) }
        let files = origin.requests.filter { !$0.pathWithoutQuery.hasSuffix("/") }
        return (library.count, files.reduce(Int64(0)) { $0 + $1.bodyBytes }, files.count)
    }

    /// The same cold scan (`steps`, each given the mount's root) through a fresh `rclone mount` of
    /// the library served again under `/rlib/` with HTML listings (rclone's http backend follows
    /// links): other URLs, so its cache starts cold as ours did. Returns each step's time and the
    /// film bytes and requests it cost the origin.
    static func rcloneScan(binary: String, steps: [(String) throws -> Void], library: [LibraryFile],
                           origin: OriginServer, temp: TemporaryDirectory) throws -> (seconds: [Double], bytes: Int64, requests: Int) {
        guard RcloneMount.version(binary: binary) != nil else { throw ValidationError("\(binary) is not rclone ('version' failed)") }
        try serveForRclone(library, origin: origin)
        let mount = try RcloneMount(binary: binary, url: origin.url("/rlib/"), mountpoint: temp.appending("rclone-mnt"),
                                    cacheDirectory: temp.appending("rclone-cache"), logFile: temp.appending("rclone.log"),
                                    expectedFile: "Movies")
        defer { mount.stop() }
        origin.resetLog()
        let t = try steps.map { run in try timed { try run(mount.mountpoint) } }
        return (t, filmBytes(origin), filmRequests(origin))
    }

    /// Every file again at `/rlib/PATH`, and an HTML listing per folder (folders as links ending
    /// in `/`), as rclone's http backend reads a directory.
    static func serveForRclone(_ files: [LibraryFile], origin: OriginServer) throws {
        var folders: [String: Set<String>] = ["": []]
        for (path, content) in files {
            // Not percent-encoded: rclone encodes more than we do (`(` as %28), and the origin
            // decodes a path it does not know.
            try content.serve(at: "/rlib/" + path, origin: origin)
            var parts = path.split(separator: "/").map(String.init)
            var link = encoded(parts.removeLast())
            while true {
                let parent = parts.joined(separator: "/")
                folders[parent, default: []].insert(link)
                guard let dir = parts.popLast() else { break }
                link = encoded(dir) + "/"
            }
        }
        for (folder, links) in folders {
            let body = "<html><body><pre>\n" + links.sorted().map { "<a href=\"\($0)\">\($0)</a>\n" }.joined() + "</pre></body></html>\n"
            origin.setFile("/rlib/" + (folder.isEmpty ? "" : folder + "/"), data: Array(body.utf8), contentType: "text/html")
        }
    }

    /// A nightly re-scan after playback (issue 47, "a scan is paid once"): a fresh mount with a
    /// 256 MiB cap probes every film as Jellyfin does, then 1 GiB of other files is read whole
    /// (`dd`, as a player or a copy reads: four times the cap), then every film is probed again.
    /// The figure: the origin's requests (and bytes) for film bytes during the second probe, with
    /// the probe's bytes in the cap's scan share (`--scan-share`, its default) against the first
    /// probe's. Goal: 0 requests.
    static func rescanAfterTurnover(ffprobe: String, library: [LibraryFile], binary: String, origin: OriginServer,
                                    temp: TemporaryDirectory) throws -> String {
        let cap: Int64 = 256 << 20, fillerSize = 64 << 20, fillers = 16
        let filler = temp.appending("filler.bin")
        guard FileManager.default.createFile(atPath: filler, contents: Data(randomBytes(fillerSize, seed: 47))) else { throw ValidationError("cannot write \(filler)") }
        let played = (0..<fillers).map { (path: "played/\($0).bin", content: Content.disk(path: filler, size: Int64(fillerSize))) }
        try serve(library + played, origin: origin)
        let films = library.map(\.path).filter { $0.hasSuffix(".mkv") || $0.hasSuffix(".mp4") || $0.hasSuffix(".webm") }.sorted()
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("rescan-mnt"), cacheDirectory: temp.appending("rescan-cache"),
                                     cacheSize: cap, entries: [], logFile: temp.appending("rescan.log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/lib/")])
        defer { daemon.unmount() }
        let root = daemon.mountpoint
        func probeAll() throws -> (requests: Int, bytes: Int64, which: [String]) {
            origin.resetLog()
            for path in films {
                _ = try Spawned.time(ffprobe, ["-i", root + "/" + path, "-threads", "0", "-v", "warning", "-print_format", "json",
                                               "-show_streams", "-show_chapters", "-show_format"])
            }
            let which = origin.requests.filter(isFilm).map { "\($0.method) \($0.pathWithoutQuery) \($0.range ?? "whole") (\($0.bodyBytes) B)" }
            return (filmRequests(origin), filmBytes(origin), which)
        }
        let first = try probeAll()
        for (path, _) in played {
            guard try Spawned.run("/bin/dd", ["if=" + root + "/" + path, "of=/dev/null", "bs=1M", "status=none"]) == 0 else {
                throw ValidationError("dd could not read \(path) through the mount")
            }
        }
        // The films' pages leave the kernel's cache, so the second probe reaches the daemon.
        for path in films {
            let fd = open(root + "/" + path, O_RDONLY)
            if fd >= 0 { _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); close(fd) }
        }
        let again = try probeAll()
        return String(format: "  a re-scan after the cap turned over (%d films probed, then %d MiB of other files read under a %d MiB cap, probed again): first probe %d requests for %.2f MiB of film bytes; the re-scan %d requests for %.2f MiB (goal 0 requests) %@",
                      films.count, fillers * fillerSize >> 20, Int(cap >> 20), first.requests, Double(first.bytes) / 1048576,
                      again.requests, Double(again.bytes) / 1048576, again.requests == 0 ? "ok" : "MISSED")
            + (again.which.isEmpty ? "" : "\n    the re-scan's requests: " + again.which.prefix(8).joined(separator: "; "))
    }

    /// A film of `seconds` at about 4 Mbit/s, for `ffmpeg -re` to play over the 10 Mbit/s link
    /// (`playDuringScan`, `budgetRun`); served as `play.mkv` at the library's root.
    static func playedFilm(seconds: Int, ffmpeg: String, temp: TemporaryDirectory) throws -> [UInt8] {
        let source = temp.appending("play.mkv")
        guard try Spawned.run(ffmpeg, ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=duration=\(seconds):size=1280x720:rate=25",
                                       "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "4M", "-maxrate", "4M", "-bufsize", "2M", source]) == 0,
              let film = FileManager.default.contents(atPath: source) else { throw ValidationError("ffmpeg could not make the played film") }
        return [UInt8](film)
    }

    /// The played film (`playedFilm`, `seconds` long) with `ffmpeg -re` over a 10 Mbit/s link,
    /// alone and while every film of the library is probed (cold, a new cache): the film must stay
    /// in real time (goal: at most 1.05x its length plus 1 s; alone it takes about 1.02x).
    static func playDuringScan(seconds: Int, film: [UInt8], ffmpeg: String, ffprobe: String, library: [LibraryFile],
                               binary: String, origin: OriginServer, temp: TemporaryDirectory) throws {
        origin.emulateLink(.milliseconds(10, perConnectionMbit: 0, sharedMbit: 10))
        let films = library.map(\.path).filter { $0.hasSuffix(".mkv") || $0.hasSuffix(".mp4") || $0.hasSuffix(".webm") }
        var results: [String] = []
        for withScan in [false, true] {
            let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("play-mnt"), cacheDirectory: temp.appending("play-cache-\(withScan)"),
                                         cacheSize: 8 << 30, entries: [], logFile: temp.appending("play.log"), proxy: false,
                                         extraArguments: ["--index", origin.url("/lib/")])
            defer { daemon.unmount() }
            let root = daemon.mountpoint
            let scan = withScan ? Thread {
                for path in films {
                    _ = try? Spawned.run(ffprobe, ["-v", "quiet", "-i", root + "/" + path, "-show_format", "-show_streams"])
                }
            } : nil
            scan?.start()
            let took = try Spawned.time(ffmpeg, ["-nostdin", "-v", "error", "-re", "-i", root + "/play.mkv", "-f", "null", "-"])
            let limit = 1.05 * Double(seconds) + 1
            results.append(String(format: "%@ %.2f s (%.3fx)%@", withScan ? "during the scan" : "alone", took, took / Double(seconds),
                                  withScan ? (took <= limit ? " ok" : " MISSED (goal \(String(format: "%.1f", limit)) s)") : ""))
        }
        print("  a \(film.count / 1_000_000) MB film of \(seconds) s played with ffmpeg -re over 10 Mbit/s: " + results.joined(separator: "; "))
    }

    /// A budget run (issue 47, "budgets per origin"): a fresh mount whose origin may send the
    /// played film's size and a fifth more per day (`--egress-budget`), the film played with
    /// `ffmpeg -re` over the 10 Mbit/s link while every film is probed and thumbnailed, cold. As
    /// the budget nears its end the thumbnailer (background) stops first, the probes next, and
    /// the film gets the rest. Goals: the origin never sends more than the budget plus one
    /// request (the largest it answered), and the film keeps real time to its end (at most
    /// 1.05x its length plus 1 s).
    static func budgetRun(seconds: Int, film: [UInt8], ffmpeg: String, ffprobe: String, thumbnailer: String?,
                          library: [LibraryFile], binary: String, origin: OriginServer, temp: TemporaryDirectory) throws -> String {
        origin.emulateLink(.milliseconds(10, perConnectionMbit: 0, sharedMbit: 10))
        let budget = Int64(film.count) * 6 / 5
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("budget-mnt"), cacheDirectory: temp.appending("budget-cache"),
                                     cacheSize: 8 << 30, entries: [], logFile: temp.appending("budget.log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/lib/"), "--egress-budget", "\(budget)/day"])
        defer { daemon.unmount() }
        let root = daemon.mountpoint
        let films = library.map(\.path).filter { $0.hasSuffix(".mkv") || $0.hasSuffix(".mp4") || $0.hasSuffix(".webm") }
        origin.resetLog()
        let scanned = DispatchSemaphore(value: 0)
        let scan = Thread {
            defer { scanned.signal() }
            for path in films {
                _ = try? Spawned.run(ffprobe, ["-v", "quiet", "-i", root + "/" + path, "-show_format", "-show_streams"])
                if let thumbnailer { _ = try? Spawned.run(thumbnailer, ["-i", root + "/" + path, "-o", temp.appending("budget-thumb.png"), "-t", "10"]) }
            }
        }
        scan.start()
        let took = try Spawned.time(ffmpeg, ["-nostdin", "-v", "error", "-re", "-i", root + "/play.mkv", "-f", "null", "-"])
        // Everything the origin sent for this budget, the scan's end included (past the budget its
        // reads fail at once).
        if scanned.wait(timeout: .now() + 600) == .timedOut { throw ValidationError("the scan under the budget did not end within 10 minutes") }
        let files = origin.requests.filter { !$0.pathWithoutQuery.hasSuffix("/") }
        let sent = files.reduce(Int64(0)) { $0 + $1.bodyBytes }
        let largest = files.map(\.bodyBytes).max() ?? 0
        let limit = 1.05 * Double(seconds) + 1
        let withinBudget = sent <= budget + largest, inTime = took <= limit
        return String(format: "  a budget run (--egress-budget %.2f MiB/day, the film and a fifth; film played while every film is probed and thumbnailed): origin sent %.2f MiB in %d requests (goal <= the budget + the largest request, %.2f MiB) %@; the film %.2f s (%.3fx, goal %.1f s) %@",
                      Double(budget) / 1048576, Double(sent) / 1048576, files.count, Double(largest) / 1048576,
                      withinBudget ? "ok" : "MISSED", took, took / Double(seconds), limit, inTime ? "ok" : "MISSED")
    }

    /// `ls -l` of one folder of `entries` files: a local folder of empty files against the mount
    /// of a JSON listing, warm (a second run) and with the listing fetched but the kernel cold
    /// (a new mount on the same cache directory, whose kept listing is fresh).
    static func bigFolder(entries: Int, origin: OriginServer, binary: String, temp: TemporaryDirectory) throws -> [String] {
        let local = temp.appending("big-\(entries)")
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        let date = "Mon, 23 Nov 2026 10:00:00 GMT"
        var items: [String] = []
        items.reserveCapacity(entries)
        for i in 0..<entries {
            let name = String(format: "file%07d.mkv", i)
            let fd = open(local + "/" + name, O_CREAT | O_WRONLY, 0o644)
            if fd >= 0 { close(fd) }
            items.append(#"{"name":"\#(name)","type":"file","mtime":"\#(date)","size":\#(1_000_000 + i)}"#)
        }
        origin.setFile("/big\(entries)/", data: Array(("[" + items.joined(separator: ",\n") + "]").utf8), contentType: "application/json")
        func ls(_ dir: String) throws -> Double { try Spawned.time("/bin/sh", ["-c", "ls -l '\(dir)' > /dev/null"]) }
        _ = try ls(local)
        let localWarm = try ls(local)
        let mnt = temp.appending("big-mnt-\(entries)"), cache = temp.appending("big-cache-\(entries)")
        let arguments = ["--index", origin.url("/big\(entries)/"), "--index-ttl", "1h"]
        var daemon = try MountDaemon(binary: binary, mountpoint: mnt, cacheDirectory: cache, cacheSize: 1 << 30, entries: [],
                                     logFile: temp.appending("big-\(entries).log"), proxy: false, extraArguments: arguments)
        _ = try ls(mnt)   // fetches the listing
        let warm = try ls(mnt)
        daemon.unmount()
        daemon = try MountDaemon(binary: binary, mountpoint: mnt, cacheDirectory: cache, cacheSize: 1 << 30, entries: [],
                                 logFile: temp.appending("big-\(entries).log"), proxy: false, extraArguments: arguments)
        defer { daemon.unmount() }
        let kernelCold = try ls(mnt)
        return ["\(entries) entries", String(format: "%.2f s", localWarm), String(format: "%.2f s (%.1fx)", warm, warm / max(localWarm, 1e-6)),
                String(format: "%.2f s (%.1fx)", kernelCold, kernelCold / max(localWarm, 1e-6)),
                String(format: "%.1f µs", warm / Double(entries) * 1e6)]
    }

    /// Columns padded to their widest cell.
    static func table(header: [String], rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
        return all.map { row in "  " + row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ") }
            .joined(separator: "\n")
    }

    // MARK: the library

    /// A file's bytes: held (posters, subtitles, the played film) or a file on disk (the films:
    /// one per kind, served and hard-linked under every film's name, so none is held in memory).
    enum Content {
        case bytes([UInt8])
        case disk(path: String, size: Int64)

        var size: Int64 {
            switch self {
            case .bytes(let b): return Int64(b.count)
            case .disk(_, let size): return size
            }
        }

        func serve(at path: String, origin: OriginServer) throws {
            switch self {
            case .bytes(let b): origin.setFile(path, data: b)
            case .disk(let file, _): try origin.setDiskFile(path, file: file)
            }
        }
    }

    typealias LibraryFile = (path: String, content: Content)

    struct Film { var ext: String; var name: String; var file: String; var size: Int64 }

    /// One film of each kind, made with ffmpeg's test sources: with `megabytes`, the MKV is
    /// H.264 at the constant bitrate that makes it that size over `seconds` (filler data pads
    /// the test picture's few bits, as a film's detail would), the MP4s are remuxed from it (index
    /// last, and first with faststart), and the WebM is a small 20 s one (libvpx is slow to make).
    static func makeFilms(ffmpeg: String, seconds: Int, megabytes: Int, in dir: String) throws -> [Film] {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func input(_ seconds: Int) -> [String] {
            ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=\(seconds):size=640x360:rate=25",
             "-f", "lavfi", "-i", "sine=duration=\(seconds)"]
        }
        var h264 = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k"]
        if megabytes > 0 {
            let video = max(100_000, Int(Double(megabytes) * 8e6 / Double(seconds)) - 140_000)
            h264 += ["-b:v", "\(video)", "-minrate", "\(video)", "-maxrate", "\(video)", "-bufsize", "\(video / 2)",
                     "-x264-params", "nal-hrd=cbr"]
        }
        func make(_ ext: String, _ name: String, _ arguments: [String]) throws -> Film {
            let out = dir + "/" + name
            var st = stat()
            guard try Spawned.run(ffmpeg, arguments + [out]) == 0, stat(out, &st) == 0 else {
                throw ValidationError("ffmpeg could not make \(name)")
            }
            return Film(ext: ext, name: name, file: out, size: Int64(st.st_size))
        }
        let mkv = try make("mkv", "film.mkv", input(seconds) + h264)
        let remux = ["-nostdin", "-v", "error", "-y", "-i", mkv.file, "-map", "0", "-c", "copy"]
        return [
            mkv,
            try make("mp4", "film-index-last.mp4", remux),
            try make("mp4", "film-index-first.mp4", remux + ["-movflags", "+faststart"]),
            try make("webm", "film.webm", input(20) + ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M",
                                                       "-c:a", "libopus"]),
        ]
    }

    /// Paths and contents: films in folders of their own with a poster and subtitles, and a show.
    static func layout(films: Int, kinds: [Film]) -> [LibraryFile] {
        var files: [LibraryFile] = []
        let poster = Content.bytes([UInt8](repeating: 0xFF, count: 40 << 10))
        let subtitles = Content.bytes(Array("1\n00:00:01,000 --> 00:00:02,000\nHello\n".utf8))
        for i in 0..<films {
            let film = kinds[i % kinds.count]
            let folder = String(format: "Movies/Film %03d (2024)", i)
            files.append(("\(folder)/Film \(i).\(film.ext)", .disk(path: film.file, size: film.size)))
            files.append(("\(folder)/poster.jpg", poster))
            files.append(("\(folder)/Film \(i).en.srt", subtitles))
        }
        for season in 1...2 {
            for episode in 1...4 {
                files.append((String(format: "Shows/The Show/Season %02d/The Show S%02dE%02d.mkv", season, season, episode),
                              .disk(path: kinds[0].file, size: kinds[0].size)))
            }
        }
        return files
    }

    /// Every file at `/lib/PATH`, and a JSON listing (nginx's `autoindex_format json`) per folder.
    static func serve(_ files: [LibraryFile], origin: OriginServer) throws {
        var folders: [String: [String]] = ["": []]
        let date = "Mon, 23 Nov 2026 10:00:00 GMT"
        func escaped(_ s: String) -> String { s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") }
        for (path, content) in files {
            try content.serve(at: "/lib/" + Self.encoded(path), origin: origin)
            var parts = path.split(separator: "/").map(String.init)
            let name = parts.removeLast()
            folders[parts.joined(separator: "/"), default: []].append(#"{"name":"\#(escaped(name))","type":"file","mtime":"\#(date)","size":\#(content.size)}"#)
            while !parts.isEmpty {
                let dir = parts.removeLast()
                let parent = parts.joined(separator: "/")
                let entry = #"{"name":"\#(escaped(dir))","type":"directory","mtime":"\#(date)"}"#
                if folders[parent, default: []].contains(entry) { break }
                folders[parent, default: []].append(entry)
            }
        }
        for (folder, entries) in folders {
            let path = "/lib/" + (folder.isEmpty ? "" : Self.encoded(folder) + "/")
            origin.setFile(path, data: Array(("[" + entries.joined(separator: ",\n") + "]").utf8), contentType: "application/json")
        }
    }

    static func encoded(_ path: String) -> String {
        path.split(separator: "/").map { $0.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? String($0) }
            .joined(separator: "/")
    }

    /// The local copy's file at `path`: the bytes written, or a film hard-linked.
    static func write(_ content: Content, to path: String) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        switch content {
        case .bytes(let data):
            guard FileManager.default.createFile(atPath: path, contents: Data(data)) else { throw ValidationError("cannot write \(path)") }
        case .disk(let file, _):
            guard Glibc.link(file, path) == 0 else { throw ValidationError("cannot link \(file) to \(path): \(String(cString: strerror(errno)))") }
        }
    }

    // MARK: measuring

    static func timed(_ body: () throws -> Void) throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// Body bytes and requests for film files (not listings, posters or subtitles).
    static func isFilm(_ r: RequestRecord) -> Bool {
        let p = r.pathWithoutQuery
        return p.hasSuffix(".mkv") || p.hasSuffix(".mp4") || p.hasSuffix(".webm")
    }
    static func filmBytes(_ origin: OriginServer) -> Int64 { origin.requests.filter(isFilm).reduce(0) { $0 + $1.bodyBytes } }
    static func filmRequests(_ origin: OriginServer) -> Int { origin.requests.filter(isFilm).count }

    /// Bytes Jellyfin's probe reads of `file`, as strace counts its reads of it.
    static func probeReads(strace: String, ffprobe: String, file: String) throws -> Int64 {
        try reads(strace: strace, of: ffprobe, ["-i", file, "-threads", "0", "-v", "warning", "-print_format", "json",
                                                "-show_streams", "-show_chapters", "-show_format"], file: file)
    }

    /// Bytes `program` run with `arguments` reads of `file`, as strace counts its reads of it.
    static func reads(strace: String, of program: String, _ arguments: [String], file: String) throws -> Int64 {
        let out = try ExternalTool.run(strace, ["-f", "-qq", "-e", "trace=read,pread64", "-P", file, "--", program] + arguments,
                                       timeout: 120)
        var total: Int64 = 0
        for line in out.stderr.split(separator: "\n") where line.contains("read") {
            if let n = line.split(separator: "=").last.flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }), n > 0 { total += n }
        }
        return total
    }
}
