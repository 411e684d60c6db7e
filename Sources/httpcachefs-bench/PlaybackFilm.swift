import ArgumentParser
import Foundation
import TestSupport

/// The films `httpcachefs-bench playback` plays: made once by ffmpeg into a work directory and
/// reused while ffprobe finds them as they should be.
///
/// - `film.mp4`: H.264, 1280x720 at 30 fps, `seconds` long, about 4 Mbit/s at a constant rate
///   (x264's `nal-hrd=cbr`: a noisy test pattern that really needs the bits, filler where it does
///   not), a keyframe every 2 s exactly, moov at the start (`+faststart`);
/// - `film-2.mp4`, `film-3.mp4`: copies of it, so three players have three URLs to cache;
/// - `film-moov-end.mp4`: the same stream remuxed without `+faststart` (moov after mdat).
struct PlaybackFilm {
    static let names = ["film.mp4", "film-2.mp4", "film-3.mp4"]
    static let moovAtEnd = "film-moov-end.mp4"
    static let gopSeconds = 2.0
    static let frameRate = 30

    /// One video packet as ffprobe lists it.
    struct Packet {
        var time: Double
        var position: Int64
        var size: Int64
        var isKey: Bool
    }

    let directory: String
    let duration: Double
    /// Bits per second over the whole file, as ffprobe reports it.
    let bitRate: Double
    let size: Int64
    /// Bytes before the first packet: ftyp and moov, which every open reads.
    let headerBytes: Int64
    let packets: [Packet]

    var path: String { directory + "/" + Self.names[0] }
    /// The bytes of one GOP at the film's bit rate.
    var gopBytes: Double { bitRate * Self.gopSeconds / 8 }

