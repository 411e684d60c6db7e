import ArgumentParser
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench playback`: playback on a home link (issue 18), each play against its bound,
/// with rclone's mount beside it in the same run.
///
/// A 4 Mbit/s H.264 film made once by ffmpeg (`PlaybackFilm`) is served from the in-process
/// origin, behind an emulated link whose cap all connections share (20 ms round trip, 10 or
/// 20 Mbit/s), or over plain loopback under `--bwlimit`. The player is `ffmpeg -re` (it reads as
/// fast as it plays), timed from start to exit; every play gets a fresh mount with an empty cache
/// (the seek after the first play shares its mount, as a player's seek would). Each play also
/// runs through rclone's mount of the same origin, one stream and 16 x 4M streams, each with its
/// own empty cache. Row 3b plays the film while two trickplay-style jobs (`ffmpeg -skip_frame
/// nokey` over the two other films, as a media server's scheduled tasks run) have been reading
/// for `PlaybackSession.trickplayLead` seconds and go on. Besides the times: stalls (wall time minus the time played), the time to the
/// first frame after an open and after a seek, and what the origin sent for what was played.
struct PlaybackBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playback",
        abstract: "Playback of a 4 Mbit/s film on a thin shared link and under --bwlimit (issue 18), each play against its bound, rclone beside it.",
        discussion: "A full run takes about 9 minutes (3 with --quick); one row: --only play (or three, trickplay, bwlimit, bwlimit-1m, startup, ffprobe). Root is needed to mount."
    )

    @Option(help: "Where the films are made once and kept (reused while ffprobe finds them as they should be).")
    var workDir: String = "/var/tmp/httpcachefs-bench-playback"

    @Option(help: "The httpcachefs binary (default: the one next to this benchmark; build with 'swift build -c release').")
    var binary: String?

    @Option(help: "rclone binary for the side-by-side columns (default: rclone on PATH; mount-helpers/setup-debian.sh --bench installs 1.75).")
    var rclone: String?

    @Option(help: "ffmpeg binary (makes the film; the player).")
    var ffmpeg: String = "/usr/bin/ffmpeg"

    @Option(help: "ffprobe binary (checks the film; the moov-at-end probe).")
    var ffprobe: String = "/usr/bin/ffprobe"

    @Option(help: "Player of the --bwlimit 1M row: mpv (as issue 18 played it; when installed), ffmpeg (ffmpeg -re), or auto.")
    var slowPlayer: SlowPlayer = .auto

    @Option(help: ArgumentHelp("Measure only these rows, comma-separated (default: all).",
                               valueName: PlaybackRow.allCases.map(\.rawValue).joined(separator: ",")))
    var only: String?

    @Flag(help: "httpcachefs only: no rclone columns (about a third of the time).")
    var quick = false

    enum SlowPlayer: String, ExpressibleByArgument, CaseIterable { case auto, mpv, ffmpeg }

    static let filmSeconds = 120
    /// 10 ms one way (a 20 ms round trip), no per-connection cap, `mbit` shared by all connections.
    static func link(_ mbit: Double) -> LinkEmulation { .milliseconds(10, perConnectionMbit: 0, sharedMbit: mbit) }

    func validate() throws { _ = try selected() }

    func selected() throws -> Set<PlaybackRow> {
        guard let only else { return Set(PlaybackRow.allCases) }
        return try Set(only.split(separator: ",").map { name in
            let name = name.trimmingCharacters(in: .whitespaces)
            guard let row = PlaybackRow(rawValue: name) else {
                throw ValidationError("--only: no row '\(name)'; the rows: " + PlaybackRow.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return row
        })
    }

    func run() throws {
        let only = try selected()
        let binary = binary ?? CoreBench.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no httpcachefs binary at \(binary); build it (swift build -c release) or pass --binary")
        }
        guard FileManager.default.fileExists(atPath: "/dev/fuse") else { throw ValidationError("no /dev/fuse: cannot mount") }
        for tool in [ffmpeg, ffprobe] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw ValidationError("no \(tool): apt-get install ffmpeg (mount-helpers/setup-debian.sh --test does)")
        }
        let mpv: String?
        switch slowPlayer {
        case .ffmpeg: mpv = nil
        case .auto: mpv = ExternalTool.find("mpv")
        case .mpv:
            guard let found = ExternalTool.find("mpv") else { throw ValidationError("--slow-player mpv: no mpv (apt-get install -y mpv)") }
            mpv = found
        }
        let rcloneBinary = quick ? nil : (rclone ?? RcloneMount.onPath()).flatMap { RcloneMount.version(binary: $0) == nil ? nil : $0 }
        MountCleanup.installSignalHandlers()

        let film = try PlaybackFilm.prepare(in: workDir, seconds: Self.filmSeconds, ffmpeg: ffmpeg, ffprobe: ffprobe) {
            FigureTable.progress($0, bench: "playback")
        }
        let origin = try OriginServer()
        defer { origin.stop() }
        for name in PlaybackFilm.names + [PlaybackFilm.moovAtEnd] {
            try origin.setDiskFile("/films/" + name, file: film.directory + "/" + name, contentType: "video/mp4")
        }
        origin.setResponse("/films/", status: 200, headers: [("Content-Type", "text/html")],
                           body: RcloneMount.listing(PlaybackFilm.names + [PlaybackFilm.moovAtEnd]))
        let temp = TemporaryDirectory(prefix: "httpcachefs-bench-playback")
        defer { temp.remove() }
        MountCleanup.register(directory: temp.path)

        let session = PlaybackSession(binary: binary, rclone: rcloneBinary, origin: origin, temp: temp, film: film,
                                      ffmpeg: ffmpeg, ffprobe: ffprobe, mpv: mpv)
        print("playback benchmark: binary \(binary)")
        print(String(format: "film: %.1f s of H.264 1280x720 at %d fps, %.2f Mbit/s (ffprobe; made at 4M CBR), %@, a keyframe every %.0f s "
                     + "(one GOP: %@), moov first (%@ before the first frame); the same remuxed with the moov at the end",
                     film.duration, PlaybackFilm.frameRate, film.bitRate / 1e6, CoreBench.human(film.size) as NSString,
                     PlaybackFilm.gopSeconds, PlaybackSession.mb(film.gopBytes) as NSString,
                     CoreBench.human(film.headerBytes) as NSString))
        print("links: \(LinkOptions.describe(Self.link(10))); \(LinkOptions.describe(Self.link(20))) (three players); plain loopback under --bwlimit")
        print("player: ffmpeg -hide_banner -nostdin -re -ss S -i FILE -t T -f null -" + (mpv.map { "; the --bwlimit 1M row: \($0)" } ?? ""))
        print("rclone: " + (quick ? "not run (--quick)" : rcloneBinary.flatMap(RcloneMount.version).map {
            "\($0), full VFS cache; one stream (--vfs-read-chunk-streams 0) and 16 x 4M streams" }
            ?? "skipped (rclone not installed; mount-helpers/setup-debian.sh --bench installs it)"))
        print("")

        var results = PlaybackResults()
        let sides = PlaybackSide.allCases
        for row in PlaybackRow.allCases where only.contains(row) {
            for side in sides {
                if side != .httpcachefs && rcloneBinary == nil {
                    results.skip(row, side, quick ? "not run (--quick)" : "skipped (rclone not installed)")
                    continue
                }
                FigureTable.progress("\(row.rawValue), \(side.title)...", bench: "playback")
                do {
                    results.record(row, side, try session.measure(row, side))
                } catch {
                    results.fail(row, side, "\(error)")
                }
                usleep(500_000)  // the previous mount's connections are closed before the next starts
            }
        }
        print(results.render(film: film, lines: PlaybackLine.all(film: film, mpv: mpv != nil), only: only))
        print("")
        print("""
            Times are wall times of the player, from its start to its exit; a stall is that minus the time played. Startup \
            (row 6): ffmpeg's wall time to one decoded frame on the mount minus the same on the local film, warm (ffmpeg's own \
            start, parse and decode), then the bytes the origin sent for it. Origin bytes: body bytes the origin handed to \
            its connections for the film since the mount came up, stopped transfers included. "None set": issue 18 gives \
            no bound for that figure.
            """)
        if !quick && rcloneBinary == nil {
            print("rclone columns: skipped (rclone not installed; mount-helpers/setup-debian.sh --bench installs it)")
        }
    }
}

