import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Slice files on disk: `data/<id mod 256, hex>/<entry id>-<generation>-<slice>.slice`.
///
/// A slice holds bytes `slice*sliceSize ..< (slice+1)*sliceSize` of one generation of one entry,
/// as a sparse file. The generation is in the name, so bytes of a changed remote file can never be
/// read through an old slice. Which bytes of a slice are valid is the index's business; this type
/// only moves bytes, and retries on EINTR.
struct SliceStore: Sendable {
    let root: String
    let sliceSize: Int64

    init(root: String, sliceSize: Int64) {
        self.root = root
        self.sliceSize = sliceSize
    }

    var dataDirectory: String { root + "/data" }

    func directory(entry: Int64) -> String {
        dataDirectory + "/" + String(format: "%02x", Int(entry & 0xFF))
    }

    func path(entry: Int64, generation: Int64, slice: Int64) -> String {
        directory(entry: entry) + "/\(entry)-\(generation)-\(slice).slice"
    }

    /// Parses a slice file name back into its parts (for orphan cleanup).
    static func parse(fileName: String) -> (entry: Int64, generation: Int64, slice: Int64)? {
        guard fileName.hasSuffix(".slice") else { return nil }
        let parts = fileName.dropLast(6).split(separator: "-")
        guard parts.count == 3, let e = Int64(parts[0]), let g = Int64(parts[1]), let s = Int64(parts[2]) else { return nil }
        return (e, g, s)
    }

    func sliceIndex(of offset: Int64) -> Int64 { offset / sliceSize }
    func sliceRange(_ slice: Int64) -> Range<Int64> { (slice * sliceSize)..<((slice + 1) * sliceSize) }

    func openForWriting(entry: Int64, generation: Int64, slice: Int64) throws -> Int32 {
        let dir = directory(entry: entry)
        let p = path(entry: entry, generation: generation, slice: slice)
        var fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if fd < 0 && errno == ENOENT {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        }
        if fd < 0 { throw StorageError(path: p, errno: errno) }
        return fd
    }

    func openForReading(entry: Int64, generation: Int64, slice: Int64) throws -> Int32 {
        let p = path(entry: entry, generation: generation, slice: slice)
        let fd = open(p, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw StorageError(path: p, errno: errno) }
        return fd
    }

    /// Asks the kernel to start reading `range` (entry offsets) into the page cache. Best effort:
    /// a slice file that is gone meanwhile is simply skipped.
    func adviseWillNeed(entry: Int64, generation: Int64, range: Range<Int64>) {
        var offset = range.lowerBound
        while offset < range.upperBound {
            let slice = sliceIndex(of: offset)
            let end = min(range.upperBound, (slice + 1) * sliceSize)
            let fd = open(path(entry: entry, generation: generation, slice: slice), O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                _ = posix_fadvise(fd, off_t(offset - slice * sliceSize), off_t(end - offset), POSIX_FADV_WILLNEED)
                close(fd)
            }
            offset = end
        }
    }

    /// Writes all of `bytes` at `offset` within the slice file.
    func write(fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, path: @autoclosure () -> String) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw StorageError(path: path(), errno: errno)
            }
            done += n
        }
    }

    /// Reads `range` (entry offsets) of one generation into `buffer` starting at `into`.
    /// Throws if a slice file is missing or short: the caller treats that as a miss, never as data.
    func read(entry: Int64, generation: Int64, range: Range<Int64>,
              into buffer: UnsafeMutableRawBufferPointer, at bufferOffset: Int) throws {
        var offset = range.lowerBound
        var out = bufferOffset
        while offset < range.upperBound {
            let slice = sliceIndex(of: offset)
            let sliceEnd = min(range.upperBound, (slice + 1) * sliceSize)
            let p = path(entry: entry, generation: generation, slice: slice)
            let fd = open(p, O_RDONLY | O_CLOEXEC)
            if fd < 0 { throw StorageError(path: p, errno: errno) }
            defer { close(fd) }
            let want = Int(sliceEnd - offset)
            do throws(ReadFullyFailure) {
                try readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[out..<(out + want)]),
                              at: offset - slice * sliceSize)
            } catch {
                throw StorageError(path: p, error)
            }
            out += want
            offset = sliceEnd
        }
    }

    func remove(entry: Int64, generation: Int64, slice: Int64) {
        unlink(path(entry: entry, generation: generation, slice: slice))
    }

    /// Size of a slice file, or nil if it does not exist.
    func fileSize(entry: Int64, generation: Int64, slice: Int64) -> Int64? {
        var st = stat()
        guard stat(path(entry: entry, generation: generation, slice: slice), &st) == 0 else { return nil }
        return Int64(st.st_size)
    }
}

/// A failed file operation, with the path and the system's reason.
struct StorageError: Error, CustomStringConvertible {
    var path: String
    var message: String
    var code: Int32 = 0

    init(path: String, errno code: Int32) {
        self.path = path
        self.code = code
        self.message = String(cString: strerror(code))
    }

    init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    var isDiskFull: Bool { code == ENOSPC || code == EDQUOT }
    var description: String { "\(path): \(message)" }

    var cacheError: CacheError {
        isDiskFull ? .diskFull(path: path) : .storage(path: path, message: message)
    }
}
