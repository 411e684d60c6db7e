import Foundation
import Glibc

/// Gives the C library's freed heap back to the system. After a large listing page is parsed
/// and let go, glibc keeps the freed blocks (its mmap threshold grows to the size of blocks
/// freed before), so a daemon that once parsed a few hostile 64 MiB pages stayed at hundreds of
/// MB resident with nothing in use. `malloc_trim` is a GNU extension Swift's Glibc module does
/// not import: looked up once by name; without it, this does nothing.
enum HeapTrim {
    private typealias MallocTrim = @convention(c) (Int) -> Int32
    private static let mallocTrim: MallocTrim? =
        dlsym(dlopen(nil, RTLD_NOW), "malloc_trim").map { unsafeBitCast($0, to: MallocTrim.self) }

    /// Pages at least this large are followed by a trim (a small one is not worth its walk of the heap).
    static let threshold = 1 << 20

    /// Returns what the heap holds free to the system. Takes the allocator's locks for a walk of
    /// the heap (milliseconds): call it off any hot path, after the big buffers are let go.
    static func releaseFreedMemory() {
        _ = mallocTrim?(0)
    }
}