/// The rows of `playback`, as `--only` names them.
enum PlaybackRow: String, CaseIterable {
    /// Rows 1 and 2 (a play, then a seek on the same mount) and the origin bytes they cost.
    case play
    case three
    /// A film while two trickplay-style jobs (ffmpeg over whole films, keyframes only) run.
    case trickplay
    case bwlimit
    case bwlimit1M = "bwlimit-1m"
    case startup
    case ffprobe
}

/// Who serves the film: httpcachefs, or rclone's mount in one of two read modes.
enum PlaybackSide: Int, CaseIterable {
    case httpcachefs, rcloneOne, rcloneMulti

    var title: String {
        switch self {
        case .httpcachefs: return "httpcachefs"
        case .rcloneOne: return "rclone, one stream"
        case .rcloneMulti: return "rclone, 16 x 4M streams"
        }
    }

    /// rclone's read flags: its default single stream, or the multi-stream reads its documentation suggests.
    var rcloneFlags: [String] {
        self == .rcloneMulti ? RcloneMount.readFlags : ["--vfs-cache-mode", "full", "--vfs-read-chunk-streams", "0"]
    }
}

/// One measured value for the table: the numbers the bound applies to and how to print them.
struct PlaybackValue {
    var values: [Double]
    var text: String
}

/// One line of a table: a figure's key in the measurements, its name and its bound.
struct PlaybackLine {
    let row: PlaybackRow
    let key: String
    let name: String
    let target: Figure.Target?
    let bound: String
    /// In the main table (the plays), or among the extra figures.
    let main: Bool

