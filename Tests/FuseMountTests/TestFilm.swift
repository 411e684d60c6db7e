import Foundation
import TestSupport

/// A short film that ffmpeg makes for a test: test-card video and a sine tone in H.264 and AAC,
/// in the container `ext` names. An MP4 keeps ffmpeg's default layout, its index (moov) after the
/// media, so a probe reads both the head and the tail, as of a real film.
enum TestFilm {
    /// The film's bytes, or why ffmpeg could not make it (its exit status).
    static func make(ffmpeg: String, ext: String, seconds: Int, size: String, videoBitrate: String? = nil) -> Result<[UInt8], TestFilmError> {
        let out = NSTemporaryDirectory() + "httpcachefs-film-\(getpid())-\(UUID().uuidString).\(ext)"
        defer { unlink(out) }
        let status = MediaPlayerTests.runQuietly(ffmpeg, [
            "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=\(seconds):size=\(size):rate=25",
            "-f", "lavfi", "-i", "sine=duration=\(seconds)", "-c:v", "libx264", "-preset", "ultrafast"]
            + (videoBitrate.map { ["-b:v", $0] } ?? []) + ["-pix_fmt", "yuv420p", "-c:a", "aac", out])
        guard status == 0, let data = FileManager.default.contents(atPath: out) else {
            return .failure(TestFilmError(message: "ffmpeg could not generate the test \(ext) (status \(status))"))
        }
        return .success([UInt8](data))
    }
}

struct TestFilmError: Error { let message: String }
