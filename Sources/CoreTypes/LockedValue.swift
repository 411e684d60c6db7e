#if canImport(Glibc)
import Glibc
#endif

/// A value and the lock that guards it: `Synchronization.Mutex`'s interface (the value is reached
/// only inside `withLock`, and what goes in or out is checked by the same `sending` rules), over a
/// pthread mutex.
///
/// Why not `Mutex` itself: on Linux it locks with atomics and `futex` calls that ThreadSanitizer
/// does not see, so every value a `Mutex` guards is reported as a race (the CI runs the tests
/// under ThreadSanitizer); `pthread_mutex_lock` is what it watches. As cheap as an `NSLock`:
/// two allocations (this object, and the value with its mutex), no recursion. Mostly a
/// leaf lock; `body` must never take another one that is ever held around it (`EntrySink`'s two
/// are held around the shard lock, which is why nothing under a shard lock takes them).
// @unchecked: the value is only reached through `withLock`, with the mutex held; the `sending`
// parameter and result keep non-Sendable state from leaving it (as `Mutex` does).
public final class LockedValue<Value>: @unchecked Sendable {
    /// The value (the header) and its mutex (the one element), in one allocation.
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit { _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) } }
    }

    /// Keeps the allocation that `value` and `mutex` point into.
    private let storage: Storage
    // Reached by the inlinable `withLock` (and `ConditionLock`'s), so that every module's shard
    // and leaf locks inline it.
    @usableFromInline let value: UnsafeMutablePointer<Value>
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ initial: sending Value) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: 1) { _ in initial }, to: Storage.self)
        (value, mutex) = storage.withUnsafeMutablePointers { ($0, $1) }
        mutex.initialize(to: pthread_mutex_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init")
    }

    @inlinable @inline(__always)
    public func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        // The checker cannot see through the pointer; the lock makes the value this caller's alone.
        nonisolated(unsafe) let value = value
        return try body(&value.pointee)
    }

    /// `withLock` if the lock is free now; nil, without waiting, if another thread holds it.
    @inlinable
    public func withLockIfAvailable<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        nonisolated(unsafe) let value = value
        return try body(&value.pointee)
    }
}