    static func all(film: PlaybackFilm, mpv: Bool) -> [PlaybackLine] {
        let startup = PlaybackSession.startupBound(film: film)
        let startupBound = String(format: "<= (20 ms + %@ at 10 Mbit/s) x 1.3 = %.2f s", PlaybackSession.mb(film.gopBytes), startup)
        let slowPlayer = mpv ? "mpv" : "ffmpeg -re"
        let noBound = "none set"
        return [
            .init(row: .play, key: "play", name: "1. 20 s from 0:30, 10 Mbit/s link", target: .atMost(25), bound: "<= 1.15 x 20 s + 2 s = 25.0 s", main: true),
            .init(row: .play, key: "seek", name: "2. then a seek to 1:30, 10 s", target: .atMost(13.5), bound: "<= 1.15 x 10 s + 2 s = 13.5 s", main: true),
            .init(row: .three, key: "three", name: "3. three players, three films at once, 20 Mbit/s link, 20 s each from 0:30",
                  target: .atMost(25), bound: "each <= 25 s", main: true),
            .init(row: .trickplay, key: "trickplay",
                  name: String(format: "3b. 20 s from 0:30 while two trickplay-style jobs run (started %.0f s before), 10 Mbit/s link",
                               PlaybackSession.trickplayLead),
                  target: .atMost(22), bound: "<= 1.05 x 20 s + 1 s = 22.0 s", main: true),
            .init(row: .bwlimit, key: "bwlimit", name: "4. 20 s from 0:30, --bwlimit 1.25M, loopback", target: .atMost(25), bound: "<= 25 s", main: true),
            .init(row: .bwlimit1M, key: "slow", name: "5. \(slowPlayer), 15 s from 0:30, --bwlimit 1M, loopback", target: .atMost(19), bound: "<= 19 s", main: true),
            .init(row: .startup, key: "startup.open", name: "6. first frame at 1:00 after open, cold, 10 Mbit/s link", target: .atMost(startup),
                  bound: startupBound, main: true),
            .init(row: .startup, key: "startup.seek", name: "6. then first frame at 0:20 (a seek), cold there", target: .atMost(startup),
                  bound: startupBound, main: true),
            .init(row: .ffprobe, key: "ffprobe", name: "7. origin bytes, one cold ffprobe of a moov-at-end MP4, 10 Mbit/s link",
                  target: .atMost(1e6), bound: "<= 1 MB", main: true),

            .init(row: .play, key: "play.stall", name: "stall, row 1 (wall - 20 s played)", target: .atMost(5), bound: "<= 5.0 s", main: false),
            .init(row: .play, key: "seek.stall", name: "stall, row 2 (wall - 10 s played)", target: .atMost(3.5), bound: "<= 3.5 s", main: false),
            .init(row: .three, key: "three.stall", name: "stalls, row 3 (wall - 20 s played)", target: .atMost(5), bound: "each <= 5.0 s", main: false),
            .init(row: .bwlimit, key: "bwlimit.stall", name: "stall, row 4 (wall - 20 s played)", target: .atMost(5), bound: "<= 5.0 s", main: false),
            .init(row: .bwlimit1M, key: "slow.stall", name: "stall, row 5 (wall - 15 s played)", target: .atMost(4), bound: "<= 4.0 s", main: false),
            .init(row: .play, key: "play.origin", name: "rows 1-2: origin bytes (counted 2 s after the second play)", target: nil, bound: noBound, main: false),
            .init(row: .play, key: "play.rate", name: String(format: "rows 1-2: origin bytes per second played (30 s; the film: %@/s)",
                                                             PlaybackSession.mb(film.bitRate / 8)),
                  target: nil, bound: noBound, main: false),
            .init(row: .play, key: "play.unread", name: "rows 1-2: read-ahead never read (origin bytes - bytes the plays needed)",
                  target: nil, bound: noBound, main: false),
            .init(row: .three, key: "three.origin", name: "row 3: origin bytes, three films, 60 s played", target: nil, bound: noBound, main: false),
            .init(row: .trickplay, key: "trickplay.origin", name: "row 3b: origin bytes while the film played",
                  target: nil, bound: noBound, main: false),
            .init(row: .bwlimit, key: "bwlimit.origin", name: "row 4: origin bytes (20 s played)", target: nil, bound: noBound, main: false),
            .init(row: .bwlimit1M, key: "slow.origin", name: "row 5: origin bytes (15 s played)", target: nil, bound: noBound, main: false),
            .init(row: .ffprobe, key: "ffprobe.time", name: "row 7: the cold ffprobe's time", target: nil, bound: noBound, main: false),
        ]
    }
}

