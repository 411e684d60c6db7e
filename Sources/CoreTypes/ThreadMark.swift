#if canImport(Glibc)
import Glibc
#endif

/// A value each thread holds for itself (a pthread key): a thread marks itself once when it
/// starts, and asking on a hot path (a FUSE read's completion: "am I the loop, or a pool's
/// thread?") takes no lock and allocates nothing, unlike Foundation's `threadDictionary`.
public final class ThreadMark: Sendable {
    private let key: pthread_key_t

    public init() {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        self.key = key
    }

    /// What the calling thread marked itself with; nil if it did not.
    public var current: UnsafeMutableRawPointer? { pthread_getspecific(key) }

    /// Marks the calling thread (nil: unmarks it).
    public func mark(_ value: UnsafeRawPointer?) { pthread_setspecific(key, value) }
}