    /// Makes the films in `directory` unless they are there and valid; then reads the first one's
    /// packet index.
    static func prepare(in directory: String, seconds: Int, ffmpeg: String, ffprobe: String,
                        log: (String) -> Void) throws -> PlaybackFilm {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let film = directory + "/" + names[0]
        if (try? check(film, seconds: seconds, moovFirst: true, ffprobe: ffprobe)) == nil {
            log("making the film: \(seconds) s of 1280x720 H.264 at 4 Mbit/s into \(film) (about \(seconds / 2) s)")
            let temporary = directory + "/making.mp4"
            let status = try Spawned.run(ffmpeg, [
                "-nostdin", "-v", "error", "-y", "-f", "lavfi",
                "-i", "testsrc2=size=1280x720:rate=\(frameRate):duration=\(seconds)",
                // Temporal noise: every frame differs, so 4 Mbit/s is needed, not just allowed.
                "-vf", "noise=alls=30:allf=t+u",
                "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                "-b:v", "4M", "-minrate", "4M", "-maxrate", "4M", "-bufsize", "4M",
                "-x264-params", "nal-hrd=cbr:keyint=\(Int(gopSeconds) * frameRate):min-keyint=\(Int(gopSeconds) * frameRate):scenecut=0",
                "-movflags", "+faststart", temporary,
            ])
            guard status == 0 else { throw ValidationError("ffmpeg could not make the film (status \(status))") }
            try? FileManager.default.removeItem(atPath: film)
            try FileManager.default.moveItem(atPath: temporary, toPath: film)
            try check(film, seconds: seconds, moovFirst: true, ffprobe: ffprobe)
        }
        let filmSize = try fileSize(film)
        for (i, copy) in names.dropFirst().enumerated() {
            let path = directory + "/" + copy
            if (try? fileSize(path)) != filmSize {
                try? FileManager.default.removeItem(atPath: path)
                try FileManager.default.copyItem(atPath: film, toPath: path)
                // Another modification time: another ETag at the origin, as another film would have.
                try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_000 + Double(i))],
                                                      ofItemAtPath: path)
            }
        }
        let moovEnd = directory + "/" + moovAtEnd
        if (try? check(moovEnd, seconds: seconds, moovFirst: false, ffprobe: ffprobe)) == nil {
            log("remuxing it with the moov at the end into \(moovEnd)")
            let temporary = directory + "/making-moov-end.mp4"
            let status = try Spawned.run(ffmpeg, ["-nostdin", "-v", "error", "-y", "-i", film, "-c", "copy", temporary])
            guard status == 0 else { throw ValidationError("ffmpeg could not remux the film (status \(status))") }
            try? FileManager.default.removeItem(atPath: moovEnd)
            try FileManager.default.moveItem(atPath: temporary, toPath: moovEnd)
            try check(moovEnd, seconds: seconds, moovFirst: false, ffprobe: ffprobe)
        }

        let format = try probe(ffprobe, ["-show_entries", "format=duration,bit_rate", film])
        guard let duration = format["duration"].flatMap(Double.init), let bitRate = format["bit_rate"].flatMap(Double.init) else {
            throw ValidationError("ffprobe gave no duration or bit rate for \(film)")
        }
        let listing = try ExternalTool.run(ffprobe, ["-v", "error", "-select_streams", "v", "-show_entries",
                                                     "packet=pts_time,pos,size,flags", "-of", "compact=p=0", film], timeout: 60)
        let packets: [Packet] = listing.stdout.split(separator: "\n").compactMap { line in
            let fields = Dictionary(line.split(separator: "|").compactMap { field -> (String, String)? in
                let kv = field.split(separator: "=", maxSplits: 1)
                return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
            }, uniquingKeysWith: { a, _ in a })
            guard let t = fields["pts_time"].flatMap(Double.init), let pos = fields["pos"].flatMap(Int64.init),
                  let size = fields["size"].flatMap(Int64.init) else { return nil }
            return Packet(time: t, position: pos, size: size, isKey: fields["flags"]?.hasPrefix("K") == true)
        }.sorted { $0.position < $1.position }
        guard packets.count > Int(duration) * frameRate / 2, let first = packets.first else {
            throw ValidationError("ffprobe listed \(packets.count) packets of \(film)")
        }
        return PlaybackFilm(directory: directory, duration: duration, bitRate: bitRate, size: filmSize,
                            headerBytes: first.position, packets: packets)
    }

    /// The bytes of the file a player needs to play `seconds` from `start`: the header, and the
    /// packets from the keyframe at or before `start` to `start + seconds`.
    func neededRange(from start: Double, seconds: Double) -> ClosedRange<Int64> {
        let keyframe = packets.filter { $0.isKey && $0.time <= start + 0.001 }.map(\.time).max() ?? 0
        let played = packets.filter { $0.time >= keyframe - 0.001 && $0.time < start + seconds }
        guard let low = played.map(\.position).min(), let high = played.map({ $0.position + $0.size }).max() else {
            return 0...0
        }
        return low...(high - 1)
    }

    /// The bytes several plays need together: the header plus the union of their ranges.
    func neededBytes(_ plays: [(start: Double, seconds: Double)]) -> Int64 {
        var ranges = plays.map { neededRange(from: $0.start, seconds: $0.seconds) } + [0...(headerBytes - 1)]
        ranges.sort { $0.lowerBound < $1.lowerBound }
        var total: Int64 = 0, covered: Int64 = -1
        for r in ranges where r.upperBound > covered {
            total += r.upperBound - max(r.lowerBound, covered + 1) + 1
            covered = r.upperBound
        }
        return total
    }

    /// ffprobe's verdict on `path`: H.264, about `seconds` long, 3-6 Mbit/s, the moov where
    /// `moovFirst` says.
    @discardableResult
    private static func check(_ path: String, seconds: Int, moovFirst: Bool, ffprobe: String) throws -> Double {
        let fields = try probe(ffprobe, ["-select_streams", "v", "-show_entries", "format=duration,bit_rate:stream=codec_name", path])
        guard fields["codec_name"] == "h264", let duration = fields["duration"].flatMap(Double.init),
              abs(duration - Double(seconds)) < 1, let rate = fields["bit_rate"].flatMap(Double.init), (3e6...6e6).contains(rate) else {
            throw ValidationError("\(path) is not the film: \(fields)")
        }
        let boxes = try topLevelBoxes(path)
        guard let moov = boxes.firstIndex(of: "moov"), let mdat = boxes.firstIndex(of: "mdat"), (moov < mdat) == moovFirst else {
            throw ValidationError("\(path): boxes \(boxes), the moov should be \(moovFirst ? "first" : "last")")
        }
        return rate
    }

    /// `key=value` lines of ffprobe's output for `arguments`.
    private static func probe(_ ffprobe: String, _ arguments: [String]) throws -> [String: String] {
        let out = try ExternalTool.run(ffprobe, ["-v", "error", "-of", "default=noprint_wrappers=1"] + arguments, timeout: 60)
        guard out.status == 0 else { throw ValidationError("ffprobe \(arguments.last ?? ""): \(out.stderr)") }
        return Dictionary(out.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
            let kv = line.split(separator: "=", maxSplits: 1)
            return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
        }, uniquingKeysWith: { a, _ in a })
    }

    /// The types of an MP4's top-level boxes, in order (at most 64).
    static func topLevelBoxes(_ path: String) throws -> [String] {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw ValidationError("cannot open \(path)") }
        defer { try? handle.close() }
        let length = try fileSize(path)
        var offset: Int64 = 0
        var types: [String] = []
        while offset + 8 <= length && types.count < 64 {
            try handle.seek(toOffset: UInt64(offset))
            let head = [UInt8](handle.readData(ofLength: 16))
            guard head.count >= 8 else { break }
            var size = head[0..<4].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            if size == 1, head.count == 16 { size = head[8..<16].reduce(Int64(0)) { $0 << 8 | Int64($1) } }
            if size == 0 { size = length - offset }
            types.append(String(decoding: head[4..<8], as: UTF8.self))
            guard size >= 8 else { break }
            offset += size
        }
        return types
    }

    static func fileSize(_ path: String) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        guard let size = attributes[.size] as? NSNumber else { throw ValidationError("no size for \(path)") }
        return size.int64Value
    }
}
