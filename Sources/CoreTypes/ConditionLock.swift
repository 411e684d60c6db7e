#if canImport(Glibc)
import Glibc
#endif

/// A value, the lock that guards it, and a condition variable to wait on it: `LockedValue` for
/// the types whose threads wait for the value to change (a writer lane for jobs, a pool's idle
/// threads, a writer for an eviction round to end).
///
/// Like `LockedValue`, the value is reached only inside the lock (`withLock`, `waitFor`), and
/// what goes in or out is checked by the same `sending` rules, so a type that keeps its state in
/// one is `Sendable` without `@unchecked`. It is a `LockedValue` (the value and its pthread
/// mutex) and a pthread condition variable, which ThreadSanitizer sees (`NSCondition` is the same
/// pair, but it leaves the state it guards to the caller's word). A leaf lock, as `LockedValue`'s.
///
/// Waiting: `waitFor` runs its body under the lock and, while the body returns nil, waits for a
/// `signal`/`broadcast` and runs it again; the body is where a waiter both checks the value and
/// takes what it waited for, in one hold of the lock. Whoever changes what a waiter waits for
/// calls `signal` (one waiter may go on) or `broadcast` (several may) after the change, with the
/// lock held or not: the change is made under the lock, and a waiter checks the value and starts
/// waiting in one hold of it, so no wake-up is lost between them.
// @unchecked: the value is only reached with the mutex held (`withLock`, `waitFor`'s body;
// `pthread_cond_wait` lets go of the mutex only while it sleeps, and the body runs again only
// after it took it back); the `sending` parameter and result keep non-Sendable state from leaving
// it, as `LockedValue`'s do.
public final class ConditionLock<Value>: @unchecked Sendable {
    /// The value and its mutex: a `LockedValue`, whose lock this one is.
    @usableFromInline let locked: LockedValue<Value>
    /// The condition variable, in an allocation of its own that never moves (a pthread condition
    /// must stay where it was initialised).
    @usableFromInline let condition: UnsafeMutablePointer<pthread_cond_t>

    public init(_ initial: sending Value) {
        locked = LockedValue(initial)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        // Timed waits count on the monotonic clock: a change of the wall clock does not end them.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        precondition(pthread_cond_init(condition, &attributes) == 0, "pthread_cond_init")
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    /// Runs `body` with the lock held.
    @inlinable @inline(__always)
    public func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try locked.withLock(body)
    }

    /// Runs `body` with the lock held until it returns a result: after each nil it waits for a
    /// `signal` or `broadcast` (or wakes spuriously) and runs again. The lock is let go of only
    /// while it waits, so what `body` saw when it returned a result is what it acts on. (A body
    /// returning a `Bool` never waits: `false` is a result. That is `wait(until:)`.)
    @inlinable @inline(__always)
    public func waitFor<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result?
    ) throws(E) -> sending Result {
        let mutex = locked.mutex
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        nonisolated(unsafe) let value = locked.value
        while true {
            if let result = try body(&value.pointee) { return result }
            pthread_cond_wait(condition, mutex)
        }
    }

    /// Waits until `ready` holds for the value (checked under the lock, again after each wake-up).
    @inlinable @inline(__always)
    public func wait(until ready: (borrowing Value) -> Bool) {
        waitFor { (value: inout Value) -> Void? in ready(value) ? () : nil }
    }

    /// Waits until `ready` holds for the value or `timeout` seconds have passed (a shutdown that
    /// waits for work to end, but not for ever). Returns whether `ready` holds.
    public func wait(until ready: (borrowing Value) -> Bool, timeout: Double) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let whole = timeout.rounded(.down)
        let nanoseconds = deadline.tv_nsec + Int((timeout - whole) * 1e9)
        deadline.tv_sec += Int(whole) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        let mutex = locked.mutex
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        nonisolated(unsafe) let value = locked.value
        while !ready(value.pointee) {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { return ready(value.pointee) }
        }
        return true
    }

    /// Wakes one waiter (it runs its body again). For a change only one waiter can act on.
    @inlinable @inline(__always)
    public func signal() { pthread_cond_signal(condition) }

    /// Wakes every waiter (each runs its body again). For a change several may act on, or
    /// when the waiters wait for different things.
    @inlinable @inline(__always)
    public func broadcast() { pthread_cond_broadcast(condition) }
}
