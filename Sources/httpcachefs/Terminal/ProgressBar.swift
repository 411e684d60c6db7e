import CacheCore
import Foundation

/// A one-line progress bar on stderr for `preload` on a terminal:
///
///     [##########>           ]  45%  460 MiB / 1.00 GiB  112 MiB/s  ETA 5s  video.mp4
///
/// Redrawn about five times a second from a timer (so a stalled download still shows its
/// falling rate), never from the read loop; `advance` only adds under a lock.
final class ProgressBar: Sendable {
    private struct Progress {
        var label: String
        var total: Int64?
        var done: Int64 = 0
        var finished = false
    }

    private let progress: LockedValue<Progress>
    /// Redraws the bar until `finish` (cancelling twice is harmless). Its handler holds the
    /// progress, not the bar, so the bar's `deinit` can cancel it.
    private let timer: LockedValue<DispatchSourceTimer>

    /// Whether stderr is a terminal (otherwise `preload` prints summary lines only).
    static var isAvailable: Bool { isatty(2) == 1 }

    init(label: String, total: Int64?) {
        let progress = LockedValue(Progress(label: label, total: total)), started = Date()
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        timer.schedule(deadline: .now(), repeating: .milliseconds(200))
        timer.setEventHandler { Self.draw(progress, started: started) }
        timer.resume()
        self.progress = progress
        self.timer = LockedValue(timer)
    }

    func advance(by bytes: Int64) {
        progress.withLock { $0.done += bytes }
    }

    /// For work whose size is learnt on the way (an HLS stream): absolute progress, a total that
    /// grows, and what is being fetched now.
    func update(done: Int64, total: Int64?, label: String) {
        progress.withLock { $0 = Progress(label: label, total: total, done: done, finished: $0.finished) }
    }

    /// Stops redrawing and erases the bar, leaving the cursor at the start of an empty line.
    func finish() {
        progress.withLock { $0.finished = true }
        timer.withLock { $0.cancel() }
        Self.write("\r\u{1B}[K")
    }

    deinit { timer.withLock { $0.cancel() } }

    private static func draw(_ progress: LockedValue<Progress>, started: Date) {
        let p = progress.withLock { $0 }
        let done = p.done, total = p.total, label = p.label
        if p.finished { return }
        let line = Self.render(label: label, done: done, total: total,
                               elapsed: Date().timeIntervalSince(started), width: Self.terminalWidth())
        Self.write("\r" + line + "\u{1B}[K")
    }

    /// The bar for `done` of `total` bytes after `elapsed` seconds, at most `width` columns.
    static func render(label: String, done: Int64, total: Int64?, elapsed: TimeInterval, width: Int) -> String {
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        var stats = total.map { "\(Format.bytes(done)) / \(Format.bytes($0))" } ?? Format.bytes(done)
        stats += "  " + Format.rate(bytes: done, seconds: elapsed)
        if let total, rate > 0, done < total {
            stats += "  ETA " + Format.eta(Double(total - done) / rate)
        }
        var line = ""
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            // Sized from the terminal and label only, so the bar does not jump as the numbers change.
            let barWidth = max(10, min(30, width - label.count - 62))
            let filled = Int(fraction * Double(barWidth))
            let bar = String(repeating: "#", count: filled)
                + (filled < barWidth ? ">" + String(repeating: " ", count: barWidth - filled - 1) : "")
            line = "[\(bar)] \(String(format: "%3d%%", Int(fraction * 100)))  "
        }
        line += stats + "  " + label
        return line.count > width ? String(line.prefix(max(0, width - 1))) : line
    }

    private static func terminalWidth() -> Int {
        var size = winsize()
        if ioctl(2, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    private static func write(_ s: String) {
        _ = FileDescriptorOutput.writeAll(fd: 2, Array(s.utf8)[...])
    }
}