/// What every side measured for every row, and the tables made of it.
struct PlaybackResults {
    private enum Cell {
        case value(PlaybackValue)
        case failed
        case skipped(String)
    }

    private var cells: [String: [PlaybackSide: Cell]] = [:]
    /// Rows that did not produce values, by row and side: why.
    private var outcomes: [PlaybackRow: [PlaybackSide: Cell]] = [:]
    private var notes: [String] = []

    mutating func record(_ row: PlaybackRow, _ side: PlaybackSide, _ values: [String: PlaybackValue]) {
        for (key, value) in values { cells[key, default: [:]][side] = .value(value) }
    }

    mutating func skip(_ row: PlaybackRow, _ side: PlaybackSide, _ why: String) {
        outcomes[row, default: [:]][side] = .skipped(why)
    }

    mutating func fail(_ row: PlaybackRow, _ side: PlaybackSide, _ error: String) {
        outcomes[row, default: [:]][side] = .failed
        notes.append("row '\(row.rawValue)', \(side.title) failed: \(error)")
    }

    func render(film: PlaybackFilm, lines: [PlaybackLine], only: Set<PlaybackRow>) -> String {
        let header = ["row", "httpcachefs", "rclone, one stream", "rclone, 16 x 4M streams", "bound", "httpcachefs"]
        func table(main: Bool, title: String) -> String {
            var rows = [header.enumerated().map { $0.offset == 0 ? title : $0.element }]
            for line in lines where line.main == main && only.contains(line.row) {
                var row = [line.name]
                var verdict = ""
                for side in PlaybackSide.allCases {
                    switch cells[line.key]?[side] ?? outcomes[line.row]?[side] ?? .failed {
                    case let .value(v):
                        let met = line.target.map { t in v.values.allSatisfy { t.isMet(by: $0) } }
                        if side == .httpcachefs {
                            row.append(v.text)
                            verdict = met.map { $0 ? "met" : "MISSED" } ?? ""
                        } else {
                            row.append(v.text + (met.map { $0 ? " (met)" : " (missed)" } ?? ""))
                        }
                    case .failed:
                        row.append("failed (below)")
                        if side == .httpcachefs { verdict = "failed" }
                    case let .skipped(why):
                        row.append(why)
                    }
                }
                rows.append(row + [line.bound, verdict])
            }
            return CoreBench.table(rows)
        }
        let extra = lines.contains { !$0.main && only.contains($0.row) }
        return ([table(main: true, title: "play")] + (extra ? ["", table(main: false, title: "extra figures")] : []))
            .joined(separator: "\n") + (notes.isEmpty ? "" : "\n\n" + notes.joined(separator: "\n"))
    }
}
