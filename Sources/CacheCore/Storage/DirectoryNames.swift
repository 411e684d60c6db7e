import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The names in a directory, or the reason they could not be read.
///
/// The start's check deletes data files no row describes and drops rows whose file is missing:
/// an empty answer must mean an empty directory, never a directory that could not be read (out
/// of file descriptors, permissions, an I/O error), which `FileManager` answers the same way
/// once its error is dropped.
enum DirectoryNames {
    /// The entries of `path` except `.` and `..`, or the errno that stopped the listing.
    static func names(in path: String) -> Result<[String], StorageError> {
        var names: [String] = []
        return inBatches(in: path, of: Int.max) { names += $0; return true }.map { _ in names }
    }

    /// The entries of `path` except `.` and `..`, handed to `body` `size` at a time as the
    /// directory is read (a folder of any size is read in that much memory); `body` returns false
    /// to stop. True when every entry was handed over, false when `body` stopped the reading.
    /// `body` may delete the names it is given: the directory stays open across batches, and a
    /// name deleted meanwhile does not make `readdir` skip another (POSIX leaves only the deleted
    /// or added name itself unspecified).
    static func inBatches(in path: String, of size: Int, _ body: ([String]) -> Bool) -> Result<Bool, StorageError> {
        guard let dir = opendir(path) else { return .failure(StorageError(path: path, errno: errno)) }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { return .failure(StorageError(path: path, errno: errno)) }
                return .success(names.isEmpty || body(names))
            }
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
            if names.count >= size {
                guard body(names) else { return .success(false) }
                names.removeAll(keepingCapacity: true)
            }
        }
    }
}
