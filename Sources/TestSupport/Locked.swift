import Foundation

/// A value shared between a test (or benchmark) and the threads it starts.
///
/// `value[i] = x` from several threads would be a read, a change and a write, each locked on its
/// own, so one thread's write could undo another's: changes go through `mutate`, in one hold of
/// the lock.
public final class Locked<T>: @unchecked Sendable {
    // @unchecked: `_value` is only touched with `lock` held.
    private let lock = NSLock()
    private var _value: T

    public init(_ value: T) { _value = value }

    public var value: T {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }

    /// Changes the value in place, under the lock.
    public func mutate<R>(_ change: (inout T) throws -> R) rethrows -> R {
        try lock.withLock { try change(&_value) }
    }
}
