import CacheCore
import Foundation
import Proxy
import TestSupport
import XCTest

/// Real players on proxy URLs: ffprobe and ffmpeg read an MP4 (moov at the end, so they seek)
/// and an HLS stream (master → TS variant with AES-128 keys, and an fMP4 variant with an init
/// section) through the proxy. The media is made with ffmpeg's test sources at set-up.
final class ProxyPlayerTests: XCTestCase {
    var h: ProxyHarness!
    var media: TemporaryDirectory!

    override func setUpWithError() throws {
        guard let ffmpeg = Tool.find("ffmpeg"), Tool.find("ffprobe") != nil else {
            print("⚠️  SKIPPED ProxyPlayerTests: ffmpeg/ffprobe not installed; real-player tests did not run")
            throw XCTSkip("ffmpeg/ffprobe not installed")
        }
        media = TemporaryDirectory(prefix: "httpcachefs-media")
        let d = media.path
        let src = ["-f", "lavfi", "-i", "testsrc=duration=3:size=160x120:rate=10",
                   "-f", "lavfi", "-i", "sine=frequency=440:duration=3", "-c:v", "libx264", "-preset", "ultrafast",
                   "-g", "10", "-c:a", "aac", "-shortest"]
        try Tool.run(ffmpeg, ["-v", "error", "-y"] + src + [d + "/movie.mp4"])
        try FileManager.default.createDirectory(atPath: d + "/hls/ts", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: d + "/hls/fmp4", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: d + "/keys", withIntermediateDirectories: true)
        try Data((0..<16).map { UInt8($0 * 7) }).write(to: URL(fileURLWithPath: d + "/keys/k.bin"))
        // Key URI is root-relative on the origin; the file ffmpeg encrypts with is local.
        try "/keys/k.bin\n\(d)/keys/k.bin\n".write(toFile: d + "/keyinfo", atomically: true, encoding: .utf8)
        try Tool.run(ffmpeg, ["-v", "error", "-y"] + src + [
            "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_key_info_file", d + "/keyinfo",
            "-hls_segment_filename", d + "/hls/ts/seg%d.ts", d + "/hls/ts/index.m3u8"])
        try Tool.run(ffmpeg, ["-v", "error", "-y"] + src + [
            "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4",
            "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename", d + "/hls/fmp4/part%d.m4s", d + "/hls/fmp4/index.m3u8"])
        try """
        #EXTM3U
        #EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120
        ts/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=200000,RESOLUTION=160x120
        fmp4/index.m3u8

        """.write(toFile: d + "/hls/master.m3u8", atomically: true, encoding: .utf8)

        h = try ProxyHarness()
        let files = FileManager.default.enumerator(atPath: d)!.compactMap { $0 as? String }
        for rel in files where !rel.hasSuffix("keyinfo") {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: d + "/" + rel, isDirectory: &isDir), !isDir.boolValue else { continue }
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: d + "/" + rel)))
            // Playlists with their proper type; media with the generic one many servers send.
            h.origin.setFile("/" + rel, data: bytes, contentType: rel.hasSuffix(".m3u8") ? "application/x-mpegURL" : nil)
        }
    }

    override func tearDown() {
        h?.shutdown()
        media?.remove()
    }

    func testFFprobeAndFFmpegReadAnMP4ThroughTheProxy() throws {
        let url = h.url("/movie.mp4")
        XCTAssertTrue(url.hasSuffix("/movie.mp4"))
        let probe = try Tool.run(Tool.find("ffprobe")!, ["-v", "error", "-show_entries", "stream=codec_type:format=duration",
                                                          "-of", "default=noprint_wrappers=1", url])
        XCTAssertTrue(probe.contains("codec_type=video"), probe)
        XCTAssertTrue(probe.contains("codec_type=audio"), probe)
        try Tool.run(Tool.find("ffmpeg")!, ["-v", "error", "-i", url, "-f", "null", "-"])
        let size = try FileManager.default.attributesOfItem(atPath: media.path + "/movie.mp4")[.size] as! Int
        XCTAssertLessThanOrEqual(h.origin.bytesServed(path: "/movie.mp4"), Int64(size),
                                 "every byte came from the origin at most once")
    }

    func testFFprobeAndFFmpegPlayAnHLSMasterPlaylistThroughTheProxy() throws {
        let url = h.url("/hls/master.m3u8")
        let probe = try Tool.run(Tool.find("ffprobe")!, ["-v", "error", "-show_entries", "stream=codec_type",
                                                          "-of", "default=noprint_wrappers=1", url])
        XCTAssertTrue(probe.contains("codec_type=video"), probe)
        // Decode every variant to the end (ffmpeg opens all programs of a master playlist).
        try Tool.run(Tool.find("ffmpeg")!, ["-v", "error", "-i", url, "-map", "0", "-f", "null", "-"])
        XCTAssertGreaterThan(h.origin.requestCount(path: "/keys/k.bin"), 0, "the AES key went through the proxy")
        XCTAssertGreaterThan(h.origin.requestCount(path: "/hls/fmp4/init.mp4"), 0, "the init section went through the proxy")
        XCTAssertGreaterThan(h.origin.requestCount(path: "/hls/ts/seg2.ts"), 0)
        // A second player is served from the cache.
        h.origin.resetLog()
        try Tool.run(Tool.find("ffmpeg")!, ["-v", "error", "-i", url, "-map", "0", "-f", "null", "-"])
        let segmentRequests = h.origin.requests.filter { !$0.path.hasSuffix(".m3u8") }
        XCTAssertEqual(segmentRequests.map(\.path), [], "segments, keys and init sections are cache hits")
    }
}

/// Runs a command line tool with a bounded time, for the player tests.
enum Tool {
    static func find(_ name: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let p = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }

    struct Failed: Error, CustomStringConvertible { var description: String }

    /// Runs `path args`, returns stdout; throws with stderr on a non-zero exit or after `timeout`.
    @discardableResult
    static func run(_ path: String, _ args: [String], timeout: TimeInterval = 120) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in done.signal() }
        try p.run()
        // Drain both pipes while the tool runs, so a chatty tool cannot block on a full pipe.
        let outData = DataBox(), errData = DataBox()
        let readers = DispatchGroup()
        for (handle, box) in [(out.fileHandleForReading, outData), (err.fileHandleForReading, errData)] {
            readers.enter()
            Thread.detachNewThread { box.data = handle.readDataToEndOfFile(); readers.leave() }
        }
        if done.wait(timeout: .now() + timeout) == .timedOut {
            p.terminate()
            _ = done.wait(timeout: .now() + 5)
            throw Failed(description: "\(path) timed out after \(timeout)s")
        }
        _ = readers.wait(timeout: .now() + 10)
        let stdout = String(decoding: outData.data, as: UTF8.self)
        guard p.terminationStatus == 0 else {
            throw Failed(description: "\((path as NSString).lastPathComponent) \(args.joined(separator: " ")) exited \(p.terminationStatus): \(String(decoding: errData.data, as: UTF8.self))")
        }
        return stdout
    }
}

final class DataBox: @unchecked Sendable {
    private let lock = NSLock()
    private var _data = Data()
    var data: Data {
        get { lock.lock(); defer { lock.unlock() }; return _data }
        set { lock.lock(); _data = newValue; lock.unlock() }
    }
}
