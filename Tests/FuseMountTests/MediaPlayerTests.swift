import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Real players on a mounted MP4 whose index (moov) is at the END of the file, so the player
/// must read the head, jump to the tail, then come back: the access pattern that makes naive
/// FUSE caches download whole files.
final class MediaPlayerTests: XCTestCase {
    static let duration = 30
    nonisolated(unsafe) static var video: [UInt8]?
    nonisolated(unsafe) static var skipReason: String?

    override class func setUp() {
        guard let ffmpeg = ExternalTool.find("ffmpeg"), ExternalTool.find("ffprobe") != nil else {
            skipReason = "ffmpeg/ffprobe not installed (apt-get install ffmpeg)"
            return
        }
        let out = NSTemporaryDirectory() + "httpcachefs-moov-end-\(getpid()).mp4"
        defer { unlink(out) }
        // No +faststart: ffmpeg writes mdat first and moov last.
        let status = runQuietly(ffmpeg, ["-nostdin", "-v", "error", "-y", "-f", "lavfi",
                                         "-i", "testsrc=duration=\(duration):size=640x360:rate=25",
                                         "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", out])
        guard status == 0, let data = FileManager.default.contents(atPath: out) else {
            skipReason = "ffmpeg could not generate the test video (status \(status))"
            return
        }
        video = [UInt8](data)
    }

    private func requirePlayer() throws -> [UInt8] {
        if let reason = Self.skipReason {
            print("⚠️  SKIPPING real player test: \(reason)")
            throw XCTSkip(reason)
        }
        return Self.video!
    }

    func testTheTestVideoHasItsMoovAtTheEnd() throws {
        let video = try requirePlayer()
        let boxes = Self.topLevelBoxes(video)
        XCTAssertEqual(boxes.last, "moov", "\(boxes)")
        XCTAssertLessThan(boxes.firstIndex(of: "mdat") ?? .max, boxes.firstIndex(of: "moov") ?? -1)
    }

    func testFFprobeReadsTheDurationAndFFmpegDecodesFromTheMiddle() throws {
        let video = try requirePlayer()
        let m = try EngineMount(tree: { try treeFromList("films/test.mp4 = \($0.url("/v/test.mp4"))") },
                                setup: { $0.setFile("/v/test.mp4", data: video, contentType: "video/mp4") })
        defer { m.stop() }
        let file = m.path("films/test.mp4")

        let probe = try withinBound(120, "ffprobe") {
            try Self.capture(ExternalTool.find("ffprobe")!, ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", file])
        }
        XCTAssertEqual(probe.status, 0, probe.stderr)
        let seconds = try XCTUnwrap(Double(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), probe.stdout)
        XCTAssertEqual(seconds, Double(Self.duration), accuracy: 0.5)

        let decode = try withinBound(120, "ffmpeg -ss") {
            try Self.capture(ExternalTool.find("ffmpeg")!, ["-nostdin", "-v", "error", "-stats", "-ss", "\(Self.duration / 2)",
                                                     "-i", file, "-t", "3", "-f", "null", "-"])
        }
        XCTAssertEqual(decode.status, 0, decode.stderr)
        let frames = decode.stderr.components(separatedBy: "frame=").last
            .flatMap { Int($0.trimmingCharacters(in: .whitespaces).prefix(while: \.isNumber)) } ?? 0
        XCTAssertGreaterThanOrEqual(frames, 70, "3 s at 25 fps decoded: \(decode.stderr)")
    }

    // MARK: helpers

    static func topLevelBoxes(_ b: [UInt8]) -> [String] {
        var names: [String] = []
        var i = 0
        while i + 8 <= b.count {
            var size = Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
            names.append(String(decoding: b[(i + 4)..<(i + 8)], as: UTF8.self))
            if size == 1, i + 16 <= b.count {
                size = b[(i + 8)..<(i + 16)].reduce(0) { $0 << 8 | Int($1) }
            } else if size == 0 {
                size = b.count - i
            }
            guard size >= 8 else { break }
            i += size
        }
        return names
    }

    static func runQuietly(_ exe: String, _ args: [String]) -> Int32 {
        guard let pid = try? Subprocess.spawn(exe, args) else { return -1 }
        return Subprocess.wait(pid, timeout: 300) ?? -1
    }

    static func capture(_ exe: String, _ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let out = try ExternalTool.run(exe, args, timeout: 300)
        return (out.status, out.stdout, out.stderr)
    }
}
