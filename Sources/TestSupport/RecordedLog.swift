import Foundation
import Logging

/// Every log line a test's logger receives, rendered as "level message key=value ..." with its
/// metadata sorted, for tests that pin what is logged, and for tests that wait until the code
/// says it did something (`wait(for:)`): a log line is the event.
public final class RecordedLog: @unchecked Sendable {   // the lines are guarded by `lock`
    /// A condition, not a plain lock: each line appended wakes `wait(for:)` and `wait(until:)`.
    private let lock = NSCondition()
    private var _lines: [String] = []

    public init() {}

    public var lines: [String] { lock.withLock { _lines } }

    public var logger: Logger { Logger(label: "recorded") { _ in Handler(sink: self) } }

    /// True once a line containing `text` has been logged (before or during the wait), false if
    /// none is after `timeout`, which bounds a hang and is never a measurement.
    @discardableResult
    public func wait(for text: String, timeout: TimeInterval = 30) -> Bool {
        wait(timeout: timeout) { lines.contains { $0.contains(text) } }
    }

    /// True once `condition` holds, looked at again after each line logged; false if it still
    /// does not after `timeout` (a bound on a hang, never a measurement). `condition` runs
    /// without this log's lock, so it may take the locks of the code that logs.
    @discardableResult
    public func wait(timeout: TimeInterval = 30, until condition: () throws -> Bool) rethrows -> Bool {
        try lock.waitForChanges(of: { _lines.count }, timeout: timeout, until: condition)
    }

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
            sink.lock.withLock {
                sink._lines.append(line)
                sink.lock.broadcast()
            }
        }
    }
}
