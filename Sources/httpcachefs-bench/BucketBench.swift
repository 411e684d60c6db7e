import ArgumentParser
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench bucket`: a film library in a bucket of a local S3 server, scanned and
/// played through `mount --index s3://…` and, in the same run, through `rclone mount` with its
/// `s3` backend, each cold (a new cache).
///
/// The server: `rclone serve s3` (1.65 or later, which checks signatures) over a folder whose
/// films are hard links to a few made once with ffmpeg (LibraryBench's), behind the emulated
/// home link (`LinkRelay`: `--rtt-ms` per request, `--link-mbit` shared downstream; rclone's own
/// `--bwlimit` does not pace what `serve s3` sends). Steps: the cold scan (Jellyfin's ffprobe of
/// every film), the warm one (ours), thumbnails (`ffmpegthumbnailer -t 10` of every film after
/// the probes, cold then warm), a film played with `ffmpeg -re` for `--play-seconds` after the
/// scan, and `find` of a folder of `--objects` empty objects (ListObjectsV2 pages of 1000, counted
/// by the relay): ours on a mount of that folder alone, started for it (the mount's start
/// counted in), rclone's on its mount, the folder never listed before. Bytes: what the server
/// wrote to its sockets (`/proc/PID/io` wchar) against what the scanners read of the local copy
/// (strace). Goals: scan and thumbnail bytes at most 1.5x what the scanners read; cold scan at
/// most 0.5x rclone's time.
struct BucketBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bucket",
        abstract: "A film library in a local S3 bucket (rclone serve s3): cold scan, thumbnails, playback and a big listing through the mount against rclone mount's s3 backend.",
        discussion: "Needs rclone 1.65 or later (mount-helpers/setup-debian.sh --bench), ffmpeg, ffprobe, strace and /dev/fuse. Quick run: --films 40 --film-mb 40; ffmpegthumbnailer for the thumbnail step."
    )

    @Option(help: "Films in the bucket (besides the show's episodes).")
    var films = 40

    @Option(help: "Size of each MKV and MP4 film in MB over 600 s (0: small films).")
    var filmMb = 100

    @Option(help: "Seconds played with ffmpeg -re after each scan (0: not played).")
    var playSeconds = 20

    @Option(help: "Empty objects in the one folder listed with find (0: none).")
    var objects = 100_000

    @Option(help: "The emulated link's downstream in Mbit/s, shared by every connection.")
    var linkMbit = 50

    @Option(help: "The emulated link's round trip in milliseconds (each request waits it).")
    var rttMs = 20

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark).")
    var binary: String?

    @Option(help: "rclone 1.65 or later: the server, and the mount beside ours (default: rclone on PATH).")
    var rclone: String?

    static let key = (id: "BENCHKEYID", secret: "bench/secret+key")

    func run() async throws {
        let binary = binary ?? CoreBench.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw ValidationError("no httpcachefs binary at \(binary): swift build -c release, or --binary") }
        guard let rclone = rclone ?? RcloneMount.onPath(), let version = RcloneMount.version(binary: rclone),
              let minor = Int(version.dropFirst("rclone v1.".count).prefix { $0.isNumber }), version.hasPrefix("rclone v1."), minor >= 65 else {
            throw ValidationError("needs rclone 1.65 or later for rclone serve s3 (mount-helpers/setup-debian.sh --bench installs 1.75; or --rclone)")
        }
        guard let ffmpeg = ExternalTool.find("ffmpeg"), let ffprobe = ExternalTool.find("ffprobe"), let strace = ExternalTool.find("strace") else {
            throw ValidationError("needs ffmpeg, ffprobe and strace")
        }
        guard films >= 1, filmMb >= 0, playSeconds >= 0, objects >= 0, linkMbit >= 1 else { throw ValidationError("counts and sizes must not be negative") }
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-bucket")
        defer { temp.remove() }
        print("bucket benchmark: \(films) films\(filmMb > 0 ? " of \(filmMb) MB" : "") in a bucket of \(version) serve s3 behind \(rttMs) ms, \(linkMbit) Mbit/s, binary \(binary)")

        let seconds = filmMb > 0 ? 600 : 20
        let kinds = try LibraryBench.makeFilms(ffmpeg: ffmpeg, seconds: seconds, megabytes: filmMb, in: temp.appending("src"))
        let library = LibraryBench.layout(films: films, kinds: kinds)
        let data = temp.appending("data"), bucket = data + "/media"
        for (path, content) in library { try LibraryBench.write(content, to: bucket + "/" + path) }
        if objects > 0 {
            // Empty files: 100k are made in a second or two, and list as objects of size 0.
            try FileManager.default.createDirectory(atPath: bucket + "/many", withIntermediateDirectories: true)
            for i in 0..<objects {
                let fd = open(bucket + String(format: "/many/object%07d.bin", i), O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
                if fd >= 0 { close(fd) }
            }
        }
        let thumbnailer = ExternalTool.find("ffmpegthumbnailer")
        if thumbnailer == nil { print("  (ffmpegthumbnailer not installed: its step is left out)") }
        let filmPaths = library.map(\.path).filter { $0.hasSuffix(".mkv") || $0.hasSuffix(".mp4") || $0.hasSuffix(".webm") }.sorted()
        var readLocally: Int64 = 0
        for path in filmPaths { readLocally += try LibraryBench.probeReads(strace: strace, ffprobe: ffprobe, file: bucket + "/" + path) }
        let thumbnailArguments = { (file: String) in ["-i", file, "-o", temp.appending("thumb.png"), "-t", "10"] }
        var thumbnailerRead: Int64 = 0
        if let thumbnailer {
            for path in filmPaths {
                let file = bucket + "/" + path
                thumbnailerRead += try LibraryBench.reads(strace: strace, of: thumbnailer, thumbnailArguments(file), file: file)
            }
        }

        let server = try Server(rclone: rclone, data: data, temp: temp)
        defer { server.stop() }
        let link = try LinkRelay(toPort: server.port, rtt: Double(rttMs) / 1000, bytesPerSecond: linkMbit * 125_000)
        defer { link.stop() }
        let endpoint = "http://127.0.0.1:\(link.port)"
        func probeAll(_ root: String) throws {
            for path in filmPaths {
                _ = try Spawned.time(ffprobe, ["-i", root + "/" + path, "-threads", "0", "-v", "warning", "-print_format", "json",
                                               "-show_streams", "-show_chapters", "-show_format"])
            }
        }
        let played = filmPaths.first { $0.hasSuffix(".mkv") }!
        func play(_ root: String) throws -> Double {
            try Spawned.time(ffmpeg, ["-nostdin", "-v", "error", "-re", "-t", String(playSeconds), "-i", root + "/" + played, "-f", "null", "-"])
        }
        func thumbnails(_ root: String) throws -> Double {
            guard let thumbnailer else { return 0 }
            return try LibraryBench.timed { for path in filmPaths { _ = try Spawned.time(thumbnailer, thumbnailArguments(root + "/" + path)) } }
        }
        /// `find` of the folder of objects: seconds, entries seen, requests the relay carried.
        func listMany(_ folder: String, mountStart: (() throws -> Void)? = nil) throws -> (seconds: Double, entries: Int, requests: LinkRelay.Requests) {
            let asked = link.requests
            let out = temp.appending("find.txt")
            let seconds = try LibraryBench.timed {
                try mountStart?()
                _ = try Spawned.time("/bin/sh", ["-c", "find '\(folder)' > '\(out)'"])
            }
            let entries = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n").count - 1
            return (seconds, entries, link.requests - asked)
        }

        // Ours.
        let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt"), cacheDirectory: temp.appending("cache"),
                                     cacheSize: 8 << 30, entries: [], logFile: temp.appending("mount.log"), proxy: false,
                                     extraArguments: ["--index", "s3://media/", "--s3-endpoint", endpoint,
                                                      "--s3-access-key-id", Self.key.id, "--s3-secret-access-key", Self.key.secret])
        defer { daemon.unmount() }
        var before = server.bytesWritten()
        let oursCold = try LibraryBench.timed { try probeAll(daemon.mountpoint) }
        let oursBytes = server.bytesWritten() - before
        let oursWarm = try LibraryBench.timed { try probeAll(daemon.mountpoint) }
        before = server.bytesWritten()
        let oursThumbCold = try thumbnails(daemon.mountpoint)
        let oursThumbBytes = server.bytesWritten() - before
        let oursThumbWarm = try thumbnails(daemon.mountpoint)
        let oursPlay = playSeconds > 0 ? try play(daemon.mountpoint) : 0
        daemon.unmount()
        var oursList: (seconds: Double, entries: Int, requests: LinkRelay.Requests)?
        if objects > 0 {
            var many: MountDaemon?
            defer { many?.unmount() }   // also when the listing fails
            oursList = try listMany(temp.appending("many-mnt")) {
                many = try MountDaemon(binary: binary, mountpoint: temp.appending("many-mnt"), cacheDirectory: temp.appending("many-cache"),
                                       cacheSize: 1 << 30, entries: [], logFile: temp.appending("many.log"), proxy: false,
                                       extraArguments: ["--index", "s3://media/many/", "--s3-endpoint", endpoint,
                                                        "--s3-access-key-id", Self.key.id, "--s3-secret-access-key", Self.key.secret])
            }
        }

        // rclone mount, s3 backend.
        let mount = try RcloneS3Mount(binary: rclone, endpoint: endpoint, mountpoint: temp.appending("rclone-mnt"),
                                      cacheDirectory: temp.appending("rclone-cache"), logFile: temp.appending("rclone.log"))
        defer { mount.stop() }
        before = server.bytesWritten()
        let theirsCold = try LibraryBench.timed { try probeAll(mount.mountpoint) }
        let theirsBytes = server.bytesWritten() - before
        before = server.bytesWritten()
        let theirsThumbCold = try thumbnails(mount.mountpoint)
        let theirsThumbBytes = server.bytesWritten() - before
        let theirsThumbWarm = try thumbnails(mount.mountpoint)
        let theirsPlay = playSeconds > 0 ? try play(mount.mountpoint) : 0
        let theirsList = objects > 0 ? try listMany(mount.mountpoint + "/many") : nil
        mount.stop()

        let mib = { (n: Int64) in String(format: "%.1f MiB", Double(n) / 1048576) }
        print(LibraryBench.table(header: ["step", "httpcachefs", "rclone mount (s3, \(RcloneMount.describedFlags))", "ratio"], rows: [
            ["ffprobe of \(filmPaths.count) films, cold", String(format: "%.2f s", oursCold), String(format: "%.2f s", theirsCold),
             String(format: "%.2fx (goal at most 0.5x) %@", oursCold / max(theirsCold, 1e-6), oursCold <= 0.5 * theirsCold ? "ok" : "MISSED")],
            ["the same, warm", String(format: "%.2f s", oursWarm), "", ""],
            ["server bytes, cold scan", mib(oursBytes), mib(theirsBytes), String(format: "%.2fx", Double(oursBytes) / Double(max(theirsBytes, 1)))],
            thumbnailer != nil ? ["ffmpegthumbnailer -t 10 of \(filmPaths.count) films after the probes, cold", String(format: "%.2f s", oursThumbCold),
                                  String(format: "%.2f s", theirsThumbCold), String(format: "%.2fx", oursThumbCold / max(theirsThumbCold, 1e-6))] : nil,
            thumbnailer != nil ? ["the same, warm", String(format: "%.2f s", oursThumbWarm), String(format: "%.2f s", theirsThumbWarm),
                                  String(format: "%.2fx", oursThumbWarm / max(theirsThumbWarm, 1e-6))] : nil,
            thumbnailer != nil ? ["server bytes, thumbnails", mib(oursThumbBytes), mib(theirsThumbBytes),
                                  String(format: "%.2fx", Double(oursThumbBytes) / Double(max(theirsThumbBytes, 1)))] : nil,
            playSeconds > 0 ? ["ffmpeg -re, \(playSeconds) s", String(format: "%.2f s (%.3fx)", oursPlay, oursPlay / Double(playSeconds)),
                               String(format: "%.2f s (%.3fx)", theirsPlay, theirsPlay / Double(playSeconds)), String(format: "%.2fx", oursPlay / max(theirsPlay, 1e-6))] : nil,
            oursList.flatMap { ours in theirsList.map { theirs in
                ["find of \(objects) objects in one folder, cold (ours: with the mount's start)",
                 String(format: "%.2f s (%d entries, %d pages)", ours.seconds, ours.entries, ours.requests.listPages),
                 String(format: "%.2f s (%d entries, %d pages, %d HEADs)", theirs.seconds, theirs.entries, theirs.requests.listPages, theirs.requests.heads),
                 String(format: "%.2fx", ours.seconds / max(theirs.seconds, 1e-6))] } },
        ].compactMap { $0 }))
        let ratio = Double(oursBytes) / Double(max(readLocally, 1))
        print(String(format: "  the probes read %@ of the local copy; the cold scan cost the server %@ (with listings and headers): %.2fx (goal at most 1.5x) %@",
                     mib(readLocally), mib(oursBytes), ratio, ratio <= 1.5 ? "ok" : "MISSED"))
        if thumbnailer != nil {
            let thumbRatio = Double(oursThumbBytes) / Double(max(thumbnailerRead, 1))
            print(String(format: "  ffmpegthumbnailer reads %@ of the local copy; after the probes it cost the server %@: %.2fx (goal at most 1.5x) %@",
                         mib(thumbnailerRead), mib(oursThumbBytes), thumbRatio, thumbRatio <= 1.5 ? "ok" : "MISSED"))
            let whole = Double(oursBytes + oursThumbBytes) / Double(max(readLocally + thumbnailerRead, 1))
            print(String(format: "  the whole cold scan (probes and thumbnails): %@ from the server for %@ read: %.2fx (goal at most 1.5x) %@",
                         mib(oursBytes + oursThumbBytes), mib(readLocally + thumbnailerRead), whole, whole <= 1.5 ? "ok" : "MISSED"))
        }
    }

    /// `rclone serve s3` of `data` (each folder a bucket) on a loopback port it picks, checking
    /// signatures made with `key`.
    final class Server {
        let port: Int
        private let pid: pid_t

        init(rclone: String, data: String, temp: TemporaryDirectory) throws {
            let log = temp.appending("serve.log")
            pid = try Spawned.start(rclone, ["serve", "s3", data, "--auth-key", "\(BucketBench.key.id),\(BucketBench.key.secret)",
                                             "--addr", "127.0.0.1:0", "--config", "/dev/null", "--log-file", log, "--log-level", "NOTICE",
                                             "--dir-cache-time", "1h"])
            for _ in 0..<200 {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                if let r = text.range(of: "Starting s3 server on [http://127.0.0.1:") {
                    port = Int(text[r.upperBound...].prefix { $0.isNumber }) ?? 0
                    return
                }
                usleep(50_000)
            }
            kill(pid, SIGTERM)
            throw ValidationError("rclone serve s3 did not start within 10 s: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }

        /// Bytes the server has written (its sockets, nearly all of it): `/proc/PID/io` wchar.
        func bytesWritten() -> Int64 {
            let text = (try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)) ?? ""
            let line = text.split(separator: "\n").first { $0.hasPrefix("wchar:") }
            return line.flatMap { Int64($0.dropFirst(6).trimmingCharacters(in: .whitespaces)) } ?? 0
        }

        func stop() {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// `rclone mount` of the bucket with its s3 backend, read-only, RcloneMount's read flags.
    final class RcloneS3Mount {
        let mountpoint: String
        private let pid: pid_t
        private var stopped = false

        init(binary: String, endpoint: String, mountpoint: String, cacheDirectory: String, logFile: String) throws {
            self.mountpoint = mountpoint
            for dir in [mountpoint, cacheDirectory] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
            pid = try Spawned.start(binary, ["mount", ":s3:media", mountpoint, "--s3-provider", "Other", "--s3-endpoint", endpoint,
                                             "--s3-access-key-id", BucketBench.key.id, "--s3-secret-access-key", BucketBench.key.secret,
                                             "--s3-force-path-style", "--read-only", "--cache-dir", cacheDirectory, "--config", "/dev/null",
                                             "--log-file", logFile, "--log-level", "NOTICE"] + RcloneMount.readFlags)
            for _ in 0..<200 {
                if FileManager.default.fileExists(atPath: mountpoint + "/Movies") { return }
                usleep(50_000)
            }
            stop()
            throw ValidationError("rclone mount (s3) did not show Movies within 10 s: \((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "")")
        }

        func stop() {
            guard !stopped else { return }
            stopped = true
            _ = try? Spawned.run("/bin/fusermount3", ["-u", "-z", mountpoint])
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}
