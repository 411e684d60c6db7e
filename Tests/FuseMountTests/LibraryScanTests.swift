import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// A media server's probe through the mount costs about what it reads: real `ffprobe
/// -show_format -show_streams` on an MKV and on an MP4 whose index is at its end, served by the
/// in-process origin, against the same probe of a local copy (whose reads strace counts). Bytes,
/// never times.
final class LibraryScanTests: XCTestCase {
    nonisolated(unsafe) static var films: [String: [UInt8]] = [:]
    nonisolated(unsafe) static var skipReason: String?

    override class func setUp() {
        guard let ffmpeg = ExternalTool.find("ffmpeg"), ExternalTool.find("ffprobe") != nil, ExternalTool.find("strace") != nil else {
            skipReason = "ffmpeg, ffprobe or strace not installed (apt-get install ffmpeg strace)"
            return
        }
        // A minute of video and sound, a few MB: room for read-ahead to show.
        for ext in ["mkv", "mp4"] {
            switch TestFilm.make(ffmpeg: ffmpeg, ext: ext, seconds: 60, size: "320x240") {
            case let .success(film): films[ext] = film
            case let .failure(why): skipReason = why.message; return
            }
        }
    }

    private func requireTools() throws {
        if let reason = Self.skipReason { throw XCTSkip(reason) }
    }

    /// Bytes `ffprobe` reads of `file`, as strace counts its read and pread64 calls on it.
    private func bytesProbeReads(_ file: String) throws -> Int64 {
        let out = try ExternalTool.run(ExternalTool.find("strace")!, [
            "-f", "-qq", "-e", "trace=read,pread64", "-P", file, "--",
            ExternalTool.find("ffprobe")!, "-v", "error", "-show_format", "-show_streams", file], timeout: 120)
        XCTAssertEqual(out.status, 0, out.stderr)
        var total: Int64 = 0
        for line in out.stderr.split(separator: "\n") where line.contains("read") {
            if let n = line.split(separator: "=").last.flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }), n > 0 { total += n }
        }
        return total
    }

    private func probe(_ file: String) throws {
        let out = try withinBound(120, "ffprobe") {
            try ExternalTool.run(ExternalTool.find("ffprobe")!, ["-v", "error", "-show_format", "-show_streams", file], timeout: 120)
        }
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("codec_name=h264"), out.stdout)
    }

    func testAProbeOfAFilmCostsTheOriginAboutWhatItReads() throws {
        try requireTools()
        let local = TemporaryDirectory(prefix: "httpcachefs-scan-local")
        defer { local.remove() }
        let m = try EngineMount(tree: { o in
            try treeFromList(Self.films.keys.map { "films/film.\($0) = \(o.url("/v/film.\($0)"))" }.joined(separator: "\n"))
        }, setup: { o in
            for (ext, data) in Self.films { o.setFile("/v/film.\(ext)", data: data, contentType: "video/\(ext)") }
        })
        defer { m.stop() }
        for ext in Self.films.keys.sorted() {
            let copy = local.path + "/film.\(ext)"
            XCTAssertTrue(FileManager.default.createFile(atPath: copy, contents: Data(Self.films[ext]!)))
            let read = try bytesProbeReads(copy)
            XCTAssertGreaterThan(read, 0)
            let path = "/v/film.\(ext)"
            m.origin.resetLog()
            try probe(m.path("films/film.\(ext)"))
            let fetched = m.origin.bytesServed(path: path)
            let ranges = m.origin.requests.filter { $0.pathWithoutQuery == path }.map { $0.range ?? "whole" }
            print("ffprobe of a \(Self.films[ext]!.count)-byte \(ext): reads \(read) bytes locally, the mount fetched \(fetched) (\(ranges))")
            // The open's one-byte probe and the margin of each run are all that may come on top.
            XCTAssertLessThanOrEqual(Double(fetched), 1.5 * Double(read) + 1024,
                                     "\(ext): \(fetched) bytes from the origin for a probe that reads \(read): \(ranges)")
        }
    }
}
