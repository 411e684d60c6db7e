import ArgumentParser
import CacheCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Readers of mounted files as the benchmarks run them: many at once, and what the kernel keeps.
enum Readers {
    /// Runs `body(i)` for every `i < count`, each on its own thread, all started together (not a
    /// thread pool: on 2 cores a pool would run 2 readers at a time). Returns the wall time until
    /// the last one finished; rethrows the first failure.
    static func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws -> Double {
        let done = DispatchGroup()
        let failure = FirstFailure()
        let start = DispatchTime.now().uptimeNanoseconds
        for i in 0..<count {
            done.enter()
            Thread {
                defer { done.leave() }
                do { try body(i) } catch { failure.record(error) }
            }.start()
        }
        done.wait()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        if let error = failure.error { throw error }
        return elapsed
    }

    /// The first error any reader thread reported.
    private final class FirstFailure: Sendable {
        private let first = LockedValue<Error?>(nil)

        func record(_ error: Error) { first.withLock { if $0 == nil { $0 = error } } }
        var error: Error? { first.withLock { $0 } }
    }

    /// Bytes of the file open at `fd` that are in the kernel's page cache (mincore over a shared
    /// read-only mapping). Through a FUSE mount, these are exactly the bytes the kernel asked
    /// the daemon for, readahead included; nil if the file cannot be mapped.
    static func residentBytes(fd: Int32, length: Int64) -> Int64? {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard length > 0, let map = mmap(nil, Int(length), PROT_READ, MAP_SHARED, fd, 0),
              map != UnsafeMutableRawPointer(bitPattern: -1) else { return nil }
        defer { munmap(map, Int(length)) }
        var vector = [UInt8](repeating: 0, count: (Int(length) + page - 1) / page)
        guard mincore(map, Int(length), &vector) == 0 else { return nil }
        return Int64(vector.reduce(0) { $0 + Int($1 & 1) }) * Int64(page)
    }

    /// Empties the kernel's page cache (root only), so the next read comes from the disk.
    static func dropPageCache() throws {
        sync()
        try "3\n".write(toFile: "/proc/sys/vm/drop_caches", atomically: false, encoding: .utf8)
    }

    static var canDropPageCache: Bool {
        geteuid() == 0 && FileManager.default.isWritableFile(atPath: "/proc/sys/vm/drop_caches")
    }
}
