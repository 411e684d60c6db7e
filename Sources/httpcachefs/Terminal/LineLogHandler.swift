import CacheCore
import Foundation
import Logging
import Settings

/// Where log lines go: stderr or an append-only log file, one `write(2)` per line under a lock,
/// so lines from engine, curl and NIO threads never interleave.
final class LogSink: Sendable {
    /// The descriptor, under the lock that keeps one line's `write` from another's.
    private let fd: LockedValue<Int32>
    private let ownsDescriptor: Bool

    static let standardError = LogSink(fd: 2, ownsDescriptor: false)

    private init(fd: Int32, ownsDescriptor: Bool) {
        self.fd = LockedValue(fd)
        self.ownsDescriptor = ownsDescriptor
    }

    /// Opens `path` for appending, creating it (and nothing else) if needed.
    static func file(_ path: String) throws -> LogSink {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)   // URLs are private
        guard fd >= 0 else {
            throw UsageError("cannot open log file \(path): \(String(cString: strerror(errno)))")
        }
        return LogSink(fd: fd, ownsDescriptor: true)
    }

    deinit { if ownsDescriptor { fd.withLock { _ = close($0) } } }

    /// Every line is made `Format.terminalSafe`: errors, warnings and log lines quote what
    /// origins sent, and stderr and a log file being followed are terminals.
    func write(line: String) {
        var bytes = Array(Format.terminalSafe(line).utf8)
        bytes.append(UInt8(ascii: "\n"))
        fd.withLock { _ = FileDescriptorOutput.writeAll(fd: $0, bytes[...]) }
    }
}

/// swift-log handler writing `2026-11-21T12:00:00Z info httpcachefs.cache: message key=value`.
struct LineLogHandler: LogHandler {
    let label: String
    let sink: LogSink
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, sink: LogSink, level: Logger.Level) {
        self.label = label
        self.sink = sink
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        var line = "\(Self.timestamp()) \(event.level) \(label): \(event.message)"
        for key in all.keys.sorted() {
            line += " \(key)=\(Self.quoted(all[key]!.description))"
        }
        // URL passwords never reach a log, whichever message or error quotes the URL.
        sink.write(line: DisplayURL.redactingPasswords(in: line))
    }

    /// Values with spaces, quotes or `=` are quoted so a line splits back into its fields.
    static func quoted(_ value: String) -> String {
        if !value.isEmpty, !value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\n" }) { return value }
        return "\"" + value.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }

    /// UTC, to the second, ISO 8601; `gmtime_r` because DateFormatter is slow and not
    /// something to share across threads.
    /// `separator` between the date and the time: `T` (ISO 8601), or a space (`Format.date`).
    /// Digits written by hand: `String(format:)` was a tenth of `cache ls`'s time at a million lines.
    static func timestamp(_ date: Date = Date(), separator: UInt8 = UInt8(ascii: "T")) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        var out: [UInt8] = []
        out.reserveCapacity(20)
        func digits(_ value: Int, _ width: Int) {
            var v = max(0, value), buffer = [UInt8](repeating: UInt8(ascii: "0"), count: width)
            for i in stride(from: width - 1, through: 0, by: -1) {
                buffer[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            }
            if v > 0 { out += Array(String(max(0, value)).utf8) } else { out += buffer }
        }
        digits(Int(parts.tm_year) + 1900, 4); out.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2); out.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2); out.append(separator)
        digits(Int(parts.tm_hour), 2); out.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2); out.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2); out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }
}

/// The process-wide logging setup: bootstrapped once, so loggers that libraries create with a
/// plain `Logger(label:)` land in the same place with the same level.
enum LoggingSetup {
    private static let installed = LockedValue<(sink: LogSink, level: Logger.Level)?>(nil)

    /// Installs `sink` and `level` the first time; later calls get the first setup back
    /// (`LoggingSystem.bootstrap` may only run once per process).
    static func install(sink: @autoclosure () -> LogSink, level: Logger.Level) -> (sink: LogSink, level: Logger.Level) {
        installed.withLock { installed in
            if let installed { return installed }
            let chosen = (sink: sink(), level: level)
            installed = chosen
            LoggingSystem.bootstrap { label in LineLogHandler(label: label, sink: chosen.sink, level: chosen.level) }
            return chosen
        }
    }
}
