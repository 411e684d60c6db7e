import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Files under `/proc`, read whole.
public enum ProcFile {
    /// A `/proc` file read to its end. Foundation's `String(contentsOfFile:)` trusts the size
    /// `stat` reports, which is 0 for these files, and returns what one read gave: the first
    /// 4 KiB of a table of hundreds of sockets.
    public static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > 64 << 20 { break }   // a bound, far beyond any real table
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
