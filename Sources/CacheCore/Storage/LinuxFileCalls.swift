import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The few Linux file calls the data files need that Swift's Glibc module does not import (they
/// are GNU extensions behind `_GNU_SOURCE`), looked up once in the C library by name, so that
/// CacheCore stays free of C targets.
enum LinuxFileCalls {
    static let seekData: Int32 = 3   // SEEK_DATA
    static let seekHole: Int32 = 4   // SEEK_HOLE
    static let keepSize: Int32 = 0x01   // FALLOC_FL_KEEP_SIZE
    static let punchHole: Int32 = 0x02  // FALLOC_FL_PUNCH_HOLE

    private typealias Fallocate = @convention(c) (Int32, Int32, off_t, off_t) -> Int32
    private typealias CopyFileRange = @convention(c) (Int32, UnsafeMutablePointer<off_t>?, Int32,
                                                      UnsafeMutablePointer<off_t>?, Int, UInt32) -> Int

    /// The C library's `name` (the process's global symbols; `dlopen(nil)` hands out one shared,
    /// counted handle, so it is not kept).
    private static func symbol(_ name: String) -> UnsafeMutableRawPointer? { dlsym(dlopen(nil, RTLD_NOW), name) }
    private static let fallocateFn: Fallocate? = symbol("fallocate").map { unsafeBitCast($0, to: Fallocate.self) }
    private static let copyFileRangeFn: CopyFileRange? =
        symbol("copy_file_range").map { unsafeBitCast($0, to: CopyFileRange.self) }

    /// Frees the blocks of `length` bytes at `offset`, keeping the file's size. -1 and errno on
    /// failure (ENOTSUP where the file system cannot punch holes).
    static func punchHole(_ fd: Int32, offset: Int64, length: Int64) -> Int32 {
        guard let f = fallocateFn else { errno = ENOSYS; return -1 }
        return f(fd, keepSize | punchHole, off_t(offset), off_t(length))
    }

    /// Copies `length` bytes in the kernel; the offsets advance. -1 and errno on failure.
    static func copyFileRange(from: Int32, at fromOffset: inout off_t, to: Int32, at toOffset: inout off_t,
                              length: Int) -> Int {
        guard let f = copyFileRangeFn else { errno = ENOSYS; return -1 }
        return f(from, &fromOffset, to, &toOffset, length, 0)
    }
}
