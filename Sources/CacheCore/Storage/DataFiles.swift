import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The cache's bytes on disk: one sparse data file per version of an entry,
/// `data/<id mod 256, hex>/<entry id>-<generation>.data`, holding the entry's bytes at their own
/// offsets.
///
/// Slices (`sliceSize` bytes each) stay the unit of accounting and eviction: evicting a slice
/// punches its range out of the file (`FALLOC_FL_PUNCH_HOLE`), which frees its blocks at once.
/// One file per version lets a fully cached file be handed to the kernel whole (FUSE
/// passthrough), and a reader keep one descriptor. The generation is in the name, so bytes of a
/// changed remote file can never be read through an old file. Which bytes of a file are valid is
/// the index's business; this type only moves bytes, and retries on EINTR.
///
/// Map of this folder (`Storage/`): everything on disk: bytes, index, and the directory itself.
/// - `DataFiles.swift` (this file): one sparse data file per version; slices punched out.
/// - `CacheIndex.swift`: the SQLite index (entries, extents), written behind memory;
///   `CacheIndex+Respell.swift` its key-spelling migration; `DamagedIndex.swift` a damaged one set aside.
/// - `WriteQueue.swift`: the writer lane for arriving bytes (the engine pool's, keyed by file).
/// - `XXH64.swift`: the checksum of every extent.
/// - `IdleDataFiles.swift`: read descriptors kept for the next reader of the same version.
/// - `KeptDocuments.swift`: last good answers of document requests (WebDAV listings).
/// - `HeldDirectory.swift`: the cache directory held open; every path is relative to it.
/// - `DirectoryLock.swift`: one process per cache directory. `PrivateDirectory.swift`: 0700.
/// - `DirectoryNames.swift`: a listing that says why it failed. `LinuxFileCalls.swift`: punch
///   hole and friends, looked up by name.
/// Neighbours: the bottom layer; uses only `Keys/`, `Memory/`'s chunks (the writer), the engine's
/// clock and errors, and `Read/`'s `readFully`. `Engine/` opens it, `Fetch/` writes, `Read/`
/// reads, `Eviction/` and `Maintenance/` delete and check.
struct DataFiles: Sendable {
    /// The cache directory, held open: every data file is opened, made and deleted relative to
    /// it, never by path, so a directory replaced under the engine never hands it another
    /// cache's files (`HeldDirectory`).
    let held: HeldDirectory
    let sliceSize: Int64

    init(held: HeldDirectory, sliceSize: Int64) {
        self.held = held
        self.sliceSize = sliceSize
    }

    var root: String { held.path }
    /// The data folder's path, for the start's scan (which runs with both locks taken, before
    /// any data file is opened).
    var dataDirectory: String { root + "/data" }

    /// `data/<two hex digits>`, relative to the cache directory: the low byte of the entry id.
    /// Built by hand: `String(format:)` (Foundation's formatter) cost more than the `open` it
    /// named, on every read's open.
    func folder(entry: Int64) -> String {
        let low = Int(entry & 0xFF)
        return "data/" + Self.hexDigits[low >> 4] + Self.hexDigits[low & 0xF]
    }
    private static let hexDigits = (0..<16).map { String($0, radix: 16) }

    /// The data file's name relative to the cache directory.
    func relativePath(entry: Int64, generation: Int64) -> String {
        folder(entry: entry) + "/\(entry)-\(generation).data"
    }

    /// Its full path, for messages and the start's scan.
    func path(entry: Int64, generation: Int64) -> String {
        held.display(relativePath(entry: entry, generation: generation))
    }

    /// Parses a data file name back into its parts (startup scan, removal sweep).
    static func parse(fileName: String) -> (entry: Int64, generation: Int64)? {
        guard fileName.hasSuffix(".data") else { return nil }
        let parts = fileName.dropLast(5).split(separator: "-")
        guard parts.count == 2, let e = Int64(parts[0]), let g = Int64(parts[1]) else { return nil }
        return (e, g)
    }

    /// A slice file of the layout before data files (`<entry>-<generation>-<slice>.slice`), which
    /// a start moves into its data file.
    static func parseLegacySlice(fileName: String) -> (entry: Int64, generation: Int64, slice: Int64)? {
        guard fileName.hasSuffix(".slice") else { return nil }
        let parts = fileName.dropLast(6).split(separator: "-")
        guard parts.count == 3, let e = Int64(parts[0]), let g = Int64(parts[1]), let s = Int64(parts[2]) else { return nil }
        return (e, g, s)
    }

    func sliceIndex(of offset: Int64) -> Int64 { offset / sliceSize }
    func sliceRange(_ slice: Int64) -> Range<Int64> { (slice * sliceSize)..<((slice + 1) * sliceSize) }

