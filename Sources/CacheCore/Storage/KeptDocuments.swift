import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The last good answer to each document request (a WebDAV folder's `PROPFIND` multistatus),
/// kept in `<cache>/documents`, so that a WebDAV listing lives like a GET listing: answered from
/// the cache while younger than the caller's max age, and served when the origin is down (a mount
/// of a WebDAV library whose server is away starts from it).
///
/// Why a store of its own rather than entries of the slice cache: a PROPFIND's answer is not the
/// resource's bytes (a GET of the same URL is another document, often a 403 page), it is read
/// whole and small, and it has no validators to revalidate with. Keyed by the method and the
/// URL's cache key, no GET can collide with it, and eviction, ranges and generations stay out of
/// it. Each file is `<magic line>\n<JSON header>\n<body>`; the header's method and key are
/// checked on load (a hash collision or a damaged file is a miss, never a wrong listing).
/// Written to a temporary file, then renamed into place. `clear` removes them with the rest.
///
/// Any thread; calls do small blocking file I/O (one listing), as the index's writes do.
final class KeptDocuments: Sendable {
    struct Document: Equatable {
        var storedAt: Date
        var body: [UInt8]
    }

    private struct Header: Codable {
        var method: String
        var key: String
        var storedAt: Double
    }

    static let magic = "httpcachefs-document 1"
    /// A bound on what a hostile origin's folders can make this hold: past it, the oldest go.
    static let maxDocuments = 20_000
    /// The cache directory, held open by the engine: every file here is named relative to it
    /// (`HeldDirectory`), so a directory replaced under the engine never hands it another
    /// process's listings.
    private let held: HeldDirectory
    static let folder = "documents"
    /// Its path, for messages.
    var directory: String { held.display(Self.folder) }
    private let lock = NSLock()

    init(held: HeldDirectory) {
        self.held = held
    }

    private func name(method: String, key: CacheKey) -> String {
        Self.folder + "/" + String(format: "%016llx", XXH64.hash(Array("\(method) \(key.string)".utf8)))
    }

    /// The kept answer to `method` on `key`, or nil (none, or not readable as one).
    func load(method: String, key: CacheKey) -> Document? {
        guard let bytes = read(name(method: method, key: key)) else { return nil }
        guard let first = bytes.firstIndex(of: 0x0A),
              String(decoding: bytes[..<first], as: UTF8.self) == Self.magic,
              let second = bytes[(first + 1)...].firstIndex(of: 0x0A),
              let header = try? JSONDecoder().decode(Header.self, from: Data(bytes[(first + 1)..<second])),
              header.method == method, header.key == key.string
        else { return nil }
        return Document(storedAt: Date(timeIntervalSince1970: header.storedAt), body: Array(bytes[(second + 1)...]))
    }

    /// The whole file `relative`, or nil.
    private func read(_ relative: String) -> [UInt8]? {
        let fd = held.open(relative, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { return out }
            out += buffer[..<n]
        }
    }

    /// Keeps `body` as the answer to `method` on `key` (replacing the previous one).
    func store(method: String, key: CacheKey, body: [UInt8], at date: Date) throws {
        let header = Header(method: method, key: key.string, storedAt: date.timeIntervalSince1970)
        var file = Array((Self.magic + "\n").utf8)
        file += try JSONEncoder().encode(header)
        file.append(0x0A)
        file += body
        let target = name(method: method, key: key)
        try lock.withLock {
            guard held.makeDirectory(Self.folder) == 0 else {
                throw CacheError.storage(path: directory, message: String(cString: strerror(errno)))
            }
            trimIfFull()
            let temporary = target + ".tmp"
            let fd = held.open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            guard fd >= 0 else {
                throw CacheError.storage(path: held.display(temporary), message: "cannot write a kept listing: \(String(cString: strerror(errno)))")
            }
            var written = 0
            while written < file.count {
                let n = file.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                written += n
            }
            close(fd)
            guard written == file.count, held.rename(temporary, to: target) == 0 else {
                let e = errno
                held.unlink(temporary)
                throw CacheError.storage(path: held.display(target), message: String(cString: strerror(e)))
            }
        }
    }

    /// Removes every kept document.
    func removeAll() {
        lock.withLock {
            for name in held.names(in: Self.folder) ?? [] { held.unlink(Self.folder + "/" + name) }
            _ = unlinkat(held.fd, Self.folder, AT_REMOVEDIR)
        }
    }

    /// Caller holds `lock`.
    private func trimIfFull() {
        guard let names = held.names(in: Self.folder), names.count >= Self.maxDocuments else { return }
        let dated = names.map { name -> (String, Int) in
            var st = stat()
            return (name, fstatat(held.fd, Self.folder + "/" + name, &st, 0) == 0 ? st.st_mtim.tv_sec : 0)
        }
        for (name, _) in dated.sorted(by: { $0.1 < $1.1 }).prefix(names.count - Self.maxDocuments / 2) {
            held.unlink(Self.folder + "/" + name)
        }
    }
}
