import Foundation

/// A fresh directory under `$TMPDIR` (or /tmp) for one test: a cache root, a mount point...
///
/// Removed by `remove()` or when the object goes away, so a failing test leaves nothing behind.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String
    private let lock = NSLock()
    private var removed = false

    public init(prefix: String = "httpcachefs-test") {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed under \(base): errno \(errno)")
        path = String(cString: made!)
    }

    /// `path + "/" + name`.
    public func appending(_ name: String) -> String { path + "/" + name }

    /// Deletes the directory and everything in it. Safe to call twice.
    public func remove() {
        lock.lock()
        defer { lock.unlock() }
        guard !removed else { return }
        removed = true
        try? FileManager.default.removeItem(atPath: path)
    }

    deinit { remove() }
}