    func openForWriting(entry: Int64, generation: Int64) throws -> Int32 {
        let rel = relativePath(entry: entry, generation: generation)
        var fd = held.open(rel, O_RDWR | O_CREAT, mode: 0o600)
        if fd < 0 && errno == ENOENT {
            // Its folder is made on demand (`data` too, if it went). In a deleted cache directory
            // this fails too: nothing new is kept there.
            _ = held.makeDirectory("data")
            if held.makeDirectory(folder(entry: entry)) != 0 { throw StorageError(path: held.display(folder(entry: entry)), errno: errno) }
            fd = held.open(rel, O_RDWR | O_CREAT, mode: 0o600)
        }
        if fd < 0 { throw StorageError(path: held.display(rel), errno: errno) }
        return fd
    }

    func openForReading(entry: Int64, generation: Int64) throws -> Int32 {
        let rel = relativePath(entry: entry, generation: generation)
        let fd = held.open(rel, O_RDONLY)
        if fd < 0 { throw StorageError(path: held.display(rel), errno: errno) }
        return fd
    }

    /// Writes all of `bytes` at `offset` of the data file.
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

    /// Reads `range` of one generation into `buffer` starting at `into`.
    /// Throws if the file is missing or short: the caller treats that as a miss, never as data.
    func read(entry: Int64, generation: Int64, range: Range<Int64>,
              into buffer: UnsafeMutableRawBufferPointer, at bufferOffset: Int) throws {
        let fd = try openForReading(entry: entry, generation: generation)
        defer { close(fd) }
        do throws(ReadFullyFailure) {
            try readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[bufferOffset..<(bufferOffset + range.count)]),
                          at: range.lowerBound)
        } catch {
            throw StorageError(path: path(entry: entry, generation: generation), error)
        }
    }

    /// Frees the blocks of `slices` (their bytes read as zeros afterwards, and the index no
    /// longer lists them). Throws if the file system cannot punch holes.
    func punch(entry: Int64, generation: Int64, slices: [Int64]) throws {
        guard !slices.isEmpty else { return }
        let p = path(entry: entry, generation: generation)
        let fd = held.open(relativePath(entry: entry, generation: generation), O_WRONLY)
        if fd < 0 {
            if errno == ENOENT { return }   // nothing to free
            throw StorageError(path: p, errno: errno)
        }
        defer { close(fd) }
        for s in slices {
            while LinuxFileCalls.punchHole(fd, offset: s * sliceSize, length: sliceSize) != 0 {
                if errno == EINTR { continue }
                throw StorageError(path: p, errno: errno)
            }
        }
    }

    /// Deletes the data file of one generation.
    func remove(entry: Int64, generation: Int64) {
        held.unlink(relativePath(entry: entry, generation: generation))
    }

    /// True when every byte of `range` is in the file: it is long enough and no hole lies inside
    /// (a punched slice whose rows outlived a crash reads as zeros, and zeros are not the bytes).
    /// Nil when the file system would not say (an I/O error): not knowing is no reason to drop
    /// bytes.
    func holds(_ range: Range<Int64>, fd: Int32) -> Bool? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        guard Int64(st.st_size) >= range.upperBound else { return false }
        guard !range.isEmpty else { return true }
        let hole = lseek(fd, off_t(range.lowerBound), LinuxFileCalls.seekHole)
        if hole < 0 { return errno == EINVAL || errno == ENOTSUP ? true : nil }   // no hole support: nothing was punched
        return Int64(hole) >= range.upperBound
    }
}

extension DataFiles {
    /// Checks that the file system under `directory` punches holes, which eviction needs to free
    /// an evicted slice's blocks: where it cannot (FAT, exFAT, some network file systems), the
    /// cache would outgrow its cap on disk, so it refuses to start, saying why. A probe that
    /// cannot even be written (a full disk) proves nothing and lets the start go on.
    static func checkHolePunching(in held: HeldDirectory,
                                  punch: (Int32, Int64, Int64) -> Int32 = LinuxFileCalls.punchHole) throws {
        let directory = held.display("data")
        let probe = "data/.punch-probe-\(getpid())"
        let fd = held.open(probe, O_RDWR | O_CREAT | O_TRUNC, mode: 0o600)
        guard fd >= 0 else { return }
        defer {
            close(fd)
            held.unlink(probe)
        }
        let block = [UInt8](repeating: 1, count: 8192)
        guard block.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == block.count else { return }
        if punch(fd, 0, 4096) != 0, errno == EOPNOTSUPP || errno == ENOSYS {
            throw CacheError.storage(path: directory, message: "this file system cannot punch holes in files, which the cache "
                + "needs to free evicted bytes on disk; put the cache directory on ext4, XFS, Btrfs, F2FS or tmpfs")
        }
    }

    /// True when some byte of `range` is allocated in the file.
    func hasData(_ range: Range<Int64>, fd: Int32) -> Bool {
        let data = lseek(fd, off_t(range.lowerBound), LinuxFileCalls.seekData)
        return data >= 0 && Int64(data) < range.upperBound
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

/// One data file: an entry's version.
struct FileID: Hashable, Sendable {
    var entry: Int64
    var generation: Int64
}
