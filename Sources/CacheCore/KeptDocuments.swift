import Foundation

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
    let directory: String
    private let lock = NSLock()

    init(cacheDirectory: String) {
        directory = cacheDirectory + "/documents"
    }

    private func path(method: String, key: CacheKey) -> String {
        directory + "/" + String(format: "%016llx", XXH64.hash(Array("\(method) \(key.string)".utf8)))
    }

    /// The kept answer to `method` on `key`, or nil (none, or not readable as one).
    func load(method: String, key: CacheKey) -> Document? {
        guard let data = FileManager.default.contents(atPath: path(method: method, key: key)) else { return nil }
        let bytes = [UInt8](data)
        guard let first = bytes.firstIndex(of: 0x0A),
              String(decoding: bytes[..<first], as: UTF8.self) == Self.magic,
              let second = bytes[(first + 1)...].firstIndex(of: 0x0A),
              let header = try? JSONDecoder().decode(Header.self, from: Data(bytes[(first + 1)..<second])),
              header.method == method, header.key == key.string
        else { return nil }
        return Document(storedAt: Date(timeIntervalSince1970: header.storedAt), body: Array(bytes[(second + 1)...]))
    }

    /// Keeps `body` as the answer to `method` on `key` (replacing the previous one).
    func store(method: String, key: CacheKey, body: [UInt8], at date: Date) throws {
        let header = Header(method: method, key: key.string, storedAt: date.timeIntervalSince1970)
        var file = Array((Self.magic + "\n").utf8)
        file += try JSONEncoder().encode(header)
        file.append(0x0A)
        file += body
        let target = path(method: method, key: key)
        try lock.withLock {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            trimIfFull()
            let temporary = target + ".tmp"
            guard FileManager.default.createFile(atPath: temporary, contents: Data(file), attributes: [.posixPermissions: 0o600]) else {
                throw CacheError.storage(path: temporary, message: "cannot write a kept listing")
            }
            guard rename(temporary, target) == 0 else {
                let e = errno
                unlink(temporary)
                throw CacheError.storage(path: target, message: String(cString: strerror(e)))
            }
        }
    }

    /// Removes every kept document.
    func removeAll() {
        lock.withLock { _ = try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Caller holds `lock`.
    private func trimIfFull() {
        guard case let .success(names) = DirectoryNames.names(in: directory), names.count >= Self.maxDocuments else { return }
        let dated = names.map { name -> (String, Date) in
            let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/" + name)
            return (name, attributes?[.modificationDate] as? Date ?? .distantPast)
        }
        for (name, _) in dated.sorted(by: { $0.1 < $1.1 }).prefix(names.count - Self.maxDocuments / 2) {
            unlink(directory + "/" + name)
        }
    }
}
