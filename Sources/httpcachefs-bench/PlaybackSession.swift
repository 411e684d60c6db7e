import ArgumentParser
import CacheCore
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The measurements of `httpcachefs-bench playback`: a fresh mount per row (httpcachefs or
/// rclone, empty cache), the players on it, and what the origin sent meanwhile.
final class PlaybackSession {
    let binary: String
    let rclone: String?
    let origin: OriginServer
    let temp: TemporaryDirectory
    let film: PlaybackFilm
    let ffmpeg: String
    let ffprobe: String
    let mpv: String?
    private var mounts = 0
    /// ffmpeg's own time to the first frame at 1:00 and at 0:20 of the local film (warm), once.
    private var localFirstFrame: (open: Double, seek: Double)?

    init(binary: String, rclone: String?, origin: OriginServer, temp: TemporaryDirectory, film: PlaybackFilm,
         ffmpeg: String, ffprobe: String, mpv: String?) {
        self.binary = binary
        self.rclone = rclone
        self.origin = origin
        self.temp = temp
        self.film = film
        self.ffmpeg = ffmpeg
        self.ffprobe = ffprobe
        self.mpv = mpv
    }

    /// Bytes the origin has sent for the film `name` since the mount.
    func originBytes(_ name: String) -> Int64 { origin.bytesServed(path: "/films/" + name) }

    /// The time to the first frame after an open must be within one round trip plus one GOP at
    /// the link's rate (10 Mbit/s), times 1.3.
    static func startupBound(film: PlaybackFilm) -> Double {
        let link = PlaybackBench.link(10)
        return (link.roundTrip + film.gopBytes / link.bytesPerSecondShared!) * 1.3
    }

    /// Measures `row` on `side`, on a mount of its own.
    func measure(_ row: PlaybackRow, _ side: PlaybackSide) throws -> [String: PlaybackValue] {
        let film0 = PlaybackFilm.names[0]
        switch row {
        case .play:
            return try withMount(side, link: PlaybackBench.link(10)) { mnt in
                let first = try play(mnt + "/" + film0, from: 30, seconds: 20)
                let afterFirst = originBytes(film0)
                let second = try play(mnt + "/" + film0, from: 90, seconds: 10)
                usleep(2_000_000)  // what read-ahead still pulls after the player left counts too
                let sent = originBytes(film0)
                let needed = film.neededBytes([(30, 20), (90, 10)])
                return [
                    "play": Self.seconds(first), "seek": Self.seconds(second),
                    "play.stall": Self.seconds(first - 20), "seek.stall": Self.seconds(second - 10),
                    "play.origin": PlaybackValue(values: [Double(sent)], text: Self.mb(Double(sent))
                                                 + " (" + Self.mb(Double(afterFirst)) + " at row 1's end)"),
                    "play.rate": PlaybackValue(values: [Double(sent) / 30],
                                               text: Self.mb(Double(sent) / 30) + "/s"
                                                   + String(format: " (%.2fx the film's)", Double(sent) / 30 / (film.bitRate / 8))),
                    "play.unread": PlaybackValue(values: [Double(max(0, sent - needed))],
                                                 text: Self.mb(Double(max(0, sent - needed))) + " (" + Self.mb(Double(needed)) + " needed)"),
                ]
            }
        case .three:
            return try withMount(side, link: PlaybackBench.link(20)) { mnt in
                let walls = Walls(count: 3), ffmpeg = ffmpeg
                _ = try Readers.concurrently(3) { i in
                    walls.set(i, try Self.play(ffmpeg: ffmpeg, mnt + "/" + PlaybackFilm.names[i], from: 30, seconds: 20))
                }
                let times = walls.values
                let sent = PlaybackFilm.names.reduce(Int64(0)) { $0 + originBytes($1) }
                return [
                    "three": PlaybackValue(values: times, text: times.map { Self.time($0) }.joined(separator: ", ") + " s"),
                    "three.stall": PlaybackValue(values: times.map { $0 - 20 },
                                                 text: times.map { Self.time($0 - 20) }.joined(separator: ", ") + " s"),
                    "three.origin": PlaybackValue(values: [Double(sent)], text: Self.mb(Double(sent))),
                ]
            }
        case .trickplay:
            return try withMount(side, link: PlaybackBench.link(10)) { mnt in
                let jobs = try PlaybackFilm.names.dropFirst().map { name in
                    try Spawned.start(ffmpeg, Self.trickplayArguments(mnt + "/" + name))
                }
                defer { Self.stop(jobs) }
                usleep(UInt32(Self.trickplayLead * 1e6))
                let before = originBytes(film0)
                let t = try play(mnt + "/" + film0, from: 30, seconds: 20)
                let running = jobs.filter(Self.isRunning).count
                let jobBytes = PlaybackFilm.names.dropFirst().reduce(Int64(0)) { $0 + originBytes($1) }
                let filmBytes = Double(originBytes(film0) - before)
                return ["trickplay": PlaybackValue(values: [t], text: Self.time(t) + " s" + (running == jobs.count ? "" : " (\(jobs.count - running) job(s) ended early)")),
                        "trickplay.origin": PlaybackValue(values: [filmBytes],
                                                          text: Self.mb(filmBytes) + " for the film, " + Self.mb(Double(jobBytes)) + " for the jobs")]
            }
        case .bwlimit:
            return try withMount(side, link: nil, bwlimit: "1.25M") { mnt in
                let t = try play(mnt + "/" + film0, from: 30, seconds: 20)
                let sent = Double(originBytes(film0))
                return ["bwlimit": Self.seconds(t), "bwlimit.stall": Self.seconds(t - 20),
                        "bwlimit.origin": PlaybackValue(values: [sent], text: Self.mb(sent))]
            }
        case .bwlimit1M:
            return try withMount(side, link: nil, bwlimit: "1M") { mnt in
                let t = try play(mnt + "/" + film0, from: 30, seconds: 15, mpv: mpv)
                let sent = Double(originBytes(film0))
                return ["slow": Self.seconds(t), "slow.stall": Self.seconds(t - 15),
                        "slow.origin": PlaybackValue(values: [sent], text: Self.mb(sent))]
            }
        case .startup:
            let local = try localFirstFrame ?? {
                // Warm, from the page cache: what ffmpeg itself costs (start, parse, decode).
                let open = try CoreBench.best(of: 2) { try firstFrame(film.path, at: 60) }
                let seek = try CoreBench.best(of: 2) { try firstFrame(film.path, at: 20) }
                localFirstFrame = (open, seek)
                return (open, seek)
            }()
            return try withMount(side, link: PlaybackBench.link(10)) { mnt in
                let open = try firstFrame(mnt + "/" + film0, at: 60)
                let openBytes = originBytes(film0)
                let seek = try firstFrame(mnt + "/" + film0, at: 20)
                let seekBytes = originBytes(film0) - openBytes
                func value(_ wall: Double, _ reference: Double, _ bytes: Int64) -> PlaybackValue {
                    PlaybackValue(values: [wall - reference],
                                  text: wall.isFinite
                                      ? String(format: "%.2f s (%.2f - %.2f s; %@)", wall - reference, wall, reference, Self.mb(Double(bytes)) as NSString)
                                      : "killed after \(Int(Self.firstFrameTimeout)) s (" + Self.mb(Double(bytes)) + ")")
                }
                return ["startup.open": value(open, local.open, openBytes), "startup.seek": value(seek, local.seek, seekBytes)]
            }
        case .ffprobe:
            return try withMount(side, link: PlaybackBench.link(10)) { mnt in
                let start = DispatchTime.now().uptimeNanoseconds
                let out = try ExternalTool.run(ffprobe, ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0",
                                                         mnt + "/" + PlaybackFilm.moovAtEnd], timeout: 120)
                let t = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                guard out.status == 0, let duration = Double(out.stdout.trimmingCharacters(in: .whitespacesAndNewlines)),
                      abs(duration - film.duration) < 1 else {
                    throw ValidationError("ffprobe of the moov-at-end film: status \(out.status), '\(out.stdout)' \(out.stderr)")
                }
                let atExit = originBytes(PlaybackFilm.moovAtEnd)
                usleep(2_000_000)  // read-ahead it started, still running
                let sent = Double(originBytes(PlaybackFilm.moovAtEnd))
                return ["ffprobe": PlaybackValue(values: [sent], text: Self.mb(sent) + " (" + Self.mb(Double(atExit)) + " at its exit)"),
                        "ffprobe.time": Self.seconds(t)]
            }
        }
    }

    // MARK: mounts

    /// A fresh mount of the films for `side` with an empty cache, behind `link` (nil: plain
    /// loopback), with `bwlimit` for both httpcachefs and rclone; the origin's counters start
    /// once it is up. Unmounted, and its cache removed, after `body`.
    private func withMount<T>(_ side: PlaybackSide, link: LinkEmulation?, bwlimit: String? = nil, _ body: (String) throws -> T) throws -> T {
        origin.emulateLink(link)
        mounts += 1
        let mountpoint = temp.appending("mnt-\(mounts)"), cache = temp.appending("cache-\(mounts)")
        let limit = bwlimit.map { ["--bwlimit", $0] } ?? []
        MountCleanup.register(mountpoint: mountpoint)
        defer {
            MountCleanup.unregister(mountpoint: mountpoint)
            try? FileManager.default.removeItem(atPath: cache)
        }
        switch side {
        case .httpcachefs:
            let entries = (PlaybackFilm.names + [PlaybackFilm.moovAtEnd]).map { "\($0)=\(origin.url("/films/" + $0))" }
            let daemon = try MountDaemon(binary: binary, mountpoint: mountpoint, cacheDirectory: cache, cacheSize: 2 << 30,
                                         entries: entries, logFile: temp.appending("mount-\(mounts).log"), proxy: false,
                                         extraArguments: limit)
            let pid = try? daemon.pid()
            if let pid { MountCleanup.register(daemon: pid) }
            defer {
                daemon.unmount()
                if let pid { MountCleanup.unregister(daemon: pid) }
            }
            origin.resetLog()
            return try body(mountpoint)
        case .rcloneOne, .rcloneMulti:
            guard let rclone else { throw ValidationError("skipped (rclone not installed)") }
            let mount = try RcloneMount(binary: rclone, url: origin.url("/films/"), mountpoint: mountpoint, cacheDirectory: cache,
                                        logFile: temp.appending("rclone-\(mounts).log"), expectedFile: PlaybackFilm.names[0],
                                        flags: side.rcloneFlags + limit)
            defer { mount.stop() }
            origin.resetLog()
            return try body(mountpoint)
        }
    }

    // MARK: players

    /// Seconds the trickplay-style jobs run before the film starts: they are running, as a media
    /// server's scheduled task is when somebody starts to watch.
    static let trickplayLead = 10.0

    /// A trickplay-style job as Jellyfin's scheduled tasks run one (trickplay, chapter images,
    /// keyframes): ffmpeg decoding the keyframes of a whole film as fast as it can read it.
    static func trickplayArguments(_ file: String) -> [String] {
        ["-hide_banner", "-nostdin", "-loglevel", "error", "-threads", "1", "-skip_frame", "nokey", "-i", file,
         "-an", "-sn", "-vf", "fps=1/10,scale=320:-2", "-f", "null", "-"]
    }

    static func isRunning(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Ends the jobs and reaps them.
    static func stop(_ pids: [pid_t]) {
        for pid in pids {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }

    /// Plays `seconds` of `file` from `start` as a player would (`ffmpeg -re`, or mpv when given)
    /// and returns the wall time from start to exit, or infinity if it was killed after three
    /// times the play plus a minute. Fails if the player fails or played less than asked.
    func play(_ file: String, from start: Double, seconds: Double, mpv: String? = nil) throws -> Double {
        try Self.play(ffmpeg: ffmpeg, file, from: start, seconds: seconds, mpv: mpv)
    }

    /// `play` for one of several players at once (no session state: called from their threads).
    static func play(ffmpeg: String, _ file: String, from start: Double, seconds: Double, mpv: String? = nil) throws -> Double {
        let (executable, arguments): (String, [String]) = mpv.map {
            ($0, ["--no-config", "--vo=null", "--ao=null", "--start=\(Int(start))", "--length=\(Int(seconds))", file])
        } ?? (ffmpeg, ["-hide_banner", "-nostdin", "-re", "-ss", "\(Int(start))", "-i", file, "-t", "\(Int(seconds))", "-f", "null", "-"])
        let timeout = 3 * seconds + 60
        let begin = DispatchTime.now().uptimeNanoseconds
        let out = try ExternalTool.run(executable, arguments, timeout: timeout)
        let wall = Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e9
        let last = Self.lastLine(out.stderr)
        if out.status == -1 { return .infinity }  // killed: printed as such, and misses any bound
        guard out.status == 0 else { throw ValidationError("the player exited with status \(out.status): \(last)") }
        // ffmpeg's progress counts from the seek (time=00:00:20.00), mpv's status line from the
        // film's start in whole seconds (V: 00:00:44 / 00:02:00).
        let played = mpv == nil ? Self.lastTime(in: out.stderr + out.stdout, after: "time=")
            : Self.lastTime(in: out.stderr + out.stdout, after: "V: ").map { $0 - start }
        guard let played, played >= seconds - (mpv == nil ? 0.5 : 1.5) else {
            throw ValidationError("the player played \(played.map { String(format: "%.2f s", $0) } ?? "nothing") of \(Int(seconds)) s: \(last)")
        }
        return wall
    }

    /// Wall time of `ffmpeg -ss AT -i FILE -frames:v 1 -f null -`: open, seek, decode one frame;
    /// infinity if it was killed after `firstFrameTimeout`.
    func firstFrame(_ file: String, at position: Double) throws -> Double {
        let begin = DispatchTime.now().uptimeNanoseconds
        let out = try ExternalTool.run(ffmpeg, ["-hide_banner", "-nostdin", "-ss", "\(Int(position))", "-i", file,
                                                "-frames:v", "1", "-f", "null", "-"], timeout: Self.firstFrameTimeout)
        let wall = Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e9
        if out.status == -1 { return .infinity }
        guard out.status == 0, out.stderr.contains("frame=    1") || out.stderr.contains("frame=1") else {
            throw ValidationError("ffmpeg decoded no frame at \(Int(position)) s (status \(out.status)): \(Self.lastLine(out.stderr))")
        }
        return wall
    }

    /// The last `HH:MM:SS(.ss)` after `marker` in a player's progress lines, in seconds.
    static func lastTime(in log: String, after marker: String) -> Double? {
        guard let range = log.range(of: marker, options: .backwards) else { return nil }
        let value = log[range.upperBound...].prefix { !$0.isWhitespace }
        let parts = value.split(separator: ":").compactMap { Double($0) }
        guard parts.count == 3 else { return nil }
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    }

    static func lastLine(_ text: String) -> String {
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).last.map(String.init) ?? ""
    }

    static let firstFrameTimeout: TimeInterval = 120

    static func seconds(_ t: Double) -> PlaybackValue { PlaybackValue(values: [t], text: time(t) + (t.isFinite ? " s" : "")) }
    /// Seconds with one decimal, or "killed" for a player that did not finish in time.
    static func time(_ t: Double, format: String = "%.1f") -> String { t.isFinite ? String(format: format, t) : "killed" }
    static func mb(_ bytes: Double) -> String { String(format: "%.2f MB", bytes / 1e6) }
}

/// Wall times of concurrent players, each set by its own thread.
private final class Walls: Sendable {
    private let times: LockedValue<[Double]>

    init(count: Int) { times = LockedValue(Array(repeating: .nan, count: count)) }
    func set(_ i: Int, _ t: Double) { times.withLock { $0[i] = t } }
    var values: [Double] { times.withLock { $0 } }
}
