import Foundation
import Logging

/// Every log line a test's logger receives, rendered as "level message key=value ..." with its
/// metadata sorted, for tests that pin what is logged.
public final class RecordedLog: @unchecked Sendable {   // the lines are guarded by `lock`
    private let lock = NSLock()
    private var _lines: [String] = []

    public init() {}

    public var lines: [String] { lock.withLock { _lines } }

    public var logger: Logger { Logger(label: "recorded") { _ in Handler(sink: self) } }

    struct Handler: LogHandler {
        let sink: RecordedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let line = "\(event.level) \(event.message) \(all.map { "\($0)=\($1)" }.sorted().joined(separator: " "))"
            sink.lock.withLock { sink._lines.append(line) }
        }
    }
}
