import CacheCore
import Foundation

/// A completion's result, handed from an engine thread to the test.
public final class ResultBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<T, CacheError>?

    public init() {}

    public func set(_ r: Result<T, CacheError>) { lock.lock(); result = r; lock.unlock() }

    /// The result set, or `CacheError.cancelled` when none was.
    public func get() throws -> T {
        lock.lock(); defer { lock.unlock() }
        guard let result else { throw CacheError.cancelled }
        return try result.get()
    }
}
